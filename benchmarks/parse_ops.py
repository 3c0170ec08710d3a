"""The labeler's parse with thinc's BLIS and with NumPy's BLAS: same trees, and the CPU time.

`LabelerConfig(blas="numpy")` (what `cxr label` uses) runs the spaCy model's matrix products
through NumPy's BLAS (`NumpyOps(use_blis=False)`) instead of thinc's default BLIS, whose
shipped build falls back to its generic reference kernel on CPUs newer than the build (AMD
Zen 3 and 4). Different BLAS libraries round differently in the last bits, so this checks
what matters: every
distinct sentence of the OpenI dev reports (as the labeler splits them) is tagged and
parsed by both, and the tags, heads and dependency labels are compared token by token.
It prints how many sentences differ (0 on the development machine) and the CPU time of
each, best of `--repeat`.

Usage:
    python benchmarks/parse_ops.py [--repeat 2] [--limit N]

The report text stays in ../shared/data (CXR_SHARED_DATA); exits 0 with a message when
it is absent. The time depends on the machine and its load: report the load average.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as `cxr` runs it; before numpy loads

from bench_kit import shared_data  # noqa: E402

_PARSE_PIPES = ("tok2vec", "tagger", "parser")


def sentences(limit: int | None) -> list[str]:
    """The distinct sentences of the OpenI dev reports, as the labeler's parser reads them."""
    from labeler.config import LabelerConfig
    from labeler.normalize import clean_text, parse_text
    from labeler.sections import labelled_spans, split_sentences
    from labeler.vocabulary import load_sections

    config = LabelerConfig()
    sections = load_sections(str(config.sections), config.profile)
    source = shared_data() / "openi" / "indiana_reports_dev.csv"
    out: dict[str, None] = {}
    for row in csv.DictReader(source.open(encoding="utf-8")):
        clean = clean_text(f"FINDINGS: {row['findings']}\nIMPRESSION: {row['impression']}")
        for sec in labelled_spans(clean, sections, use_sections=True):
            for s, e in split_sentences(
                clean,
                sec.start,
                sec.end,
                sections.wrap_words,
                sections.line_starters,
                max_chars=config.max_sentence_chars,
            ):
                out[parse_text(clean[s:e]).text] = None
    return list(out)[:limit]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=2, help="runs per backend; best is kept")
    parser.add_argument("--limit", type=int, help="only the first N sentences")
    args = parser.parse_args(argv)
    if not (shared_data() / "openi" / "indiana_reports_dev.csv").is_file():
        sys.stderr.write("OpenI data not found; skipping (set CXR_SHARED_DATA)\n")
        return 0

    from labeler.spacy_loading import import_spacy_without_torch

    import_spacy_without_torch()
    from labeler.config import LabelerConfig
    from labeler.pipeline import build_nlp

    pipelines = {
        "BLIS (blas='blis', thinc's default)": build_nlp(LabelerConfig()),
        "NumPy's BLAS (blas='numpy', cxr label)": build_nlp(LabelerConfig(blas="numpy")),
    }
    texts = sentences(args.limit)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    sys.stdout.write(f"{len(texts)} distinct sentences, load average {load:.2f}\n")
    trees: dict[str, list[list[tuple[str, int, str]]]] = {}
    best = dict.fromkeys(pipelines, float("inf"))
    for _ in range(args.repeat):
        for name, nlp in pipelines.items():  # interleaved: both see the same load
            docs = [nlp.make_doc(t) for t in texts]
            t0 = time.process_time()
            for pipe in _PARSE_PIPES:
                docs = list(nlp.get_pipe(pipe).pipe(docs, batch_size=256))  # type: ignore[attr-defined]
            best[name] = min(best[name], time.process_time() - t0)
            trees[name] = [[(t.tag_, t.head.i, t.dep_) for t in doc] for doc in docs]
    first, second = trees.values()
    differ = sum(a != b for a, b in zip(first, second, strict=True))
    tokens = sum(len(doc) for doc in first)
    sys.stdout.write(f"{tokens} tokens; sentences whose tags or tree differ: {differ}\n")
    for name, cpu in best.items():
        sys.stdout.write(f"{name}: {cpu:.2f} s CPU (tok2vec, tagger, parser)\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
