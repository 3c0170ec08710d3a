"""The torchvision-free ResNet bodies (issue 9 item 4: start-up without torchvision)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from models import resnet


@pytest.mark.slow
def test_resnet18_matches_torchvision_weights_and_outputs() -> None:
    from torchvision.models import resnet18 as tv_resnet18

    torch.manual_seed(3)
    ours = resnet.resnet18().eval()
    torch.manual_seed(3)
    theirs = tv_resnet18(weights=None).eval()
    a, b = ours.state_dict(), theirs.state_dict()
    assert list(a) == list(b)
    assert all(torch.equal(a[k], b[k]) for k in a)
    x = torch.rand(1, 3, 64, 64)
    with torch.inference_mode():
        assert torch.equal(ours(x), theirs(x))


def test_resnet50_has_torchvision_state_dict_keys() -> None:
    from torchvision.models import resnet50 as tv_resnet50

    with torch.device("meta"):
        ours, theirs = resnet.resnet50(), tv_resnet50(weights=None)
    assert {k: v.shape for k, v in ours.state_dict().items()} == {
        k: v.shape for k, v in theirs.state_dict().items()
    }


@pytest.mark.slow
@pytest.mark.issue(9)
def test_prediction_path_does_not_import_torchvision(demo_checkpoint: Path) -> None:
    code = (
        "import sys, numpy as np; from models.predict import load_predictor; "
        f"p = load_predictor({str(demo_checkpoint)!r}, device='cpu'); "
        "p.predict([np.zeros((70, 50), np.float32)]); "
        "sys.exit(int('torchvision' in sys.modules))"
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", code], cwd=root, env={"PYTHONPATH": str(root)},
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr or "torchvision was imported"
