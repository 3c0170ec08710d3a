"""Class activation maps mapped back onto the original image (Wang et al. 2017, 4.2).

The network sees the whole image stretched to image_size x image_size, so a
map position (i, j) covers the same fraction of the original image: resizing the
S x S map to (rows, columns) maps it back exactly (pixel centres aligned).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

__all__ = ["cam_to_image", "compute_cams", "normalize_map"]


def compute_cams(model: torch.nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Run the model once and return logits and class activation maps.

    Args:
        model: a `ChestNet` (anything with forward_features/forward_head/class_activation_maps).
        x: (N, 1, H, W) batch in [0, 1].

    Returns:
        logits (N, C) float32 and maps (N, C, S, S) float32.
    """
    features = model.forward_features(x)  # type: ignore[operator]
    logits = model.forward_head(features).float()  # type: ignore[operator]
    return logits, model.class_activation_maps(features)  # type: ignore[operator]


def normalize_map(m: np.ndarray) -> np.ndarray:
    """Min/max scale a map to float32 [0, 1] (a flat map becomes zeros)."""
    m = np.asarray(m, dtype=np.float32)
    lo, hi = float(m.min()), float(m.max())
    return (m - lo) / (hi - lo) if hi > lo else np.zeros_like(m)


def cam_to_image(cam: np.ndarray | torch.Tensor, rows: int, columns: int) -> np.ndarray:
    """Resize one (S, S) map to the original (rows, columns) and scale it to [0, 1].

    Returns:
        float32 (rows, columns) heatmap in [0, 1].
    """
    if isinstance(cam, torch.Tensor):
        t = cam.detach().float()[None, None]
        up = F.interpolate(t, size=(rows, columns), mode="bilinear", align_corners=False)
        return normalize_map(up[0, 0].cpu().numpy())
    import cv2

    up_np = cv2.resize(np.asarray(cam, np.float32), (columns, rows), interpolation=cv2.INTER_LINEAR)
    return normalize_map(up_np)
