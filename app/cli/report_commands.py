"""`cxr label` (also on Ray, `--ray`) and `cxr evaluate-labels`.

Only the standard library and `app.cli.common` are imported at module level: `cxr label`
must start without torch or the web stack. The labeler is imported inside the handlers.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import IO, TYPE_CHECKING, Any

from app.cli.common import add_ray_argument, fail
from labeler.spacy_loading import import_spacy_without_torch

if TYPE_CHECKING:
    from pathlib import Path

    from labeler.config import LabelerConfig
    from labeler.labelsets import LabelSet
    from labeler.schema import ReportLabels

__all__ = ["register"]

_EXIT_OK, _EXIT_FAILED_REPORTS = 0, 1


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add `label` and `evaluate-labels` to `cxr`."""
    _register_label(sub)
    _register_evaluate_labels(sub)


# --- label --------------------------------------------------------------------------------


def _register_label(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser(
        "label",
        help="label free-text reports with the 14 ChestX-ray14 findings",
        description=(
            "Label chest X-ray reports (positive / negative / uncertain / absent per label, "
            "No Finding, and the evidence). INPUT is a CSV (columns id,report), a JSONL file "
            "or a folder of .txt files. Exit status 1 when any report failed (its row "
            "carries the error), 2 when the input cannot be read."
        ),
    )
    p.add_argument(
        "input",
        help="CSV, JSONL (.jsonl) or folder of .txt files; - (or a pipe) reads standard "
        "input, JSONL when it starts with '{', else CSV (or say which with --input-format)",
    )
    p.add_argument("-o", "--output", default="-", help="output file (default: stdout)")
    p.add_argument(
        "--format",
        choices=["jsonl", "csv"],
        help="jsonl (default; full evidence) or csv (CheXpert convention: 1, 0, -1, blank); "
        "default: from the output suffix",
    )
    p.add_argument(
        "--attribute-columns",
        action="store_true",
        help="csv: add '<label> <attribute>' columns (laterality, location, severity, size_mm, "
        "count, change) after the label columns; JSONL always carries them as `findings`",
    )
    p.add_argument("--input-format", choices=["csv", "jsonl", "folder"], help="default: detect")
    p.add_argument("--id-column", default="id", help="CSV column / JSON key of the id (id)")
    p.add_argument(
        "--text-column", default="report", help="CSV column / JSON key of the text (report)"
    )
    _add_label_set_arguments(p)
    p.add_argument(
        "--explain",
        action="store_true",
        help="add an `explanation` to each JSON result: every mention, the rule that "
        "fired and why each label got its status",
    )
    p.add_argument(
        "--workers", type=int, default=1, help="worker processes (0: one per CPU; default 1)"
    )
    p.add_argument("--batch-size", type=int, default=64, help="reports per batch (64)")
    add_ray_argument(p)
    _add_reading_arguments(p)
    p.add_argument("--rejects", help="also write failed reports (id, error) to this CSV")
    p.add_argument(
        "--strict", action="store_true", help="stop at the first report that cannot be labelled"
    )
    p.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress bar (errors and the one-line summary still go to stderr)",
    )
    p.set_defaults(handler=_label)


def _add_label_set_arguments(p: argparse.ArgumentParser) -> None:
    """Which labels, and how hedges and a site's wording are read."""
    p.add_argument(
        "--labels",
        default="chestxray14",
        metavar="SET",
        help="label set: chestxray14 (default), chestxray8, chexpert (the 14 CheXpert "
        "observations, graded as radiologists grade hedges), chexpert-labeler (the CheXpert "
        "labeler's own conventions), or a label set YAML file",
    )
    p.add_argument(
        "--certainty",
        choices=["radiologist", "negbio", "chexpert-labeler"],
        help="how hedges become statuses: radiologist ('likely pneumonia' positive, 'may "
        "represent pneumonia' uncertain), negbio or chexpert-labeler (every hedge "
        "uncertain); default: the label set's (negbio for chestxray14/8, radiologist for "
        "chexpert)",
    )
    p.add_argument(
        "--profile",
        help="site profile YAML: extra section headers, synonyms, abbreviations",
    )


def _add_reading_arguments(p: argparse.ArgumentParser) -> None:
    """Which part of a report is read, within which bounds, with which pattern files."""
    p.add_argument(
        "--whole-report",
        action="store_true",
        help="label the whole text, not only FINDINGS and IMPRESSION",
    )
    p.add_argument("--no-negex", action="store_true", help="skip the negspacy second opinion")
    p.add_argument(
        "--findings",
        action="store_true",
        help="also read every finding the report names (devices, granulomas, fractures, "
        "open findings such as 'opacity'...), each with its concept, MeSH heading, status "
        "and attributes, and whether the report is normal (JSONL: `report_findings`, `normal`)",
    )
    p.add_argument("--lexicon", help="chest lexicon YAML for --findings (default: lexicon.v1)")
    p.add_argument("--max-chars", type=int, default=100_000, help="longest report (100000)")
    p.add_argument(
        "--cache-size",
        type=int,
        default=100_000,
        help="sentences whose verdicts are remembered per worker (0: no cache; 100000)",
    )
    p.add_argument("--concepts", help="concept vocabulary YAML (default: packaged concepts.v1)")
    p.add_argument("--rules", help="negation/uncertainty rules YAML (default: rules.v1)")
    p.add_argument("--sections", help="section headers YAML (default: sections.v1)")
    p.add_argument(
        "--statements", help="explicit statements YAML (default: the label set's, statements.v1)"
    )


def _label(args: argparse.Namespace) -> int:
    import tempfile
    from pathlib import Path

    source = Path(args.input)
    if args.input != "-" and (source.is_file() or source.is_dir() or not source.exists()):
        return _label_from(args, source)
    # Standard input or a pipe: read twice (counted, then labelled), so spooled to a file.
    with tempfile.TemporaryDirectory(prefix="cxr-label-") as tmp:
        reader = sys.stdin.buffer if args.input == "-" else source.open("rb")
        with reader:
            data = reader.read()
        fmt = args.input_format or ("jsonl" if data.lstrip()[:1] == b"{" else "csv")
        if fmt == "folder":
            return fail("label", "standard input is one file: CSV or JSONL, not a folder")
        spooled = Path(tmp) / f"stdin.{fmt}"
        spooled.write_bytes(data)
        args.input_format = fmt
        return _label_from(args, spooled)


def _label_from(args: argparse.Namespace, source: Path) -> int:
    import gc
    import itertools
    import os
    import time

    started = time.perf_counter()

    # This process only labels: a young-generation collection every 50,000 allocations
    # instead of 700 (CPython's default) saves about 7% of labelling time; the cyclic
    # garbage that waits meanwhile is a few megabytes at most.
    gc.set_threshold(50_000, 20, 20)

    from labeler.errors import LabelerError
    from labeler.files import count_reports, detect_input_format, iter_reports
    from labeler.labelsets import load_label_set
    from labeler.parallel import loading

    try:
        with loading():  # the pattern files and the lexicon, kept for the whole run
            config = _labeler_config(args)
        label_set = load_label_set(config.label_set)
        fmt = args.input_format or detect_input_format(source)
        if fmt == "folder" and not source.is_dir():
            return fail("label", f"{source} is not a folder (--input-format folder)")
        total = count_reports(source, fmt)
    except (LabelerError, ValueError, OSError) as exc:
        return fail("label", str(exc))
    if fmt == "folder" and not total:
        # Nothing to do is a mistake here (a folder of CSVs, of .TXT, of DICOMs), not a run.
        return fail(
            "label",
            f"{source}: no .txt report file in this folder or below; a CSV or JSONL "
            "file is read when given itself as the input",
        )
    if args.workers < 0 or args.batch_size < 1:
        return fail("label", "--workers must be >= 0 and --batch-size >= 1")
    workers = args.workers or os.cpu_count() or 1
    to_file = args.output not in (None, "-")
    out_format = args.format or (
        "csv" if to_file and args.output.lower().endswith(".csv") else "jsonl"
    )
    if args.findings and out_format == "csv":
        return fail("label", "--findings writes JSON Lines (`report_findings`): give -o FILE.jsonl")

    from tqdm import tqdm

    with loading():
        import_spacy_without_torch()
    failed = labelled = 0
    for kind, name in (("output", args.output if to_file else None), ("rejects", args.rejects)):
        if name and _same_file(name, source):
            return fail("label", f"the {kind} file {name} is the input: give another path")
    items = iter_reports(source, fmt=fmt, id_column=args.id_column, text_column=args.text_column)
    try:
        # The first report is read (a CSV's header checked) before the output is opened:
        # a bad input must not empty an existing output file.
        first = next(items, None)
    except (LabelerError, ValueError, OSError) as exc:
        return fail("label", str(exc))
    if first is not None:
        items = itertools.chain([first], items)
    with contextlib.ExitStack() as stack:
        try:
            out, rejects = _open_outputs(args.output, args.rejects, stack)
        except OSError as exc:
            return fail("label", f"cannot open output: {exc}")
        # CheXpert's CSV starts with the report text: keep the texts in flight
        # (results come in input order, one per input)
        texts: deque[object] | None = None
        if out_format == "csv" and any(c.endswith("={text}") for c in label_set.csv_columns):
            texts = deque()
            items = _remembering(items, texts)
        write = _result_writer(
            out,
            rejects,
            label_set,
            csv_format=out_format == "csv",
            attributes=args.attribute_columns,
            explained=args.explain,
            texts=texts,
        )
        bar = stack.enter_context(
            tqdm(total=total, unit="report", file=sys.stderr, disable=args.quiet or None)
        )
        if args.ray is not None and out_format == "jsonl" and not args.explain:
            # the lines written by the Ray actors; this process only writes text
            try:
                labelled, failed = _write_lines_from_ray(args, items, config, out, rejects, bar)
            except LabelerError as exc:  # --strict: the first report that cannot be labelled
                return fail("label", str(exc))
            except BrokenPipeError:
                return _EXIT_OK
            out.flush()
            sys.stderr.write(_label_summary(args, labelled, failed, time.perf_counter() - started))
            return _EXIT_FAILED_REPORTS if failed else _EXIT_OK
        results = _label_reports(args, items, config, workers)
        try:
            for result in results:
                write(result)
                if result.error is not None:
                    failed += 1
                else:
                    labelled += 1
                bar.update()
        except LabelerError as exc:  # --strict: the first report that cannot be labelled
            return fail("label", str(exc))
        except BrokenPipeError:
            return _EXIT_OK
        out.flush()
    sys.stderr.write(_label_summary(args, labelled, failed, time.perf_counter() - started))
    return _EXIT_FAILED_REPORTS if failed else _EXIT_OK


def _labeler_config(args: argparse.Namespace) -> LabelerConfig:
    """The labeler's configuration from the options, its pattern files loaded now so that a
    bad file fails before any work (LabelerError, ValueError or OSError)."""
    from app.blas import labeler_blas
    from labeler.config import LabelerConfig
    from labeler.vocabulary import load_concepts, load_rules, load_sections, load_statements

    config = LabelerConfig(
        label_set=args.labels,
        certainty=args.certainty,
        profile=args.profile,
        negex=not args.no_negex,
        max_chars=args.max_chars,
        use_sections=not args.whole_report,
        cache_size=args.cache_size,
        findings=args.findings,
        blas=labeler_blas(),  # NumPy's OpenBLAS where it runs one thread (app.blas)
        **{
            k: v
            for k, v in (
                ("lexicon", args.lexicon),
                ("concepts", args.concepts),
                ("rules", args.rules),
                ("sections", args.sections),
                ("statements", args.statements),
            )
            if v
        },
    )
    load_concepts(str(config.concepts), config.profile)
    load_rules(str(config.rules))
    load_sections(str(config.sections), config.profile)
    if config.statements:
        load_statements(config.statements)
    if config.findings:
        from labeler.lexicon import load_lexicon

        load_lexicon(config.lexicon)
    return config


def _remembering(
    items: Iterator[tuple[str, Any]], texts: deque[object]
) -> Iterator[tuple[str, Any]]:
    for rid, text in items:
        texts.append(text)
        yield rid, text


def _same_file(name: str, source: Any) -> bool:
    """True when `name` is the file `source` (an existing path, compared by inode)."""
    import os

    try:
        return os.path.samefile(name, source)
    except OSError:  # either does not exist (yet): not the same file
        return False


def _open_outputs(
    output: str | None, rejects: str | None, stack: contextlib.ExitStack
) -> tuple[IO[str], IO[str] | None]:
    """The output (stdout for None or "-") and the rejects file, closed with `stack`."""
    from labeler.files import open_output

    out = open_output(output)
    if out is not sys.stdout:
        stack.enter_context(out)
    return out, (
        stack.enter_context(open(rejects, "w", encoding="utf-8", newline="")) if rejects else None
    )


def _result_writer(
    out: IO[str],
    rejects: IO[str] | None,
    label_set: LabelSet,
    *,
    csv_format: bool,
    attributes: bool,
    explained: bool,
    texts: deque[object] | None,
) -> Callable[[ReportLabels], None]:
    """Write the headers now; return what writes one result: a JSONL line or a CSV row (its
    report text taken from `texts` when the columns start with it), and a failed report's
    id and error to `rejects` too."""
    import csv

    from labeler.explain import explain
    from labeler.files import write_csv_header, write_csv_row, write_jsonl

    columns = label_set.csv_columns
    writer = csv.writer(out) if csv_format else None
    if writer is not None:
        write_csv_header(writer, columns, attributes=attributes)
    reject_writer = csv.writer(rejects) if rejects else None
    if reject_writer is not None:
        reject_writer.writerow(["id", "error"])

    def write(result: ReportLabels) -> None:
        if writer is not None:
            text = texts.popleft() if texts is not None else None
            write_csv_row(
                writer,
                result,
                columns,
                text if isinstance(text, str) else None,
                attributes=attributes,
            )
        else:
            write_jsonl(result, out, explain(result, label_set) if explained else None)
        if result.error is not None and reject_writer is not None:
            reject_writer.writerow([result.id, result.error])

    return write


def _label_reports(
    args: argparse.Namespace,
    items: Iterable[tuple[str, Any]],
    config: LabelerConfig,
    workers: int,
) -> Iterator[ReportLabels]:
    """The reports labelled in input order: in `workers` processes, or on Ray (`--ray`)."""
    from labeler.parallel import label_reports_parallel

    if args.ray is not None:
        return _label_on_ray(
            args.ray, items, config, args.batch_size, args.strict, verbose=args.verbose
        )
    return label_reports_parallel(
        items,
        config=config,
        workers=workers,
        on_error="raise" if args.strict else "skip",
        batch_size=args.batch_size,
    )


def _label_on_ray(
    address: str,
    items: Iterable[tuple[str, Any]],
    config: LabelerConfig,
    batch_size: int,
    strict: bool,
    *,
    verbose: bool = False,
) -> Iterator[ReportLabels]:
    """`cxr label --ray`: the reports labelled on Ray, in input order (`--strict`: the first
    failed report raises its `LabelerError`, as without `--ray`)."""
    from batch.cluster import label_reports_on_ray, ray_session
    from labeler import LabelerError

    with ray_session(address or None, verbose=verbose):
        for result in label_reports_on_ray(items, config=config, batch_size=batch_size):
            if strict and result.error is not None:
                raise LabelerError(f"report {result.id}: {result.error}")
            yield result


def _write_lines_from_ray(
    args: argparse.Namespace,
    items: Iterable[tuple[str, Any]],
    config: LabelerConfig,
    out: IO[str],
    rejects: IO[str] | None,
    bar: Any,
) -> tuple[int, int]:
    """`cxr label --ray` to JSON Lines: the actors write each block's lines, this process
    writes them out in input order (and the failures to `rejects`, whose header is
    written); returns (labelled, failed).

    Raises:
        LabelerError: `--strict` and a report failed (the lines before it are written).
    """
    import csv

    from batch.cluster import label_report_lines_on_ray, ray_session
    from labeler import LabelerError

    reject_writer = csv.writer(rejects) if rejects else None
    labelled = failed = 0
    with ray_session(args.ray or None, verbose=args.verbose):
        for block in label_report_lines_on_ray(items, config=config, batch_size=args.batch_size):
            if args.strict and block.failures:
                index, report_id, error = block.failures[0]
                out.write("".join(block.lines.splitlines(keepends=True)[:index]))
                raise LabelerError(f"report {report_id}: {error}")
            out.write(block.lines)
            if reject_writer is not None:
                reject_writer.writerows([rid, error] for _, rid, error in block.failures)
            failed += len(block.failures)
            labelled += block.count - len(block.failures)
            bar.update(block.count)
    return labelled, failed


def _label_summary(args: argparse.Namespace, labelled: int, failed: int, seconds: float) -> str:
    """`cxr label`'s one line whatever -q says (-q silences the progress bar only): what was
    done, where it went and how long it took."""
    where = args.output if args.output not in (None, "-") else "stdout"
    failures = (
        f", {failed:,} failed (their rows carry the error"
        + (f"; also in {args.rejects})" if args.rejects else ")")
        if failed
        else ""
    )
    return (
        f"cxr label: {labelled:,} report{'' if labelled == 1 else 's'} labelled{failures} "
        f"-> {where} in {seconds:.1f} s\n"
    )


# --- evaluate-labels ----------------------------------------------------------------------


def _register_evaluate_labels(sub: argparse._SubParsersAction[Any]) -> None:
    e = sub.add_parser(
        "evaluate-labels",
        help="score predicted labels against a gold standard",
        description=(
            "Per-label precision, recall and F1 with micro and macro totals. PRED is "
            "`cxr label` JSONL or a CSV (id + label columns, 1/0/-1/blank); GOLD is a CSV "
            "with an id column and one column per label (1/0 or 1/0/-1/blank). A `No Finding` "
            "column, when both have it, is scored apart from the totals. A GOLD with the "
            "columns id, label, attribute, expected scores finding attributes instead "
            "(accuracy per attribute; PRED must be `cxr label` JSONL). With --labels chexpert "
            "it also reports the CheXpert paper's metrics; a CheXpert CSV without ids pairs "
            "by text: --id-column Reports --pred-id-column Reports."
        ),
    )
    e.add_argument("pred", help="predictions: cxr label JSONL, or CSV")
    e.add_argument("gold", help="gold CSV")
    e.add_argument("--id-column", default="id", help="id column of GOLD (default id)")
    e.add_argument("--pred-id-column", default="id", help="id column of a PRED CSV (default id)")
    e.add_argument(
        "--labels",
        default="chestxray14",
        metavar="SET",
        help="label set: chestxray14 (default), chestxray8, chexpert, chexpert-labeler, or a "
        "label set YAML file",
    )
    e.add_argument(
        "--chexpert-metrics",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also report the CheXpert paper's F1 of mention, negation, uncertainty and "
        "positive per label and macro (GOLD must code 1/0/-1/blank; default on with "
        "--labels chexpert)",
    )
    e.add_argument(
        "--ignore",
        action="append",
        default=[],
        metavar="LABEL",
        help="leave a label out of the totals (repeatable), e.g. --ignore Hernia",
    )
    e.add_argument(
        "--uncertain",
        choices=["negative", "positive"],
        default="negative",
        help="how uncertain predictions and -1 gold values count (default negative)",
    )
    e.add_argument("-o", "--output", help="also write the scores as JSON to this file")
    e.set_defaults(handler=_evaluate)


def _evaluate(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from labeler.disagreements import (
        find_disagreements,
        format_disagreements,
        read_mention_rules,
    )
    from labeler.errors import LabelerError
    from labeler.files import NO_FINDING, read_gold, read_predictions
    from labeler.labelsets import load_label_set
    from labeler.scoring import format_chexpert_table, format_table, score_chexpert, score_labels

    if _is_attribute_gold(Path(args.gold)):
        return _evaluate_attributes(args)
    try:
        label_set = load_label_set(args.labels)
    except LabelerError as exc:
        return fail("evaluate-labels", str(exc))
    names = list(label_set.labels)
    unknown = sorted(set(args.ignore) - set(names))
    if unknown:
        return fail("evaluate-labels", f"--ignore: unknown label(s) {', '.join(unknown)}")
    try:
        gold, present = read_gold(Path(args.gold), id_column=args.id_column, labels=names)
        pred = read_predictions(Path(args.pred), id_column=args.pred_id_column, labels=names)
    except (LabelerError, OSError) as exc:
        return fail("evaluate-labels", str(exc))
    if gold and pred and not gold.keys() & pred.keys():
        return fail(
            "evaluate-labels",
            f"no report id of {args.gold} is in {args.pred}: check --id-column and "
            "--pred-id-column",
        )
    scored = [lab for lab in present if lab not in args.ignore]
    has_nf = any(NO_FINDING in g for g in gold.values()) and any(
        NO_FINDING in p for p in pred.values()
    )
    scores = score_labels(
        pred,
        gold,
        scored,
        extra=[lab for lab in args.ignore if lab in present] + ([NO_FINDING] if has_nf else []),
        uncertain=args.uncertain,
    )
    sys.stdout.write(format_table(scores) + "\n")
    report = scores.to_dict()
    try:
        rules = read_mention_rules(Path(args.pred))
    except LabelerError as exc:
        return fail("evaluate-labels", str(exc))
    counted = [*scored, *([NO_FINDING] if has_nf else [])]
    found = find_disagreements(pred, gold, counted, rules, uncertain=args.uncertain)
    sys.stdout.write("\n" + format_disagreements(found) + "\n")
    report["disagreements"] = found.to_dict()
    chexpert = args.chexpert_metrics
    if chexpert is None:
        chexpert = label_set.name.startswith("chexpert")
    if chexpert:
        cx = score_chexpert(pred, gold, scored)
        sys.stdout.write("\nCheXpert metrics (F1):\n" + format_chexpert_table(cx) + "\n")
        report["chexpert"] = cx.to_dict()
    if args.output:
        try:
            Path(args.output).write_text(json.dumps(report, indent=2) + "\n")
        except OSError as exc:
            return fail("evaluate-labels", f"cannot write {args.output}: {exc}")
    return _EXIT_OK


def _is_attribute_gold(path: object) -> bool:
    """Whether GOLD is an attribute gold CSV (columns id, label, attribute, expected)."""
    import csv
    from pathlib import Path

    try:
        with Path(str(path)).open(encoding="utf-8", newline="") as f:
            header = next(csv.reader(f), [])
    except (OSError, UnicodeDecodeError):
        return False  # the label path reports the error
    return {"attribute", "expected", "label"} <= {h.strip() for h in header}


def _evaluate_attributes(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from labeler.attribute_scoring import (
        format_attribute_table,
        read_attribute_gold,
        read_findings,
        score_attributes,
    )
    from labeler.errors import LabelerError

    try:
        gold = read_attribute_gold(Path(args.gold))
        findings = read_findings(Path(args.pred))
    except LabelerError as exc:
        return fail("evaluate-labels", str(exc))
    scores = score_attributes(findings, gold)
    sys.stdout.write(format_attribute_table(scores) + "\n")
    if args.output:
        try:
            Path(args.output).write_text(json.dumps(scores.to_dict(), indent=2) + "\n")
        except OSError as exc:
            return fail("evaluate-labels", f"cannot write {args.output}: {exc}")
    return _EXIT_OK
