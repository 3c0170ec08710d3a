"""What a labeler change fixes and what it breaks, counted on the OpenI development reports.

Runs `cxr label` of this checkout and of another (`--against DIR`, e.g. `git worktree add
/tmp/base HEAD~1`) on the same 3,059 OpenI dev reports and compares both with the gold, report
by report and label by label: a *fix* is a (report, label) the other checkout got wrong and
this one gets right, a *break* the reverse. Uncertain counts as negative, as in `cxr
evaluate-labels` (the OpenI coders code only findings they see). "No Finding" is scored
against the gold's `normal` column.

With `--labels chexpert` both run the CheXpert label set and are compared on the seven
observations the OpenI gold shares with it, plus No Finding.

    python benchmarks/rule_effects.py --against /tmp/base [--labels chexpert] [--show 10]

Prints per label: fixed, broken, net; then the report ids of the first `--show` changes of
each kind (ids only: the report text stays in ../shared/data, whose licence forbids copies).
Exits 0 with a message when the OpenI data is absent.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from bench_kit import say, shared_data
from openi_labeler import LABELS, SHARED_CHEXPERT, build_inputs

POSITIVE = {"positive"}


def read_pred(path: Path, names: dict[str, str]) -> dict[str, dict[str, bool]]:
    """report id -> {gold label name: predicted positive}, No Finding included."""
    out: dict[str, dict[str, bool]] = {}
    for line in path.open(encoding="utf-8"):
        row = json.loads(line)
        labels = row.get("labels", {})
        got = {gold: labels.get(pred) in POSITIVE for gold, pred in names.items()}
        got["No Finding"] = bool(row.get("no_finding"))
        out[str(row["id"])] = got
    return out


def read_gold(path: Path) -> dict[str, dict[str, bool]]:
    import csv

    return {
        r["id"]: {k: v == "1" for k, v in r.items() if k != "id"}
        for r in csv.DictReader(path.open(encoding="utf-8"))
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--against", type=Path, required=True, help="the other checkout")
    parser.add_argument("--labels", choices=["chestxray14", "chexpert"], default="chestxray14")
    parser.add_argument("--show", type=int, default=8, help="report ids shown per change kind")
    args = parser.parse_args(argv)

    openi = shared_data() / "openi"
    if not (openi / "indiana_reports_dev.csv").is_file():
        sys.stderr.write(f"OpenI data not found in {openi}; skipping (set CXR_SHARED_DATA)\n")
        return 0
    names = (
        dict(SHARED_CHEXPERT)
        if args.labels == "chexpert"
        else {lab: lab for lab in LABELS if lab != "Hernia"}
    )
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        reports, gold_path, _ = build_inputs(openi, work)
        gold = read_gold(gold_path)
        preds = {}
        roots = {"this": Path(__file__).resolve().parents[1], "against": args.against.resolve()}
        for name, root in roots.items():
            out = work / f"{name}.jsonl"
            cmd = [sys.executable, "-m", "app.cli", "label", str(reports), "-q", "-o", str(out),
                   "--labels", args.labels]  # fmt: skip
            env = {**os.environ, "PYTHONPATH": str(root)}
            subprocess.run(cmd, check=True, cwd=root, env=env)
            preds[name] = read_pred(out, names)
    fixed: Counter[str] = Counter()
    broken: Counter[str] = Counter()
    examples: dict[tuple[str, str], list[str]] = {}
    for rid, want in gold.items():
        new, old = preds["this"].get(rid), preds["against"].get(rid)
        if new is None or old is None:
            continue
        for label in [*names, "No Finding"]:
            truth = want["No Finding" if label == "No Finding" else label]
            if new[label] == old[label]:
                continue
            kind = "fixed" if new[label] == truth else "broken"
            (fixed if kind == "fixed" else broken)[label] += 1
            examples.setdefault((label, kind), []).append(rid)
    say(f"{len(gold)} OpenI dev reports, label set {args.labels}: this checkout against "
        f"{args.against}")  # fmt: skip
    say(f"{'label':<20} {'fixed':>6} {'broken':>7} {'net':>5}")
    for label in [*names, "No Finding"]:
        if fixed[label] or broken[label]:
            f, b = fixed[label], broken[label]
            say(f"{label:<20} {f:>6} {b:>7} {f - b:>+5}")
    f, b = sum(fixed.values()), sum(broken.values())
    say(f"{'total':<20} {f:>6} {b:>7} {f - b:>+5}")
    for (label, kind), ids in sorted(examples.items()):
        say(f"  {label} {kind}: {' '.join(ids[: args.show])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
