"""The fixed texts a model card carries: the demo notice and the intended uses.

Standard library only, so that the CLI and the service's schemas can show the same words
without importing torch (the CLI) or pydantic (the library).
"""

from __future__ import annotations

__all__ = ["DEMO_INTENDED_USE", "DEMO_NOTICE", "RESEARCH_INTENDED_USE"]

DEMO_NOTICE = (
    "DEMO MODEL: not trained on clinical data; its outputs are meaningless. Not for clinical use."
)
DEMO_INTENDED_USE = (
    "DEMONSTRATION ONLY: not trained on real radiographs (random or synthetic-phantom "
    "weights). Not for clinical use or research conclusions."
)
RESEARCH_INTENDED_USE = (
    "Research use: triage/labeling aid for chest radiograph datasets. Not a medical device; "
    "not validated for diagnosis. Check the metrics on your own population first."
)
