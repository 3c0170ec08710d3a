"""Accuracy of `cxr label` on the OpenI (Indiana University) reports with the MeSH-derived gold.

Builds each report as `FINDINGS: <findings>\\nIMPRESSION: <impression>` (the
NegBio / ChestX-ray14 protocol) into a temporary CSV, runs `cxr label` on it and
`cxr evaluate-labels` against openi_gold14_dev.csv. Hernia is left out of the
totals (the gold has no Hernia positives) and also scored against the
`Problems` column ("Hernia, Hiatal" / "Hernia, Diaphragmatic").

With `--labels chexpert` it runs the CheXpert label set instead and scores
the 7 observations the OpenI gold shares with it (Atelectasis, Cardiomegaly,
Effusion as Pleural Effusion, Pneumonia, Pneumothorax, Consolidation, Edema):
positive-only gold, so only positive P/R/F1 mean anything there.

Usage:
    python benchmarks/openi_labeler.py [--labels chexpert] [--keep DIR] [-- extra options]

The data lives in ../shared/data/openi beside the repository (override with
CXR_SHARED_DATA). Exits 0 with a message when it is absent. The report text
is never copied into the repository (its licence forbids derivatives).
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_kit import shared_data

LABELS = [
    "Atelectasis", "Cardiomegaly", "Effusion", "Infiltration", "Mass", "Nodule", "Pneumonia",
    "Pneumothorax", "Consolidation", "Edema", "Emphysema", "Fibrosis", "Pleural_Thickening",
    "Hernia",
]  # fmt: skip


CXR = [sys.executable, "-m", "app.cli"]
#: OpenI gold column -> CheXpert observation, for the labels they share
SHARED_CHEXPERT = {
    "Atelectasis": "Atelectasis", "Cardiomegaly": "Cardiomegaly", "Effusion": "Pleural Effusion",
    "Pneumonia": "Pneumonia", "Pneumothorax": "Pneumothorax", "Consolidation": "Consolidation",
    "Edema": "Edema",
}  # fmt: skip


def build_inputs(openi: Path, workdir: Path) -> tuple[Path, Path, int]:
    """Write reports.csv (id, report) and gold.csv (id, 14 labels, No Finding)."""
    reports = list(csv.DictReader((openi / "indiana_reports_dev.csv").open(encoding="utf-8")))
    gold = {
        row["filename"]: row
        for row in csv.DictReader((openi / "openi_gold14_dev.csv").open(encoding="utf-8"))
    }
    rpath, gpath = workdir / "reports.csv", workdir / "gold.csv"
    with (
        rpath.open("w", newline="", encoding="utf-8") as rf,
        gpath.open("w", newline="", encoding="utf-8") as gf,
    ):
        rw, gw = csv.writer(rf), csv.writer(gf)
        rw.writerow(["id", "report"])
        gw.writerow(["id", *LABELS, "No Finding"])
        for r in reports:
            rid = "CXR" + r["uid"]
            if rid not in gold:
                continue
            rw.writerow([rid, f"FINDINGS: {r['findings']}\nIMPRESSION: {r['impression']}"])
            problems = {p.strip() for p in r["Problems"].split(";")}
            g = gold[rid]
            hernia = "1" if problems & {"Hernia, Hiatal", "Hernia, Diaphragmatic"} else "0"
            gw.writerow(
                [rid, *(g[lab] if lab != "Hernia" else hernia for lab in LABELS), g["normal"]]
            )
    return rpath, gpath, len(gold)


def _rename_gold(gold: Path, out: Path) -> None:
    rows = list(csv.DictReader(gold.open(encoding="utf-8")))
    with out.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["id", *SHARED_CHEXPERT.values()])
        for r in rows:
            w.writerow([r["id"], *(r[k] for k in SHARED_CHEXPERT)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keep", type=Path, help="keep the inputs, predictions and scores here")
    parser.add_argument(
        "--labels", choices=["chestxray14", "chexpert", "chexpert-labeler"], default="chestxray14"
    )
    parser.add_argument("label_args", nargs="*", help="extra `cxr label` options (after --)")
    args = parser.parse_args(argv)

    openi = shared_data() / "openi"
    if not (openi / "indiana_reports_dev.csv").is_file():
        sys.stderr.write(f"OpenI data not found in {openi}; skipping (set CXR_SHARED_DATA)\n")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        reports, gold, n = build_inputs(openi, work)
        pred = work / "pred.jsonl"
        t0 = time.perf_counter()
        cmd = [*CXR, "label", str(reports), "-o", str(pred), "-q", "--labels", args.labels]
        cmd += args.label_args
        subprocess.run(cmd, check=True)
        elapsed = time.perf_counter() - t0
        sys.stdout.write(f"labelled {n} reports in {elapsed:.1f} s ({n / elapsed:.0f} reports/s)\n")
        if args.labels.startswith("chexpert"):
            shared = work / "gold_chexpert.csv"
            _rename_gold(gold, shared)
            sys.stdout.write("\n7 observations shared with the OpenI gold (positive only):\n")
            sys.stdout.flush()
            subprocess.run(
                [*CXR, "evaluate-labels", str(pred), str(shared), "--labels", args.labels,
                 "--no-chexpert-metrics", "-o", str(work / "scores.json")],
                check=True,
            )  # fmt: skip
            return 0
        sys.stdout.write("\n13 labels (Hernia scored apart, against the Problems column):\n")
        sys.stdout.flush()
        subprocess.run(
            [*CXR, "evaluate-labels", str(pred), str(gold), "--ignore", "Hernia",
             "-o", str(work / "scores.json")],
            check=True,
        )  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
