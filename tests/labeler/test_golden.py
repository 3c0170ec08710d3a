"""Golden outputs: the full JSON result of a few hand-written reports.

Set CXR_UPDATE_GOLDEN=1 to rewrite the expected files after an intended
change (torchvision's expect-file style), then review the diff.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from labeler.schema import ReportLabels

GOLDEN = Path(__file__).parent / "golden"
CASES = sorted(p.stem for p in GOLDEN.glob("*.txt"))


@pytest.mark.parametrize("name", CASES)
def test_golden_report(label: Callable[[str], ReportLabels], name: str) -> None:
    text = (GOLDEN / f"{name}.txt").read_text(encoding="utf-8")
    result = label(text).to_dict()
    result["id"] = name
    expected_path = GOLDEN / f"{name}.json"
    if os.environ.get("CXR_UPDATE_GOLDEN") == "1":
        expected_path.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    if not expected_path.exists():
        pytest.fail(f"no golden file {expected_path.name}; run with CXR_UPDATE_GOLDEN=1")
    expected = json.loads(expected_path.read_text(encoding="utf-8"))
    assert result == expected


def test_golden_cases_exist() -> None:
    assert len(CASES) >= 5
