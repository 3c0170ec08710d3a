"""Every finding a report names, against the OpenI coders' MeSH codes.

The Indiana coders gave each OpenI report its findings as MeSH-style codes
(`heading/qualifier/...;...`, or `normal`). This script labels the dev reports with
`cxr label` and scores, per report, the set of headings read against the coded set:

- `--mode labels`: today's 14 labels projected onto the coders' headings (a positive
  Effusion is "Pleural Effusion", No Finding is "normal"), the baseline;
- `--mode findings`: `cxr label --findings`, each positive finding's `mesh` heading.

Printed: micro precision, recall and F1 over headings (positive findings only: the coders
code what is seen, not a hedged diagnosis), F1 of "normal", and the headings most often
missed and most often added, so a reader can see where the reading falls short.

    python benchmarks/findings.py --mode labels
    python benchmarks/findings.py --mode findings --keep /tmp/findings

The data lives in ../shared/data/openi (or $CXR_SHARED_DATA/openi); without it the script
says so and exits 0. The report text is never copied into the repository.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from bench_kit import say
from openi_labeler import CXR, shared_data

#: ChestX-ray14 label -> the heading the coders use for it (the `labels` projection).
LABEL_HEADINGS = {
    "Atelectasis": "Pulmonary Atelectasis",
    "Cardiomegaly": "Cardiomegaly",
    "Effusion": "Pleural Effusion",
    "Infiltration": "Infiltrate",
    "Mass": "Mass",
    "Nodule": "Nodule",
    "Pneumonia": "Pneumonia",
    "Pneumothorax": "Pneumothorax",
    "Consolidation": "Consolidation",
    "Edema": "Pulmonary Edema",
    "Emphysema": "Pulmonary Emphysema",
    "Fibrosis": "Pulmonary Fibrosis",
    "Pleural_Thickening": "Thickening",
    "Hernia": "Hernia, Hiatal",
}
#: Codes that name no finding: scored apart ("normal") or not at all.
NOT_FINDINGS = {"normal", "No Indexing"}


@dataclass
class Score:
    """Counts over reports: headings (micro) and the normal flag."""

    tp: int = 0
    fp: int = 0
    fn: int = 0
    normal: Counter[str] = field(default_factory=Counter)  # tp, fp, fn of "normal"
    missed: Counter[str] = field(default_factory=Counter)
    added: Counter[str] = field(default_factory=Counter)

    def add(self, gold: set[str], got: set[str], gold_normal: bool, got_normal: bool) -> None:
        """Count one report."""
        self.tp += len(gold & got)
        self.fp += len(got - gold)
        self.fn += len(gold - got)
        self.missed.update(gold - got)
        self.added.update(got - gold)
        if gold_normal and got_normal:
            self.normal["tp"] += 1
        elif got_normal:
            self.normal["fp"] += 1
        elif gold_normal:
            self.normal["fn"] += 1


def prf(tp: int, fp: int, fn: int) -> tuple[float, float, float]:
    """Precision, recall and F1 (0 where undefined)."""
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def coded_headings(mesh: str) -> tuple[set[str], bool]:
    """The headings of one report's MeSH codes (qualifiers dropped) and its normal flag."""
    codes = [c.strip() for c in mesh.split(";") if c.strip()]
    headings = {c.split("/")[0].strip() for c in codes}
    return headings - NOT_FINDINGS, "normal" in headings


def read_headings(result: dict[str, object], mode: str) -> tuple[set[str], bool]:
    """The headings one `cxr label` result reads, and whether it calls the report normal."""
    if mode == "labels":
        labels = result.get("labels") or {}
        assert isinstance(labels, dict)
        got = {LABEL_HEADINGS[k] for k, v in labels.items() if v == "positive"}
        return got, bool(result.get("no_finding"))
    got = set()
    for finding in result.get("report_findings") or []:  # type: ignore[union-attr]
        mesh = finding.get("mesh") if isinstance(finding, dict) else None
        if finding.get("status") == "positive" and isinstance(mesh, str) and mesh:
            got.add(mesh.split("/")[0])
    return got - NOT_FINDINGS, bool(result.get("normal"))


def main(argv: list[str] | None = None) -> int:
    """Label the OpenI dev reports and score the headings read."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", choices=["labels", "findings"], default="findings")
    ap.add_argument("--keep", type=Path, help="keep reports.csv and labels.jsonl here")
    ap.add_argument("--limit", type=int, default=0, help="first N reports only")
    ap.add_argument("--top", type=int, default=15, help="headings listed as missed/added")
    args = ap.parse_args(argv)

    openi = shared_data() / "openi"
    if not (openi / "indiana_reports_dev.csv").is_file():
        say(f"findings: {openi} not found; nothing to score (exit 0)")
        return 0
    rows = list(csv.DictReader((openi / "indiana_reports_dev.csv").open(encoding="utf-8")))
    rows = [r for r in rows if (r["findings"] or r["impression"]).strip()]
    if args.limit:
        rows = rows[: args.limit]
    work = args.keep or Path(tempfile.mkdtemp(prefix="cxr-findings-"))
    work.mkdir(parents=True, exist_ok=True)
    reports = work / "reports.csv"
    with reports.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["id", "report"])
        for r in rows:
            w.writerow([r["uid"], f"FINDINGS: {r['findings']}\nIMPRESSION: {r['impression']}"])
    out = work / "labels.jsonl"
    command = [*CXR, "label", str(reports), "-o", str(out), "-q"]
    if args.mode == "findings":
        command.append("--findings")
    began = time.perf_counter()
    subprocess.run(command, check=True)
    seconds = time.perf_counter() - began

    results = {}
    with out.open(encoding="utf-8") as f:
        for line in f:
            result = json.loads(line)
            results[str(result["id"])] = result
    score = Score()
    for r in rows:
        gold, gold_normal = coded_headings(r["MeSH"])
        got, got_normal = read_headings(results[r["uid"]], args.mode)
        score.add(gold, got, gold_normal, got_normal)

    p, rec, f1 = prf(score.tp, score.fp, score.fn)
    n = score.normal
    np_, nr, nf = prf(n["tp"], n["fp"], n["fn"])
    say(f"{len(rows)} OpenI dev reports, mode {args.mode}: `cxr label` took {seconds:.1f} s")
    say(f"headings (micro, positive): P {p:.3f}  R {rec:.3f}  F1 {f1:.3f}")
    say(f"normal:                     P {np_:.3f}  R {nr:.3f}  F1 {nf:.3f}")
    say(f"most missed: {', '.join(f'{h} {c}' for h, c in score.missed.most_common(args.top))}")
    say(f"most added:  {', '.join(f'{h} {c}' for h, c in score.added.most_common(args.top))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
