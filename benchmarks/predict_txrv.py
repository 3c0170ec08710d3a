"""The peer pipeline of issue 9 item 4, as one process: torchxrayvision on DICOM files.

DenseNet-121 at 224 (`xrv.models.DenseNet`, 18 outputs, random weights: nothing can be
downloaded, and the cost is the same), its DICOM reader (`xrv.utils.read_xray_dcm`), its
transforms (`XRayCenterCrop`, `XRayResizer(224)`), classification, and its gradient
saliency (gradient of the top output with respect to the input), one file at a time as in
its `process_image.py`. `benchmarks/predict.py --txrv DIR` times this whole process beside
`cxr predict`. Needs torchxrayvision importable (e.g. `pip install --target DIR` with its
dependencies); it is not a project dependency.

    PYTHONPATH=/tmp/txrv python benchmarks/predict_txrv.py [--weights=W.pt] a.dcm b.dcm ...
"""

from __future__ import annotations

import sys


def main(paths: list[str]) -> int:
    import numpy as np
    import torch
    import torchvision
    import torchxrayvision as xrv

    weights = None
    if paths and paths[0].startswith("--weights="):
        weights, paths = paths[0].split("=", 1)[1], paths[1:]
    torch.manual_seed(0)
    model = xrv.models.DenseNet(weights=None).eval()
    if weights:
        # Stands in for loading its pretrained weights file (same size, same cost).
        model.load_state_dict(torch.load(weights, map_location="cpu", weights_only=True))
    labels = xrv.datasets.default_pathologies
    transform = torchvision.transforms.Compose(
        [xrv.datasets.XRayCenterCrop(), xrv.datasets.XRayResizer(224)]
    )
    for path in paths:
        img = xrv.utils.read_xray_dcm(path)  # scaled to [-1024, 1024]
        img = transform(img[None, ...].astype(np.float32))
        x = torch.from_numpy(img)[None].requires_grad_(True)
        out = model(x)
        top = int(out[0].argmax())
        (grad,) = torch.autograd.grad(out[0, top], x)
        saliency = grad.abs()[0, 0].numpy()
        sys.stdout.write(f"{path}: top {labels[top]} {saliency.shape}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
