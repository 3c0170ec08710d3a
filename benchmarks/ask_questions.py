"""Accuracy and speed of `cxr ask` on generated questions, and on clinicians' questions.

Synthetic reports (sentences written for this benchmark, never copied from a dataset)
state findings with a known status, side, place, size, count, severity and change;
questions of every type are generated over them in several phrasings, with the answer
the generator knows. Image questions ask the side and zone of the lesion of a phantom
(`models.phantoms`), whose true box is known.

`--openi` runs the development set benchmarks/data/openi_questions.v1.csv instead: questions
written by people over real OpenI reports, not generated from the question patterns (see
benchmarks/data/README.md). The reports are read at run time from ../shared/data/openi (or
$CXR_SHARED_DATA/openi); without them the mode says so and exits 0.

    python benchmarks/ask_questions.py --reports 400 --out /tmp/ask    # report questions
    python benchmarks/ask_questions.py --images 60 --demo --out /tmp/ask
    python benchmarks/ask_questions.py --speed 20000 --out /tmp/ask   # questions/s, 1 core
    python benchmarks/ask_questions.py --openi --out /tmp/ask-openi  # clinicians' questions
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from labeler.questions import QUESTION_TYPES

__all__ = [
    "OPENI_QUESTIONS",
    "Case",
    "load_openi_questions",
    "make_image_cases",
    "make_report_cases",
    "openi_right",
    "score",
    "score_openi",
]

OPENI_QUESTIONS = Path(__file__).resolve().parent / "data" / "openi_questions.v1.csv"
# the engine's types, and `device` for every question about a tube, line or implant
OPENI_TYPES = (*QUESTION_TYPES[:-1], "device", "unsupported")

_SIDES = ("left", "right")
_LOBES = {
    "left": ("left upper lobe", "left lower lobe"),
    "right": ("right upper lobe", "right middle lobe", "right lower lobe"),
}
_ZONE_OF_LOBE = {"upper": "upper", "middle": "middle", "lower": "lower"}
_SEVERITY_WORD = {"mild": "small", "moderate": "moderate", "severe": "large", "minimal": "trace"}
_CHANGE_PHRASE = {
    "increased": "increased in size since the prior exam",
    "decreased": "smaller than on the previous radiograph",
    "unchanged": "unchanged from the prior study",
    "new": "new since the last study",
}
_NAMES = {
    "Effusion": ["effusion", "pleural effusion", "pleural fluid", "fluid around the lung"],
    "Pneumothorax": ["pneumothorax", "collapsed lung", "air in the pleural space"],
    "Mass": ["mass", "lung mass", "pulmonary mass"],
    "Nodule": ["nodule", "pulmonary nodule", "lung nodule"],
    "Cardiomegaly": ["cardiomegaly", "enlarged heart", "cardiac enlargement"],
    "Atelectasis": ["atelectasis"],
    "Consolidation": ["consolidation"],
    "Edema": ["pulmonary edema", "edema"],
    "Pneumonia": ["pneumonia", "lung infection"],
}


@dataclass
class Case:
    """One question with the answer the generator knows."""

    id: str
    report: str
    image: str
    question: str
    type: str
    label: str | None
    expected: object
    kind: str = "report"  # report or image
    extra: dict[str, object] = field(default_factory=dict)


@dataclass
class _Finding:
    label: str
    status: str
    side: str | None = None
    lobe: str | None = None
    severity: str | None = None
    size_mm: float | None = None
    count: int | None = None
    change: str | None = None


def _sentence(f: _Finding, rng: random.Random) -> str:
    if f.status == "negative":
        return (
            rng.choice(
                [
                    f"No {f.label.lower()}.",
                    f"There is no {f.label.lower()}.",
                    f"No evidence of {f.label.lower()}.",
                ]
            )
            .replace("effusion", "pleural effusion")
            .replace("edema", "pulmonary edema")
        )
    if f.status == "uncertain":
        word = {
            "Pneumonia": "pneumonia",
            "Consolidation": "consolidation",
            "Atelectasis": "atelectasis",
            "Edema": "mild pulmonary edema",
        }[f.label]
        return rng.choice(
            [
                f"Possible {word}.",
                f"Findings may represent {word}.",
                f"{word.capitalize()} cannot be excluded.",
            ]
        )
    if f.label == "Cardiomegaly":
        sev = {"mild": "mildly", "moderate": "moderately", "severe": "markedly"}[
            f.severity or "mild"
        ]
        base = rng.choice([f"The heart is {sev} enlarged", f"There is {f.severity} cardiomegaly"])
        return base + (f", {_CHANGE_PHRASE[f.change]}." if f.change else ".")
    if f.label in ("Effusion", "Pneumothorax"):
        noun = "pleural effusion" if f.label == "Effusion" else "pneumothorax"
        sev = _SEVERITY_WORD[f.severity or "mild"]
        s = f"{sev.capitalize()} {f.side} {noun}"
        return s + (f", {_CHANGE_PHRASE[f.change]}." if f.change else ".")
    if f.label == "Mass":
        cm = (f.size_mm or 30) / 10
        s = rng.choice(
            [f"A {cm:g} cm mass in the {f.lobe}", f"There is a {cm:g} cm mass in the {f.lobe}"]
        )
        return s + (f", {_CHANGE_PHRASE[f.change]}." if f.change else ".")
    if f.label == "Nodule":
        n = f.count or 1
        if n == 1:
            s = (
                f"A {f.size_mm:g} mm nodule in the {f.lobe}"
                if f.size_mm
                else f"A nodule in the {f.lobe}"
            )
        else:
            words = {2: "Two", 3: "Three", 4: "Four"}
            s = f"{words[n]} nodules in the {f.lobe}"
        return s + "."
    # Atelectasis, Consolidation, Edema, Pneumonia positive
    where = f"in the {f.lobe}" if f.lobe else ""
    noun = f.label.lower().replace("edema", "pulmonary edema")
    return f"{(f.severity or 'mild').capitalize()} {noun} {where}".strip() + "."


def _make_report(rng: random.Random) -> tuple[str, dict[str, _Finding]]:
    findings: dict[str, _Finding] = {}
    pool = [
        "Effusion",
        "Pneumothorax",
        "Mass",
        "Nodule",
        "Cardiomegaly",
        "Atelectasis",
        "Consolidation",
        "Pneumonia",
        "Edema",
    ]
    rng.shuffle(pool)
    for label in pool[: rng.randint(1, 3)]:
        side = rng.choice(_SIDES)
        f = _Finding(label, "positive", side=side)
        if label in ("Effusion", "Pneumothorax"):
            f.severity = rng.choice(["mild", "moderate", "severe"])
            f.change = rng.choice([None, None, "increased", "decreased", "unchanged", "new"])
        elif label == "Mass":
            f.lobe = rng.choice(_LOBES[side])
            f.size_mm = float(rng.choice([18, 25, 32, 45, 60]))
            f.change = rng.choice([None, "increased", "unchanged"])
        elif label == "Nodule":
            f.lobe = rng.choice(_LOBES[side])
            f.count = rng.choice([1, 1, 2, 3])
            f.size_mm = float(rng.choice([6, 8, 12])) if f.count == 1 else None
        elif label == "Cardiomegaly":
            f.side = None
            f.severity = rng.choice(["mild", "moderate", "severe"])
            f.change = rng.choice([None, "unchanged"])
        elif label in ("Pneumonia", "Consolidation", "Edema", "Atelectasis"):
            if rng.random() < 0.35 and label != "Pneumonia":
                f = _Finding(label, "uncertain")
            elif label == "Pneumonia":
                f = _Finding(label, rng.choice(["uncertain", "negative"]))
            elif label == "Edema":
                f.side, f.severity = None, rng.choice(["mild", "moderate"])
            else:
                f.lobe = rng.choice(_LOBES[side])
                f.severity = "mild"
        findings[label] = f
    for label in ("Pneumothorax", "Effusion", "Consolidation"):
        if label not in findings and rng.random() < 0.5:
            findings[label] = _Finding(label, "negative")
    sentences = [_sentence(f, rng) for f in findings.values()]
    rng.shuffle(sentences)
    text = (
        "FINDINGS: "
        + " ".join(sentences)
        + rng.choice(["", " The osseous structures are intact.", " Lungs are otherwise clear."])
    )
    return text, findings


def _name(label: str, rng: random.Random) -> str:
    return rng.choice(_NAMES[label])


def _questions(f: _Finding | None, label: str, rng: random.Random) -> list[tuple[str, str, object]]:
    """(question, type, expected) for one finding of a report (None: not mentioned)."""
    n = _name(label, rng)
    status = f.status if f else "absent"
    pres = {"positive": "yes", "negative": "no", "uncertain": "uncertain", "absent": "no"}[status]
    out: list[tuple[str, str, object]] = [
        (
            rng.choice(
                [
                    f"Is there a {n}?",
                    f"Is there any {n}?",
                    f"Does the patient have a {n}?",
                    f"Is a {n} present?",
                    f"Is a {n} seen?",
                    f"Any {n}?",
                    f"Is there evidence of {n}?",
                    f"Can you see a {n}?",
                    f"Is {n} visible on this study?",
                    f"Are there signs of {n}?",
                ]
            ),
            "presence",
            pres,
        ),
    ]
    if f is None or f.status != "positive":
        return out
    if f.side:
        other = "right" if f.side == "left" else "left"
        out.append(
            (
                rng.choice(
                    [
                        f"Which side is the {n} on?",
                        f"Which lung has the {n}?",
                        f"On which side is the {n}?",
                        f"Is the {n} on the left or right?",
                    ]
                ),
                "position",
                [f.side],
            )
        )
        asked = rng.choice([f.side, other])
        out.append(
            (
                rng.choice(
                    [
                        f"Is the {n} on the {asked}?",
                        f"Is the {n} {asked}-sided?",
                        f"Is there a {asked} {n}?",
                        f"Is the {n} in the {asked} lung?",
                    ]
                ),
                "position",
                "yes" if asked == f.side else "no",
            )
        )
        out.append((f"Is the {n} bilateral?", "position", "no"))
    if f.lobe:
        out.append(
            (
                rng.choice(
                    [
                        f"Where is the {n}?",
                        f"What is the location of the {n}?",
                        f"In which lobe is the {n}?",
                    ]
                ),
                "position",
                [f.side, f.lobe],
            )
        )
        zone = f.lobe.split()[1]
        asked_zone = rng.choice(["upper", "lower", zone])
        out.append(
            (
                f"Is the {n} in the {asked_zone} lobe?",
                "position",
                "yes" if asked_zone == zone else "no",
            )
        )
    if f.size_mm:
        out.append(
            (
                rng.choice(
                    [
                        f"How big is the {n}?",
                        f"What size is the {n}?",
                        f"How large is the {n}?",
                        f"What is the size of the {n}?",
                    ]
                ),
                "size",
                f.size_mm,
            )
        )
        cut_cm = rng.choice([1, 2, 3, 4, 5])
        if abs(cut_cm * 10 - f.size_mm) > 1:
            comp, unit = rng.choice(
                [
                    ("larger", "cm"),
                    ("bigger", "cm"),
                    ("smaller", "cm"),
                    ("larger", "mm"),
                    ("greater", "cm"),
                ]
            )
            value = cut_cm if unit == "cm" else cut_cm * 10
            bigger = f.size_mm > cut_cm * 10
            exp = bigger if comp != "smaller" else not bigger
            out.append((f"Is the {n} {comp} than {value} {unit}?", "size", "yes" if exp else "no"))
    if f.count:
        out.append(
            (
                rng.choice(
                    [f"How many {n}s are there?", f"Number of {n}s?", f"How many {n}s are seen?"]
                ),
                "count",
                f.count,
            )
        )
        out.append((f"Are there multiple {n}s?", "count", "yes" if f.count > 1 else "no"))
    if f.change:
        out.append(
            (
                rng.choice(
                    [
                        f"Has the {n} changed?",
                        f"How has the {n} changed?",
                        f"Is there any change in the {n}?",
                    ]
                ),
                "change",
                f.change,
            )
        )
        asked = rng.choice(["increased", "decreased", "stable", "new", f.change])
        yes = {
            "increased": {"increased", "new"},
            "decreased": {"decreased"},
            "stable": {"unchanged"},
            "new": {"new"},
            "unchanged": {"unchanged"},
        }[asked]
        phr = {
            "increased": f"Has the {n} increased?",
            "decreased": f"Has the {n} decreased?",
            "stable": f"Is the {n} stable?",
            "new": f"Is the {n} new?",
            "unchanged": f"Is the {n} unchanged?",
        }[asked]
        out.append((phr, "change", "yes" if f.change in yes else "no"))
    if f.severity and label != "Cardiomegaly" or (label == "Cardiomegaly" and f.severity):
        out.append(
            (
                rng.choice([f"How severe is the {n}?", f"What is the severity of the {n}?"]),
                "severity",
                f.severity,
            )
        )
        if label != "Cardiomegaly":
            asked = rng.choice(["small", "large", "moderate"])
            accepts = {"small": {"mild", "minimal"}, "large": {"severe"}, "moderate": {"moderate"}}
            out.append(
                (
                    f"Is the {n} {asked}?",
                    "severity",
                    "yes" if f.severity in accepts[asked] else "no",
                )
            )
    return out


_UNSUPPORTED = [
    "Why is there an effusion?",
    "What caused the pneumothorax?",
    "How old is the patient?",
    "Should the effusion be drained?",
    "What is the diagnosis?",
    "Is this cancer?",
    "Has the patient had pneumonia?",  # "What is seen in the left lung?" is answered now
    "What is the patient's prognosis?",  # "Is the study normal?" is answered now (study)
    "Who read this film?",
    "Is the effusion worse than the pneumothorax?",
    "What treatment is recommended?",
    "Is the mass malignant?",
    "What is the heart rate?",
    "Describe the image.",
]


def make_report_cases(n_reports: int, seed: int = 0) -> list[Case]:
    """Report questions over `n_reports` synthetic reports, plus unsupported questions."""
    rng = random.Random(seed)
    cases: list[Case] = []
    for r in range(n_reports):
        text, findings = _make_report(rng)
        asked = list(findings) + [rng.choice(["Edema", "Nodule", "Mass", "Pneumothorax"])]
        for label in dict.fromkeys(asked):
            for q, t, exp in _questions(findings.get(label), label, rng):
                cases.append(Case(f"r{r}q{len(cases)}", text, "", q, t, label, exp))
        if r % 5 == 0:
            cases.append(
                Case(
                    f"r{r}u{len(cases)}",
                    text,
                    "",
                    rng.choice(_UNSUPPORTED),
                    "unsupported",
                    None,
                    None,
                )
            )
    return cases


def make_image_cases(n_images: int, out: Path, seed: int = 0, size: int = 256) -> list[Case]:
    """Side and zone questions over phantoms with one lesion each (PNG files under `out`)."""
    import numpy as np
    from PIL import Image

    from models.phantoms import make_phantom

    rng = np.random.default_rng(seed)
    prng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    cases: list[Case] = []
    labels = ("Nodule", "Mass", "Effusion", "Pneumothorax")
    for i in range(n_images):
        label = labels[i % len(labels)]
        ph = make_phantom(rng, size=size, labels=[label])
        path = out / f"phantom_{i:04d}.png"
        Image.fromarray(ph.image).save(path)
        _, x, y, w, h = ph.boxes[0]
        side = "right" if x + w / 2 < size / 2 else "left"  # PA: patient's right on image left
        n = _name(label, prng)
        other = "left" if side == "right" else "right"
        asked = prng.choice([side, other])
        for q, exp in (
            (prng.choice([f"Which side is the {n} on?", f"Which lung has the {n}?"]), [side]),
            (f"Is the {n} on the {asked}?", "yes" if asked == side else "no"),
        ):
            cases.append(
                Case(f"i{i}q{len(cases)}", "", str(path), q, "position", label, exp, "image")
            )
    return cases


def _correct(case: Case, got: dict[str, object]) -> bool:
    if case.type == "unsupported":
        return got["type"] == "unsupported"
    if got["type"] != case.type or got["label"] != case.label:
        return False
    ans = got["answer"]
    exp = case.expected
    if isinstance(exp, list):
        return (
            isinstance(ans, list)
            and set(exp) <= set(ans)
            and (len(exp) > 1 or set(ans) <= set(exp) | {"upper", "middle", "lower"})
        )
    if isinstance(exp, float):
        return isinstance(ans, int | float) and abs(float(ans) - exp) < 0.5
    return ans == exp


def score(cases: list[Case], answers: list[dict[str, object]]) -> dict[str, object]:
    """Accuracy overall and per type; `answered_unsupported` counts unsupported questions
    answered as if understood (must be 0)."""
    by_type: dict[str, list[bool]] = {}
    wrong: list[dict[str, object]] = []
    for case, got in zip(cases, answers, strict=True):
        ok = _correct(case, got)
        by_type.setdefault(f"{case.kind}:{case.type}", []).append(ok)
        if not ok and len(wrong) < 30:
            wrong.append(
                {
                    "q": case.question,
                    "expected": case.expected,
                    "got": got["answer"],
                    "type": got["type"],
                    "report": case.report[:160],
                }
            )
    total = [ok for oks in by_type.values() for ok in oks]
    report_ok = [ok for k, oks in by_type.items() if k.startswith("report") for ok in oks]
    image_ok = [ok for k, oks in by_type.items() if k.startswith("image") for ok in oks]
    return {
        "questions": len(total),
        "accuracy": round(sum(total) / max(1, len(total)), 4),
        "report_accuracy": round(sum(report_ok) / max(1, len(report_ok)), 4),
        "image_accuracy": round(sum(image_ok) / max(1, len(image_ok)), 4) if image_ok else None,
        "per_type": {k: [sum(v), len(v)] for k, v in sorted(by_type.items())},
        "answered_unsupported": sum(
            1
            for c, g in zip(cases, answers, strict=True)
            if c.type == "unsupported" and g["type"] != "unsupported"
        ),
        "wrong": wrong,
    }


def _write_csv(cases: list[Case], path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["id", "report", "image", "question"])
        for c in cases:
            w.writerow([c.id, c.report, c.image, c.question])


def _run_cxr(csv_path: Path, out: Path, extra: list[str], one_core: bool) -> float:
    cmd = [
        sys.executable,
        "-m",
        "app.cli",
        "ask",
        "--questions",
        str(csv_path),
        "-o",
        str(out),
        "-q",
        *extra,
    ]
    if one_core:
        cmd = ["taskset", "-c", "0", *cmd]
    start = time.perf_counter()
    subprocess.run(cmd, check=False)
    return time.perf_counter() - start


# ---- clinicians' questions over real reports (--openi) ----------------------------------

_NUMBER = re.compile(r"(\d+(?:\.\d+)?)\s*(mm|cm)?")
_MM_PER = {"mm": 1.0, "cm": 10.0}
# Spellings of one answer, the same for every question (never one question's fix).
_SAME = {
    "uncertain": "possible",
    "possibly": "possible",
    "probable": "possible",
    "maybe": "possible",
    "stable": "unchanged",
    "no change": "unchanged",
}
_SIDES_WORDS = ("left", "right")
# Place words spelt several ways (noun or adjective), the same on both sides of a comparison.
_PLACE_WORDS = {
    "basilar": "base",
    "basal": "base",
    "bases": "base",
    "bibasilar": "bilateral base",
    "midlung": "mid",
    "middle": "mid",
    "lungs": "",
    "lung": "",
    "zone": "",
    "zones": "",
    "the": "",
}


def load_openi_questions(path: Path) -> list[dict[str, str]]:
    """The rows of an openi_questions CSV, checked for its columns and types.

    Raises:
        ValueError: a column is missing or a row has a type outside `OPENI_TYPES`.
    """
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        need = {"id", "report_uid", "question", "type", "topic", "answer", "accept"}
        missing = need - set(reader.fieldnames or ())
        if missing:
            raise ValueError(f"{path}: missing column(s) {', '.join(sorted(missing))}")
        rows = [dict(r) for r in reader]
    bad = [r["id"] for r in rows if r["type"] not in OPENI_TYPES]
    if bad:
        raise ValueError(f"{path}: type not in {', '.join(OPENI_TYPES)} for {', '.join(bad[:5])}")
    return rows


def _openi_reports(openi: Path, uids: set[str]) -> dict[str, str]:
    """uid -> `FINDINGS: ...\\nIMPRESSION: ...`, the project's text of an OpenI report."""
    out: dict[str, str] = {}
    with (openi / "indiana_reports_dev.csv").open(newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            if r["uid"] in uids:
                out[r["uid"]] = f"FINDINGS: {r['findings']}\nIMPRESSION: {r['impression']}"
    return out


def _norm(text: str) -> str:
    t = " ".join(str(text).lower().replace("_", " ").split()).strip(" .")
    return _SAME.get(t, t)


def _number(value: object, unit: object) -> tuple[float, str | None] | None:
    """(value, unit) of a number answer or of a string like "12 mm"; None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value), str(unit) if unit in _MM_PER else None
    m = _NUMBER.fullmatch(_norm(str(value)))
    return (float(m[1]), m[2]) if m else None


def _place(text: str) -> str:
    words = (_PLACE_WORDS.get(w, w) for w in _norm(text).replace("-", " ").split())
    return " ".join(" ".join(words).split())


def _position_terms(terms: list[str]) -> set[str]:
    """What a position answer (a list of terms) says: its sides (`bilateral` for both),
    its places, and each bare zone word with the side ("left" + "lower" = "left lower")."""
    terms = [_place(t) for t in terms]
    sides = {t for t in terms if t in _SIDES_WORDS}
    out = {t for t in terms if t not in _SIDES_WORDS}
    if len(sides) == 2 or "bilateral" in out:
        out.add("bilateral")
    else:
        out |= sides
        for side in sides:
            out |= {f"{side} {t}" for t in terms if t not in _SIDES_WORDS and " " not in t}
    out.add(" ".join(terms))
    return out


def _matches(want: str, answer: object, unit: object) -> bool:
    w = _norm(want)
    if (m := _NUMBER.fullmatch(w)) is not None:
        got = _number(answer, unit)
        if got is None:
            return False
        value, got_unit = got
        if m[2] and got_unit:
            value = value * _MM_PER[got_unit] / _MM_PER[m[2]]
        return abs(value - float(m[1])) <= 0.05 + 1e-9
    if isinstance(answer, list):
        w = _place(w)
        said = _position_terms([str(t) for t in answer])
        if " and " in w and w not in said:
            # "T9 and T12": every place named, each a term of the answer
            return all(_matches(part, answer, unit) for part in w.split(" and "))
        for side in _SIDES_WORDS:  # the other side named as well: not this answer
            other = "right" if side == "left" else "left"
            if side in w.split() and any(other in t.split() for t in said):
                return False
        return w in said
    return answer is not None and _norm(str(answer)) == w


def openi_right(expected: str, accept: str, got: dict[str, object]) -> bool:
    """Whether `cxr ask`'s answer row `got` gives `expected` or one of `accept` (`|`-separated).

    Case, spaces and a final full stop do not count; "uncertain"/"possibly" read as
    "possible" and "stable" as "unchanged"; a number matches within 0.05, in the expected
    unit (mm and cm converted; the engine gives sizes in mm); a position answer (a list)
    matches when one of its terms, its sides (both sides: "bilateral") or a side with a bare
    zone gives the expected place, and it names no side the expected answer does not (an
    expected "A and B" wants both);
    place words are compared in one spelling ("basilar", "lung base" and "base" alike;
    "midlung", "mid lung" and "middle" alike).
    "unsupported" is right when the engine refuses (type unsupported or no answer).
    """
    if _norm(expected) == "unsupported":
        return got.get("type") == "unsupported" or got.get("answer") is None
    wants = [expected, *(a for a in accept.split("|") if a.strip())]
    return any(_matches(w, got.get("answer"), got.get("unit")) for w in wants)


def _shown(got: dict[str, object]) -> str:
    if got.get("answer") is None:
        return f"(refused: {got.get('type')})"
    answer = got["answer"]
    text = " + ".join(map(str, answer)) if isinstance(answer, list) else str(answer)
    return f"{text} {got['unit']}" if got.get("unit") else text


def score_openi(
    rows: list[dict[str, str]], answers: list[dict[str, object]]
) -> tuple[dict[str, list[int]], list[dict[str, object]]]:
    """Per type [right, n, refused], and one result row per question (no report text)."""
    by_type: dict[str, list[int]] = {t: [0, 0, 0] for t in OPENI_TYPES}
    results: list[dict[str, object]] = []
    for row, got in zip(rows, answers, strict=True):
        ok = openi_right(row["answer"], row.get("accept") or "", got)
        counts = by_type[row["type"]]
        counts[0] += ok
        counts[1] += 1
        counts[2] += got.get("answer") is None
        results.append(
            {
                "id": row["id"],
                "report_uid": row["report_uid"],
                "type": row["type"],
                "topic": row["topic"],
                "question": row["question"],
                "expected": row["answer"] + (f" | {row['accept']}" if row.get("accept") else ""),
                "got": _shown(got),
                "engine_type": got.get("type"),
                "engine_label": got.get("label"),
                "right": int(ok),
            }
        )
    return {t: v for t, v in by_type.items() if v[1]}, results


def _openi_table(by_type: dict[str, list[int]]) -> str:
    """type, n, right, %, and how many the engine refused (no answer)."""
    lines = [f"{'type':<12} {'n':>5} {'right':>6} {'%':>6} {'refused':>8}"]
    for t, (right, n, refused) in by_type.items():
        lines.append(f"{t:<12} {n:>5} {right:>6} {100 * right / n:>6.1f} {refused:>8}")
    right, n, refused = (sum(v[i] for v in by_type.values()) for i in range(3))
    lines.append(f"{'total':<12} {n:>5} {right:>6} {100 * right / max(1, n):>6.1f} {refused:>8}")
    return "\n".join(lines) + "\n"


def run_openi(questions: Path, out: Path) -> dict[str, object] | None:
    """Run `cxr ask` on the OpenI question set; None when the reports are not here.

    Writes under `out`: openi_ask.csv (the input, with report text: keep `out` outside the
    repository), openi_answers.jsonl, openi_results.csv (id, type, expected, got, right, ...)
    and openi_scores.json.
    """
    from bench_kit import shared_data

    openi = shared_data() / "openi"
    if not (openi / "indiana_reports_dev.csv").is_file():
        sys.stderr.write(
            f"OpenI data not found in {openi}; skipping --openi (set CXR_SHARED_DATA)\n"
        )
        return None
    rows = load_openi_questions(questions)
    reports = _openi_reports(openi, {r["report_uid"] for r in rows})
    lost = sorted({r["report_uid"] for r in rows} - set(reports), key=int)
    if lost:
        raise ValueError(f"{questions}: report uid(s) not in {openi}: {', '.join(lost[:10])}")
    with (out / "openi_ask.csv").open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["id", "report", "image", "question"])
        for r in rows:
            w.writerow([r["id"], reports[r["report_uid"]], "", r["question"]])
    took = _run_cxr(out / "openi_ask.csv", out / "openi_answers.jsonl", [], one_core=False)
    lines = (out / "openi_answers.jsonl").read_text(encoding="utf-8").splitlines()
    answers = [json.loads(line) for line in lines]
    by_type, results = score_openi(rows, answers)
    with (out / "openi_results.csv").open("w", newline="", encoding="utf-8") as f:
        dw = csv.DictWriter(f, fieldnames=list(results[0]))
        dw.writeheader()
        dw.writerows(results)
    right = sum(v[0] for v in by_type.values())
    summary: dict[str, object] = {
        "questions": len(rows),
        "reports": len(reports),
        "right": right,
        "accuracy": round(right / max(1, len(rows)), 4),
        "per_type": by_type,
        "seconds": round(took, 2),
    }
    (out / "openi_scores.json").write_text(json.dumps(summary, indent=1) + "\n")
    sys.stdout.write(_openi_table(by_type))
    sys.stdout.write(f"per question: {out / 'openi_results.csv'}\n")
    return summary


def main() -> int:
    """Generate, run `cxr ask --questions`, score, print JSON."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--reports", type=int, default=0, help="synthetic reports (questions over them)"
    )
    ap.add_argument("--images", type=int, default=0, help="phantom images (position questions)")
    ap.add_argument("--speed", type=int, default=0, help="report questions for a 1-core speed run")
    ap.add_argument(
        "--unique-reports",
        action="store_true",
        help="speed run: every question gets its own report text (the worst case)",
    )
    ap.add_argument("--demo", action="store_true", help="the shipped demo model (image questions)")
    ap.add_argument("--model", help="checkpoint (image questions)")
    ap.add_argument(
        "--openi",
        nargs="?",
        const=OPENI_QUESTIONS,
        type=Path,
        metavar="FILE.csv",
        help="clinicians' questions over OpenI reports (default file: %(const)s)",
    )
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    result: dict[str, object] = {}
    if args.openi:
        summary = run_openi(args.openi, out)
        if not (args.reports or args.images or args.speed):
            return 0
        if summary is not None:
            result["openi"] = summary
    cases = make_report_cases(args.reports, args.seed) if args.reports else []
    if args.images:
        cases += make_image_cases(args.images, out / "images", args.seed)
    if cases:
        _write_csv(cases, out / "questions.csv")
        extra = ["--model", args.model] if args.model else (["--demo"] if args.demo else [])
        took = _run_cxr(out / "questions.csv", out / "answers.jsonl", extra, one_core=False)
        answers = [json.loads(line) for line in (out / "answers.jsonl").read_text().splitlines()]
        result = score(cases, answers) | {"seconds": round(took, 2)}
    if args.speed:
        speed_cases = make_report_cases(max(1, args.speed // 9), args.seed + 1)
        while len(speed_cases) < args.speed:
            speed_cases += speed_cases[: args.speed - len(speed_cases)]
        speed_cases = speed_cases[: args.speed]
        if args.unique_reports:
            for i, c in enumerate(speed_cases):
                speed_cases[i] = Case(
                    c.id,
                    f"{c.report} Comparison: study {i}.",
                    "",
                    c.question,
                    c.type,
                    c.label,
                    c.expected,
                )
        _write_csv(speed_cases, out / "speed.csv")
        _write_csv(speed_cases[:1], out / "one.csv")
        start_up = _run_cxr(out / "one.csv", out / "one.jsonl", [], one_core=True)
        took = _run_cxr(out / "speed.csv", out / "speed.jsonl", [], one_core=True)
        result["speed"] = {
            "questions": len(speed_cases),
            "distinct_reports": len({c.report for c in speed_cases}),
            "seconds_total": round(took, 2),
            "seconds_start_up": round(start_up, 2),
            "questions_per_s_total": round(len(speed_cases) / took, 1),
            "questions_per_s_after_start_up": round(
                len(speed_cases) / max(1e-9, took - start_up), 1
            ),
        }
    json.dump(result, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
