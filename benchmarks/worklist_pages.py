"""The worklist's pages over many stored batch results: this checkout against an older one.

Builds one SQLite database of `--items` image results (14 findings each; one in
`--disagree` disagrees with its report on one finding), then, for each checkout, on its
own copy of the database and in its own process: the first page (newest first, 100
rows), every page (following the cursor to the end) and, where the checkout sorts in the
query, the same by probability, and the one-time derivation of the rows of results stored
before the worklist had rows (`crud.index_worklist`). Median of `--repeat` runs each.

    git worktree add /tmp/base e7791fa     # the worklist before its rows were stored
    python benchmarks/worklist_pages.py --items 20000 --against /tmp/base
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_kit import say

ROOT = Path(__file__).resolve().parents[1]


def _result(rng: random.Random, disagree: bool) -> dict[str, object]:
    from labeler.schema import Label

    labels = [label.value for label in Label]
    probabilities = {label: round(rng.random() * 0.4, 4) for label in labels}
    report = dict.fromkeys(labels, "absent")
    if disagree:  # the report names a finding the model calls negative
        report[rng.choice(labels)] = "positive"
    return {
        "kind": "image",
        "rows": 2500,
        "columns": 2048,
        "view_position": "PA",
        "accession_number": f"A{rng.randrange(10**8)}",
        "study_instance_uid": f"1.2.{rng.randrange(10**12)}",
        "report": {"labels": report, "source": "csv"},
        "prediction": {
            "probabilities": probabilities,
            "positive": [],
            "boxes": [],
            "thresholds": dict.fromkeys(labels, 0.5),
        },
    }


def build(path: Path, items: int, every: int) -> None:
    """The database, with this checkout's schema (a superset of the older one's)."""
    from sqlalchemy import create_engine, insert

    from app.db.models import Base, BatchItem, BatchJobRow

    engine = create_engine(f"sqlite:///{path}")
    Base.metadata.create_all(engine)
    rng = random.Random(0)
    with engine.begin() as conn:
        conn.execute(
            insert(BatchJobRow),
            [{"id": "job-0", "state": "done", "source_kind": "path", "source": "x"}],
        )
        rows = [
            {
                "job_id": "job-0",
                "path": f"im{i:06d}.dcm",
                "kind": "image",
                "state": "done",
                "result": _result(rng, i % every == 0),
            }
            for i in range(items)
        ]
        for start in range(0, items, 5000):
            conn.execute(insert(BatchItem), rows[start : start + 5000])
    engine.dispose()


CHILD = r"""
import inspect, json, statistics, sys, time
from sqlalchemy import create_engine
from sqlalchemy.orm import Session
from app import crud
from app.worklist import list_discrepancies

engine = create_engine("sqlite:///" + sys.argv[1])
repeat = int(sys.argv[2])
keyset_sorts = "sort" in inspect.signature(list_discrepancies).parameters
out = {}

def timed(name, call):
    took = []
    for _ in range(repeat):
        with Session(engine) as session:
            start = time.perf_counter()
            rows = call(session)
            took.append(time.perf_counter() - start)
    out[name] = (statistics.median(took), rows)

def every_page(session, **sort):
    rows, cursor = 0, None
    while True:
        if keyset_sorts:
            page = list_discrepancies(session, cursor=cursor, limit=100, **sort)
        else:
            page = list_discrepancies(session, before=cursor, limit=100)
        rows += len(page.items)
        cursor = page.next_cursor
        if cursor is None:
            return rows

if hasattr(crud, "index_worklist"):
    with Session(engine) as session:
        start = time.perf_counter()
        crud.index_worklist(session)
        out["derive the rows of old results (once)"] = (time.perf_counter() - start, None)
timed("first page, newest first", lambda s: len(list_discrepancies(s, limit=100).items))
timed("every page, newest first", every_page)
if keyset_sorts:
    timed(
        "first page, by probability",
        lambda s: len(list_discrepancies(s, sort="probability", limit=100).items),
    )
    timed("every page, by probability", lambda s: every_page(s, sort="probability"))
print(json.dumps(out))
"""


def run(tree: Path, db: Path, repeat: int) -> dict[str, tuple[float, int | None]]:
    """Time one checkout on its own copy of the database."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "worklist.db"
        shutil.copy(db, copy)
        done = subprocess.run(
            [sys.executable, "-c", CHILD, str(copy), str(repeat)],
            cwd=tree,
            env=os.environ | {"PYTHONPATH": str(tree)},
            capture_output=True,
            text=True,
            check=True,
        )
    timings: dict[str, tuple[float, int | None]] = json.loads(done.stdout)
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--items", type=int, default=20000)
    parser.add_argument("--disagree", type=int, default=20, help="one item in N disagrees")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--against", type=Path, help="an older checkout to compare with")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "worklist.db"
        start = time.perf_counter()
        build(db, args.items, args.disagree)
        say(
            f"{args.items:,} results, one in {args.disagree} disagreeing "
            f"({time.perf_counter() - start:.1f} s to build)"
        )
        trees = [("this checkout", ROOT)]
        if args.against is not None:
            trees.insert(0, (f"against {args.against}", args.against.resolve()))
        for name, tree in trees:
            for what, (seconds, rows) in run(tree, db, args.repeat).items():
                counted = f", {rows:,} rows" if rows is not None else ""
                say(f"{name}: {what}: {seconds * 1000:,.1f} ms{counted}")
    say(f"(medians of {args.repeat}; derivation timed once, on a fresh copy)")


if __name__ == "__main__":
    main()
