"""`cxr ask`: questions in plain English about a report, an image, or both.

Only the standard library and `app.cli.common` are imported at module level; the labeler
(and torch, only when an image is given) are imported by the handler.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.cli.common import add_demo_argument, demo_model_path, fail, model_hint
from labeler.spacy_loading import import_spacy_without_torch

if TYPE_CHECKING:
    from models.image_findings import ImageFindings
    from models.predict import Predictor

__all__ = ["register"]


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add `ask` to `cxr`."""
    p = sub.add_parser(
        "ask",
        help="answer questions about a report and/or an image (presence, position, size, ...)",
        description=(
            "Answer a plain-English question about a study: from the report (--report), "
            "the image (--image, with --model or --demo) or both, with the evidence "
            "and a discrepancy flag when they disagree. Many at once: --questions FILE.csv "
            "with columns id,report,image,question (report text inline; image a path or "
            "empty), one JSON object per row to -o. Exit status 1 when a row failed (its "
            "image could not be read), 2 when the input cannot be read. See docs/questions.md."
        ),
    )
    p.add_argument("--report", help="report text, or a file holding it")
    p.add_argument("--image", help="DICOM, PNG or JPEG file")
    p.add_argument("--question", help="the question")
    p.add_argument("--questions", metavar="FILE.csv", help="CSV: id,report,image,question")
    p.add_argument("-o", "--output", default="-", help="JSON Lines output (default: stdout)")
    p.add_argument("--model", help="checkpoint for image questions")
    add_demo_argument(p)
    # The earlier spelling: the demo model, built in DIR when the shipped one does not load.
    p.add_argument("--demo-model", metavar="DIR", help=argparse.SUPPRESS)
    p.add_argument(
        "--view",
        type=_view_position,
        help="View Position of images without one (PA, AP, LL, ...); default: from the DICOM, "
        "else read as a frontal view",
    )
    p.add_argument(
        "--labels",
        default="chestxray14",
        metavar="SET",
        help="label set of the report labeler (chestxray14, chestxray8, chexpert, "
        "chexpert-labeler, or a YAML file)",
    )
    p.add_argument("--patterns", default="questions.v1", help="question pattern file")
    p.add_argument("--device", default="auto", help="auto (default), cpu, cuda")
    p.add_argument("-q", "--quiet", action="store_true", help="no summary line on stderr")
    p.set_defaults(handler=_ask)


def _view_position(value: str) -> str:
    from models.position import VIEW_POSITIONS

    view = value.strip().upper()
    if view not in VIEW_POSITIONS:
        known = ", ".join(sorted(VIEW_POSITIONS))
        raise argparse.ArgumentTypeError(f"unknown view {value!r}; expected one of {known}")
    return view


# One word that names a file (a folder in it, or a text file's suffix): a report is never
# that, so a missing one is a typo to report, not a report to answer "no" from.
_LOOKS_LIKE_PATH = re.compile(
    r"\S*[/\\]\S*|\S+\.(?:txt|text|rtf|md|csv|json|jsonl|hl7|doc|docx)", re.I
)


def _report_text(value: str | None) -> str | None:
    """The report: `value`'s file's text when it names a file, else `value` itself.

    Raises:
        ValueError: `value` looks like a path but names no readable file.
    """

    if value is None:
        return None
    if not value.strip():
        raise ValueError("--report: the report is empty; give a report file or its text")
    if len(value) < 4096 and "\n" not in value:
        path = Path(value)
        try:
            if path.is_file():
                return path.read_text(encoding="utf-8", errors="replace")
            if path.is_dir():
                raise ValueError(f"--report {value}: is a folder; give a report file or its text")
        except OSError as exc:
            raise ValueError(f"--report {value}: cannot read ({exc.strerror or exc})") from None
        if _LOOKS_LIKE_PATH.fullmatch(value.strip()):
            raise ValueError(f"--report {value}: no such file (give a report file or its text)")
    return value


def _ask(args: argparse.Namespace) -> int:
    import csv
    import json
    import time

    started = time.perf_counter()
    if (args.question is None) == (args.questions is None):
        return fail("ask", "give exactly one of --question TEXT or --questions FILE.csv")
    if args.question is not None and args.report is None and args.image is None:
        return fail("ask", "give --report, --image or both with --question")
    rows: list[dict[str, str]]
    base_dir = Path.cwd()
    if args.questions is not None:
        path = Path(args.questions)
        # Read past a cell over csv's 128 KiB limit or a byte that is not UTF-8: such a
        # row fails alone (`_row_error`), not the whole run.
        limit = csv.field_size_limit()
        csv.field_size_limit(max(limit, _MAX_CSV_FIELD))
        try:
            # A BOM is not part of `id`; undecodable bytes kept as surrogates, for the row.
            with path.open(newline="", encoding="utf-8-sig", errors="surrogateescape") as f:
                reader = csv.DictReader(f)
                missing = {"id", "question"} - set(reader.fieldnames or ())
                if missing:
                    return fail(
                        "ask",
                        f"{path}: missing column(s) {', '.join(sorted(missing))}; "
                        "expected id,report,image,question",
                    )
                rows = [dict(r) for r in reader]
        except (OSError, csv.Error) as exc:
            return fail("ask", f"cannot read {path}: {exc}")
        finally:
            csv.field_size_limit(limit)
        base_dir = path.resolve().parent
    else:
        try:
            report_text = _report_text(args.report)
        except ValueError as exc:
            return fail("ask", str(exc))
        rows = [
            {
                "id": "1",
                "report": report_text or "",
                "image": args.image or "",
                "question": args.question,
            }
        ]
    if args.model and (args.demo or args.demo_model):
        return fail("ask", "give --model CHECKPOINT or --demo, not both")
    if args.model and not Path(args.model).exists():
        return fail("ask", model_hint(args.model))
    if any((r.get("image") or "").strip() for r in rows) and not (
        args.model or args.demo or args.demo_model
    ):
        return fail(
            "ask",
            "image questions need a model: --model CHECKPOINT, or --demo for the shipped "
            "demo model (not for clinical use)",
        )

    import_spacy_without_torch()
    from app.blas import labeler_blas
    from batch.labeling import PipelineLabeler
    from batch.study_questions import StudyQuestions
    from labeler.config import LabelerConfig

    labeler = PipelineLabeler(LabelerConfig(label_set=args.labels, blas=labeler_blas()))
    engine = StudyQuestions(labeler, patterns=args.patterns)
    images = _ImageReader(args, base_dir, contained=args.questions is not None)
    failed = 0
    out = sys.stdout if args.output == "-" else open(args.output, "w", encoding="utf-8")  # noqa: SIM115
    try:
        for start in range(0, len(rows), 2048):
            chunk = rows[start : start + 2048]
            reports = engine.label_reports(
                (r.get("report") or "").strip() for r in chunk if not _row_error(r)
            )
            lines = []
            # a row about the same study as the row before: its "it" is that row's finding
            previous: tuple[str, str, str | None] = ("", "", None)
            for r in chunk:
                bad_row = _row_error(r)
                if bad_row:
                    r = {"id": _printable(r.get("id") or ""), "question": ""}
                given = r.get("report") or ""
                text = given.strip()
                image, error = images.get((r.get("image") or "").strip())
                error = bad_row or error
                report = reports.get(text) if text else None
                if report is not None and report.error:
                    error, report = f"the report cannot be read: {report.error}", None
                elif given and not text:
                    error = "the report is empty"
                study = (text, (r.get("image") or "").strip())
                answer = engine.ask(
                    r.get("question") or "",
                    report=report,
                    image=image,
                    question_id=str(r.get("id") or ""),
                    referent=previous[2] if study == previous[:2] else None,
                    report_text=text or None,
                )
                previous = (*study, answer.label)
                answer.demo_model = image is not None and images.demo
                if error:
                    failed += 1
                    answer.message = error
                lines.append(json.dumps(answer.to_dict(), ensure_ascii=False))
            out.write("\n".join(lines) + "\n")
    finally:
        if out is not sys.stdout:
            out.close()
    if images.demo:  # said whatever -q: the image answers are meaningless
        from models.notices import DEMO_NOTICE

        sys.stderr.write(f"cxr ask: the images were read by the demo model. {DEMO_NOTICE}\n")
    if not args.quiet:
        took = time.perf_counter() - started
        sys.stderr.write(
            f"cxr ask: {len(rows):,} questions answered"
            + (f", {failed} with an unreadable report or image" if failed else "")
            + f" -> {args.output if args.output != '-' else 'stdout'} in {took:.1f} s\n"
        )
    return 1 if failed else 0


# A cell of --questions: the service's report limit (100,000 characters) with room to spare.
_MAX_CELL = 128 * 1024
_MAX_CSV_FIELD = 16 * 1024 * 1024  # read this far to say which row holds the long cell
_UNDECODED = re.compile("[\udc80-\udcff]")


def _row_error(row: dict[str, Any]) -> str | None:
    """Why a --questions row cannot be used (it then fails alone), or None."""
    for key, value in row.items():
        if key is None or not isinstance(value, str):
            return "the row has more cells than the header"
        if len(value) > _MAX_CELL:
            return f"its {key!r} cell holds {len(value):,} characters (at most {_MAX_CELL:,})"
        if _UNDECODED.search(value):
            return f"its {key!r} cell is not valid UTF-8"
    return None


def _printable(value: str) -> str:
    return _UNDECODED.sub("\ufffd", value)[:128]


# An image at most this large is read (the service's default CXR_MAX_UPLOAD_MB).
MAX_IMAGE_BYTES = 100 * 1024 * 1024


def image_path(name: str, base_dir: Path, *, contained: bool) -> Path:
    """The image file `name` names, checked as `cxr batch` checks its inputs before reading.

    A relative name is read from `base_dir` (the --questions CSV's folder); with
    `contained`, the file (symbolic links resolved) must lie under `base_dir`, so a CSV
    cannot make the command read any file the user can. It must be a regular file (not a
    FIFO that blocks for ever, nor a device such as /dev/zero that never ends) of at most
    `MAX_IMAGE_BYTES`.

    Raises:
        ValueError: the reason, naming the image.
    """
    import os
    import stat

    path = Path(name)
    if not path.is_absolute():
        path = base_dir / path
    try:
        resolved = path.resolve(strict=True)
        info = os.stat(resolved)
    except (OSError, RuntimeError) as exc:
        raise ValueError(f"image {name}: cannot be opened ({exc})") from None
    if contained and base_dir.resolve() not in resolved.parents:
        raise ValueError(
            f"image {name}: outside the folder of the questions file ({base_dir}); put the "
            "images beside it"
        )
    if not stat.S_ISREG(info.st_mode):
        raise ValueError(f"image {name}: not a regular file")
    if info.st_size > MAX_IMAGE_BYTES:
        raise ValueError(
            f"image {name}: {info.st_size:,} bytes, more than the {MAX_IMAGE_BYTES:,} read"
        )
    return resolved


class _ImageReader:
    """Images read and predicted once per path; the model loaded on first use."""

    def __init__(self, args: argparse.Namespace, base_dir: Path, *, contained: bool) -> None:
        self.args = args
        self.base_dir = base_dir
        self.contained = contained
        self.predictor: Predictor | None = None
        self.cache: dict[str, tuple[ImageFindings | None, str | None]] = {}

    @property
    def demo(self) -> bool:
        """Whether the model that read the images is a demo model (its card says so)."""
        return self.predictor is not None and bool(self.predictor.card.get("demo", False))

    def get(self, name: str) -> tuple[ImageFindings | None, str | None]:
        if not name:
            return None, None
        if name not in self.cache:
            self.cache[name] = self._read(name)
        return self.cache[name]

    def _load_predictor(self) -> Predictor:

        from models.predict import load_predictor

        if self.args.model:
            return load_predictor(self.args.model, device=self.args.device)
        # the service's demo model, loaded as the service loads it
        return load_predictor(demo_model_path(self.args.demo_model), device=self.args.device)

    def _read(self, name: str) -> tuple[ImageFindings | None, str | None]:

        from models.errors import ImageError
        from models.image_findings import (
            LUNG_FIELD_SIDE,
            image_findings,
            lung_field_of,
            rendered_heatmaps,
        )
        from models.image_pipeline import InputSpec, load_for_model

        try:
            path = image_path(name, self.base_dir, contained=self.contained)
        except ValueError as exc:
            return None, str(exc)
        if self.predictor is None:
            self.predictor = self._load_predictor()
        try:
            spec = InputSpec.of(self.predictor, display_size=LUNG_FIELD_SIDE)
            loaded = load_for_model(path, spec)
        except (ImageError, OSError) as exc:
            return None, f"image {name}: {exc}"
        # every label's map: a position question presupposes its finding, positive or not
        [pred] = self.predictor.predict([loaded.prepared], heatmaps="all")
        meta = loaded.meta
        return (
            image_findings(
                pred.probabilities,
                pred.positive,
                pred.boxes,
                None,
                meta,
                view_position=self.args.view,
                lung_field=lung_field_of(loaded),
                heatmaps=rendered_heatmaps(pred.heatmaps, meta.rows, meta.columns),
            ),
            None,
        )
