#!/usr/bin/env bash
# Every GPU figure of docs/benchmarks.md, each step with its own time limit, logs under $OUT.
#
#   bash benchmarks/gpu_suite.sh unpack [all|core|extra]   unpack .whl/site.tar.xz, then run
#   bash benchmarks/gpu_suite.sh core     prediction, service latency, training, cuda tests
#   bash benchmarks/gpu_suite.sh extra    training from the prepared cache, compiled; the paper's CAM
#   bash benchmarks/gpu_suite.sh all      core, then extra, as far as SUITE_SECONDS allows
#   bash benchmarks/gpu_suite.sh STEP...  the steps named (see run_step), in that order
#   BASE=DIR bash benchmarks/gpu_suite.sh ...  the prediction steps also time the checkout
#                                           in DIR (carried in a git-ignored folder) in the
#                                           same run; `service-latency-base` serves from it
#
# On a machine without the project's packages (the lent GPU machine: torch, numpy, OpenCV
# and Pillow only), `python benchmarks/gpu_site.py` packs them here into one archive that
# fits one call beside the working tree; carry it and start with `unpack` (it lands in
# .devsite/). Steps run most important first; each gets its own limit, cut to what is left
# of SUITE_SECONDS (default 540, so that one 600-second call holds the lot), and a step
# that would get under 30 s is skipped. Each step's output goes to $OUT/<step>.log (eight
# files at most come back from a call: the summary and seven steps); $OUT/summary.log has
# each step's last lines and exit status.
set -o pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-gpu-logs}
mkdir -p "$OUT" .devsite
export PYTHONPATH="$PWD/.devsite:$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
[ -n "${BASE:-}" ] && BASE=$(cd "$BASE" && pwd)  # absolute: a step runs from inside it
DEADLINE=$((SECONDS + ${SUITE_SECONDS:-540}))

step() {  # step NAME SECONDS COMMAND...: run it with a limit, keep its log
    local name=$1 limit=$2 left=$((DEADLINE - SECONDS)) rc
    shift 2
    if [ "$left" -lt 30 ]; then
        echo "=== $name: skipped, ${left}s left of SUITE_SECONDS" | tee -a "$OUT/summary.log"
        return
    fi
    [ "$limit" -le "$left" ] || limit=$left
    echo "=== $name (limit ${limit}s, $(date +%T))" | tee -a "$OUT/summary.log"
    timeout --kill-after=10 "$limit" "$@" > "$OUT/$name.log" 2>&1
    rc=$?
    tail -n 6 "$OUT/$name.log" | tee -a "$OUT/summary.log"
    echo "--- $name: exit $rc$([ $rc = 124 ] && echo ' (time limit)')" | tee -a "$OUT/summary.log"
}

unpack() {
    [ -f .whl/site.tar.xz ] || { echo "gpu_suite: .whl/site.tar.xz not carried" >&2; exit 1; }
    tar -C .devsite -xJf .whl/site.tar.xz && touch .devsite/.site || exit 1
    echo "unpacked .whl/site.tar.xz into .devsite/ (${SECONDS}s)"
}

ready() {  # the packages present and the project importing; a failure is logged, not fatal
    [ -f .devsite/.site ] || echo "gpu_suite: no .devsite/.site (carry .whl/site.tar.xz and unpack)" | tee -a "$OUT/summary.log"
    $PY -c "import pydicom, fastapi, spacy, app.main, models.predict" 2>&1 | tail -n 3 | tee -a "$OUT/summary.log"
}

about() {
    {
        nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
        df -h /dev/shm | tail -n 1
        echo "cores $(nproc); $($PY -V); torch $($PY -c 'import torch; print(torch.__version__)'); commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
    } 2>&1 | tee -a "$OUT/summary.log"
}

run_step() {  # one named step, with its limit
    local e2e="--device cuda --sizes 1024 --batch-size 32 --steps 15 --end-to-end --unique 64 --images 1280 --epochs 3"
    local thr="--mode throughput --device cuda --image-size 1024 --batch-size 16 --n 512 --repeat 1${BASE:+ --base $BASE}"
    local lat="--mode latency --device cuda --image-size 1024 --n 150"
    case $1 in
        predict-layercam) step "$1" 120 $PY benchmarks/predict.py $thr ;;
        predict-stride32) step "$1" 120 $PY benchmarks/predict.py $thr --output-stride 32 ;;
        # The images fitted by the workers and by the GPU, interleaved in one step.
        predict-fit-both) step "$1" 200 $PY benchmarks/predict.py $thr --fit both ;;
        predict-fit-both-stride32) step "$1" 200 $PY benchmarks/predict.py $thr --fit both \
            --output-stride 32 ;;
        # Uploads decoded in worker processes and in the server's threads, one after the other.
        service-latency) step "$1" 160 $PY benchmarks/predict.py $lat --decode both --repeat 1 ;;
        # The older checkout's own benchmark and server, on the same machine.
        service-latency-base) step "$1" 100 env PYTHONPATH="$PWD/.devsite:$BASE" \
            sh -c "cd '$BASE' && exec $PY benchmarks/predict.py $lat" ;;
        train-end-to-end) step "$1" 170 $PY benchmarks/train_throughput.py $e2e ;;
        # The gpu tests live with the models' tests; collecting only those is seconds.
        cuda-tests) step "$1" 120 $PY -m pytest -q -p no:cacheprovider -o addopts="" -m gpu \
            --continue-on-collection-errors tests/models ;;
        train-prepared) step "$1" 150 $PY benchmarks/train_throughput.py $e2e --prepared ;;
        train-compiled) step "$1" 220 $PY benchmarks/train_throughput.py $e2e --compile ;;
        predict-cam) step "$1" 100 $PY benchmarks/predict.py $thr --heatmaps-from cam ;;
        # cxr batch, images read in the run's thread against 15 decoding workers.
        batch-workers) step "$1" 240 $PY benchmarks/batch_throughput.py --n 256 --arch resnet50 \
            --image-size 1024 --device cuda --chunk-size 16 --workers 0,15 --repeat 1 \
            ${BASE:+--base $BASE} ;;
        # cxr batch writing a training set: each chunk recorded while the next runs (against
        # BASE, a checkout from before the recording thread, e.g. 962b5c7).
        batch-dataset) step "$1" 200 $PY benchmarks/batch_throughput.py --n 256 --arch resnet50 \
            --image-size 1024 --device cuda --chunk-size 16 --workers 15 --dataset --repeat 1 \
            ${BASE:+--base $BASE} ;;
        predict-ceilings) step "$1" 150 $PY benchmarks/predict_ceilings.py --device cuda \
            --image-size 1024 --n 512 ;;
        *) echo "gpu_suite: no step $1" | tee -a "$OUT/summary.log" ;;
    esac
}

CORE="predict-layercam service-latency train-end-to-end cuda-tests"
EXTRA="train-prepared train-compiled predict-cam predict-ceilings predict-stride32 predict-fit-both predict-fit-both-stride32 batch-workers batch-dataset"

[ "${1:-}" = unpack ] && { unpack; shift; [ $# = 0 ] && exit 0; }
case ${1:-all} in
    core) steps=$CORE ;;
    extra) steps=$EXTRA ;;
    all) steps="$CORE $EXTRA" ;;
    *) steps="$*" ;;  # named steps, in the order given
esac
ready
about
for name in $steps; do run_step "$name"; done
echo "=== done $(date +%T), ${SECONDS}s; logs in $OUT" | tee -a "$OUT/summary.log"
