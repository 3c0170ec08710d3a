"""Load a script of `docs/` or `benchmarks/` (folders that are not packages) as a module, the
way `python docs/NAME.py` would find it, for the tests that check what it computes."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load_script(relative: str) -> ModuleType:
    """The module of the script at `relative` (e.g. "docs/module_map.py"), registered in
    `sys.modules` under its file name, as its own imports and dataclasses expect."""
    path = ROOT / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
