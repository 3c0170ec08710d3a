"""`models.notices`: one demo notice for the service and the CLI, cheap to import."""

from __future__ import annotations

import subprocess
import sys

from models.notices import DEMO_NOTICE


def test_demo_notice_is_the_services_and_imports_without_torch_or_pydantic() -> None:
    from app.schemas import DEMO_NOTICE as SERVICE_NOTICE

    assert SERVICE_NOTICE is DEMO_NOTICE and DEMO_NOTICE.startswith("DEMO MODEL:")
    code = (
        "import sys, models.notices; "
        "print(sorted(m for m in ('torch', 'pydantic', 'fastapi') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
