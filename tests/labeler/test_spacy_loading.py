"""spaCy imported without torch and without its command line, which still works when used.

Each check runs in a fresh interpreter: the test process has imported spaCy already.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_PROBE = """
import json, sys
from labeler.spacy_loading import import_spacy_without_torch
import_spacy_without_torch()
import spacy
modules = ("torch", "spacy.cli", "spacy.cli.info", "requests", "typer")
loaded = {m: m in sys.modules for m in modules}
stand_in = "spacy.cli" in vars(spacy)
listed = "info" in dir(spacy) and "cli" in dir(spacy)
# the first use of spacy.info imports the real command line
info = spacy.info
import spacy.cli
import spacy.cli.download
from spacy import info as imported_info
from spacy.cli import info as cli_info
print(json.dumps({
    "loaded": loaded,
    "stand_in": stand_in,
    "listed": listed,
    "same_info": info is cli_info is imported_info is spacy.cli.info,
    "real_cli": spacy.cli is sys.modules["spacy.cli"] and callable(spacy.cli.download),
    "cli_file": sys.modules["spacy.cli"].__file__,
    "info_runs": "spacy_version" in info(silent=True),
}))
"""


def _probe(code: str) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def test_import_spacy_without_torch_defers_the_command_line() -> None:
    probe = _probe(_PROBE)
    assert probe["loaded"] == {
        "torch": False,
        "spacy.cli": False,
        "spacy.cli.info": False,
        "requests": False,
        "typer": False,
    }
    assert probe["stand_in"] is False
    assert probe["listed"] is True
    # used later, spacy.cli, spacy.info and `from spacy import info` are spaCy's own
    assert probe["same_info"] is True
    assert probe["real_cli"] is True
    assert str(probe["cli_file"]).endswith(os.path.join("spacy", "cli", "__init__.py"))
    assert probe["info_runs"] is True


def test_import_spacy_without_torch_attribute_access_imports_the_cli() -> None:
    probe = _probe(
        "import json, sys\n"
        "from labeler.spacy_loading import import_spacy_without_torch\n"
        "import_spacy_without_torch()\n"
        "import spacy\n"
        "before = 'spacy.cli' in sys.modules\n"
        "download = spacy.cli.download\n"  # no `import spacy.cli` first
        "try:\n"
        "    spacy.no_such_attribute\n"
        "    missing = 'found'\n"
        "except AttributeError as exc:\n"
        "    missing = str(exc)\n"
        "print(json.dumps({'before': before, 'after': 'spacy.cli' in sys.modules,\n"
        "                  'download': download.__module__, 'missing': missing}))\n"
    )
    assert probe == {
        "before": False,
        "after": True,
        "download": "spacy.cli.download",
        "missing": "module 'spacy' has no attribute 'no_such_attribute'",
    }


def test_import_spacy_without_torch_leaves_an_imported_spacy_alone() -> None:
    import spacy

    from labeler.spacy_loading import import_spacy_without_torch

    before = dict(vars(spacy))
    import_spacy_without_torch()
    assert dict(vars(spacy)) == before
