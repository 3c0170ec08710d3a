#!/usr/bin/env bash
# Every GPU figure of docs/benchmarks.md, each step with its own time limit, logs under $OUT.
#
#   bash benchmarks/gpu_suite.sh unpack [core|extra]   unpack .whl/site-*.tar.xz, then run
#   bash benchmarks/gpu_suite.sh core                  cuda tests, prediction, service, training
#   bash benchmarks/gpu_suite.sh extra                 the paper's CAM, no positives, compile
#
# On a machine without the project's packages (the lent GPU machine: torch, numpy, OpenCV
# and Pillow only), `python benchmarks/gpu_site.py` packs them here into two archives that
# each fit one call; carry one per call and unpack it (it stays in .devsite/ while the
# machine is held). The order that fits a 15-minute lease is in docs/benchmarks.md ("GPU").
# `core` takes about 8 minutes, `extra` about 7. Each step's output goes to
# $OUT/<step>.log; $OUT/summary.log has each step's last lines and exit status.
set -o pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-gpu-logs}
mkdir -p "$OUT" .devsite
export PYTHONPATH="$PWD/.devsite:$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}

step() {  # step NAME SECONDS COMMAND...: run it with a limit, keep its log
    local name=$1 limit=$2 rc
    shift 2
    echo "=== $name (limit ${limit}s, $(date +%T))" | tee -a "$OUT/summary.log"
    timeout --kill-after=10 "$limit" "$@" > "$OUT/$name.log" 2>&1
    rc=$?
    tail -n 6 "$OUT/$name.log" | tee -a "$OUT/summary.log"
    echo "--- $name: exit $rc$([ $rc = 124 ] && echo ' (time limit)')" | tee -a "$OUT/summary.log"
}

unpack() {
    local found=0
    for archive in .whl/site-*.tar.xz; do
        [ -f "$archive" ] || continue
        tar -C .devsite -xJf "$archive" && touch ".devsite/.$(basename "$archive" .tar.xz)" || exit 1
        found=1
    done
    [ $found = 1 ] || { echo "gpu_suite: no .whl/site-*.tar.xz carried" >&2; exit 1; }
    echo "unpacked: $(cd .devsite && ls -A | grep '^\.site-' | tr '\n' ' ')"
}

ready() {  # both halves present, and the project imports with them
    for part in a b; do
        [ -f ".devsite/.site-$part" ] || { echo "gpu_suite: .devsite lacks site-$part (carry .whl/site-$part.tar.xz and unpack)" >&2; exit 1; }
    done
    $PY -c "import pydicom, fastapi, spacy, app.main, models.predict" || exit 1
}

about() {
    {
        nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
        echo "cores $(nproc); $($PY -V); torch $($PY -c 'import torch; print(torch.__version__)'); commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
    } 2>&1 | tee -a "$OUT/summary.log"
}

core() {
    ready
    about
    # Test modules whose packages are not carried fail to collect; the gpu tests still run.
    step cuda-tests 120 $PY -m pytest -q -p no:cacheprovider -o addopts="" -m gpu \
        --continue-on-collection-errors tests
    step predict-layercam 120 $PY benchmarks/predict.py --mode throughput --device cuda \
        --image-size 1024 --batch-size 16 --n 512 --repeat 1
    step service-latency 100 $PY benchmarks/predict.py --mode latency --device cuda \
        --image-size 1024 --n 150
    step train-end-to-end 170 $PY benchmarks/train_throughput.py --device cuda --sizes 1024 \
        --batch-size 32 --steps 15 --end-to-end --unique 64 --images 1280 --epochs 3
}

extra() {
    ready
    about
    step predict-cam 100 $PY benchmarks/predict.py --mode throughput --device cuda \
        --image-size 1024 --batch-size 16 --n 512 --repeat 1 --heatmaps-from cam
    step predict-no-positive 100 $PY benchmarks/predict.py --mode throughput --device cuda \
        --image-size 1024 --batch-size 16 --n 512 --repeat 1 --positives 0
    step train-compiled 220 $PY benchmarks/train_throughput.py --device cuda --sizes 1024 \
        --batch-size 32 --steps 15 --end-to-end --unique 64 --images 1280 --epochs 3 --compile
}

case ${1:-core} in
    unpack) unpack; shift; [ $# = 0 ] || exec bash "$0" "$@" ;;
    core) core ;;
    extra) extra ;;
    *) echo "usage: $0 unpack [core|extra] | core | extra" >&2; exit 2 ;;
esac
echo "=== done $(date +%T); logs in $OUT" | tee -a "$OUT/summary.log"
