"""Importing spaCy without torch and without its command line: `cxr label`, `cxr ask` and
Ray's labeler actors start faster.

thinc imports torch when it is installed, only to offer PyTorch layers; the labeler's
pipeline runs on thinc's NumPy ops. Blocking that import while spaCy loads saves 1-2 s of
start-up per process.

`spacy/__init__.py` also imports `spacy.cli` (for `spacy.info`), and with it typer, weasel,
requests and httpx: some 450 modules and about 0.2 s of CPU that labelling never uses.
While spaCy loads, `spacy.cli` is a bare package whose `info` module holds a stand-in;
afterwards both are taken out of `sys.modules` again, and `spacy.cli` and `spacy.info`
are imported for real on first use (`import spacy.cli`, `spacy.cli.download`,
`from spacy import info` all work as before).

Only the standard library is imported here, so that a caller can use it before anything
imports spaCy.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import types
from typing import Any

__all__ = ["import_spacy_without_torch"]

#: spaCy's attributes that its command line provides (`spacy.info` comes from `spacy.cli`)
_CLI_ATTRIBUTES = frozenset({"cli", "info"})


def import_spacy_without_torch() -> None:
    """Import spaCy while hiding torch, which thinc would otherwise import (1-2 s), and
    without `spacy.cli`, which is imported when first used (0.2 s).

    Later `import torch` calls work as usual. Worker processes forked after this inherit
    the torch-free spaCy. Does nothing if spaCy or torch is imported already.
    """
    if "spacy" in sys.modules or "torch" in sys.modules:
        return
    stubs = _cli_stand_ins()
    sys.modules["torch"] = None  # type: ignore[assignment]  # makes `import torch` fail
    try:
        import spacy
    finally:
        del sys.modules["torch"]
        for name, stub in stubs.items():
            if sys.modules.get(name) is stub:
                del sys.modules[name]
    if stubs:
        _defer_cli(spacy, stubs["spacy.cli.info"])


def _cli_stand_ins() -> dict[str, types.ModuleType]:
    """`spacy.cli` as a package with nothing imported, and a `spacy.cli.info` that holds a
    stand-in `info`, put in `sys.modules`; none when spaCy's files cannot be found."""
    spec = importlib.util.find_spec("spacy")
    if spec is None or not spec.submodule_search_locations:
        return {}
    cli = types.ModuleType("spacy.cli")
    # spaCy's own cli folder: a submodule imported meanwhile (none is today) is the real one
    cli.__path__ = [os.path.join(path, "cli") for path in spec.submodule_search_locations]
    info = types.ModuleType("spacy.cli.info")
    info.info = _stand_in_info  # type: ignore[attr-defined]
    stubs = {"spacy.cli": cli, "spacy.cli.info": info}
    sys.modules.update(stubs)
    return stubs


def _stand_in_info(*args: Any, **kwargs: Any) -> Any:
    # only reachable if a caller kept a reference from while spaCy loaded
    from spacy.cli.info import info

    return info(*args, **kwargs)


def _defer_cli(spacy: types.ModuleType, info_stub: types.ModuleType) -> None:
    """Let `spacy.cli` and `spacy.info` import the real command line when first used."""
    namespace = vars(spacy)
    if "__getattr__" in namespace or namespace.get("info") is not info_stub.info:
        return  # not the spaCy this was written for: leave it as it is
    del namespace["info"]
    namespace.pop("cli", None)

    def __getattr__(name: str) -> Any:  # noqa: N807  # PEP 562: a module's missing attribute
        if name not in _CLI_ATTRIBUTES:
            raise AttributeError(f"module 'spacy' has no attribute {name!r}")
        cli = importlib.import_module("spacy.cli")  # also sets spacy.cli
        namespace["info"] = importlib.import_module("spacy.cli.info").info
        return cli if name == "cli" else namespace["info"]

    def __dir__() -> list[str]:  # noqa: N807
        return sorted({*namespace, *_CLI_ATTRIBUTES})

    namespace["__getattr__"] = __getattr__
    namespace["__dir__"] = __dir__
