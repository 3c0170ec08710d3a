"""Finding label -> coded concept for DICOM results, from `finding_codes.v1.yaml`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

__all__ = [
    "FindingCode",
    "PRIVATE_SCHEME",
    "code_for",
    "load_finding_codes",
    "private_scheme_description",
]

CODES_FILE = Path(__file__).with_name("finding_codes.v1.yaml")
PRIVATE_SCHEME = "99CXR"


@dataclass(frozen=True)
class FindingCode:
    """A (scheme designator, code value, code meaning) triple."""

    scheme: str
    value: str
    meaning: str


@lru_cache(maxsize=4)
def load_finding_codes(path: Path = CODES_FILE) -> dict[str, FindingCode]:
    """Read a label -> code file.

    Raises:
        ValueError: the file is not a mapping of labels to {scheme, value, meaning}.
    """
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    entries = data.get("codes") if isinstance(data, dict) else None
    if not isinstance(entries, dict):
        raise ValueError(f"{path}: expected a 'codes' mapping of label -> code")
    out: dict[str, FindingCode] = {}
    for label, entry in entries.items():
        if not isinstance(entry, dict) or not {"scheme", "value", "meaning"} <= set(entry):
            raise ValueError(f"{path}: label {label!r} needs scheme, value and meaning")
        out[str(label)] = FindingCode(
            str(entry["scheme"]), str(entry["value"]), str(entry["meaning"])
        )
    return out


def code_for(label: str) -> FindingCode:
    """The code of a finding label; a label not in the file gets a private 99CXR code."""
    known = load_finding_codes()
    if label in known:
        return known[label]
    # Deterministic, so the same label always gets the same code across runs.
    value = re.sub(r"[^A-Za-z0-9_.-]+", "_", label).strip("_")[:64] or "unknown"
    return FindingCode(PRIVATE_SCHEME, value, label[:64] or "unknown finding")


def private_scheme_description(path: Path = CODES_FILE) -> dict[str, str]:
    """The private scheme's name, version and responsible organization (for the SR header)."""
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    scheme = data.get("private_scheme") if isinstance(data, dict) else None
    if not isinstance(scheme, dict):
        return {"designator": PRIVATE_SCHEME}
    return {str(k): str(v) for k, v in scheme.items()}
