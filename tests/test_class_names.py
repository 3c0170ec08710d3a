"""One public class name, one thing: `app.db.models.Prediction` beside
`models.predict.Prediction` read as the same object in every file that used both."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("app", "batch", "labeler", "models")


def _public_classes() -> dict[str, list[str]]:
    defined: dict[str, list[str]] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for node in tree.body:
                if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                    defined.setdefault(node.name, []).append(str(path.relative_to(ROOT)))
    return defined


def test_public_class_names_are_defined_once() -> None:
    twice = {name: paths for name, paths in _public_classes().items() if len(paths) > 1}
    assert not twice, f"classes defined in several modules (rename one): {twice}"
