"""Importing spaCy without torch: `cxr label`, `cxr ask` and Ray's labeler actors start faster.

thinc imports torch when it is installed, only to offer PyTorch layers; the labeler's
pipeline runs on thinc's NumPy ops. Blocking that import while spaCy loads saves 1-2 s of
start-up per process. Only the standard library is imported here, so that a caller can
use it before anything imports spaCy.
"""

from __future__ import annotations

import sys

__all__ = ["import_spacy_without_torch"]


def import_spacy_without_torch() -> None:
    """Import spaCy while hiding torch, which thinc would otherwise import (1-2 s).

    Later `import torch` calls work as usual. Worker processes forked after this inherit
    the torch-free spaCy. Does nothing if spaCy or torch is imported already.
    """
    if "spacy" in sys.modules or "torch" in sys.modules:
        return
    sys.modules["torch"] = None  # type: ignore[assignment]  # makes `import torch` fail
    try:
        import spacy  # noqa: F401
    finally:
        del sys.modules["torch"]
