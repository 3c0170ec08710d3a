"""Temperature scaling, one temperature per label (Guo et al. 2017, "On Calibration of
Modern Neural Networks", section 4.2, applied to each sigmoid output).

A label's calibrated probability is `sigmoid(logit / T)`. T is fitted on validation by
minimising the binary cross-entropy; T > 1 softens over-confident outputs. Dividing by a
positive T keeps the order of the scores, so AUC is unchanged; operating thresholds are
chosen afterwards, on the calibrated probabilities. The model card stores T per label.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import torch

__all__ = [
    "MAX_TEMPERATURE",
    "MIN_TEMPERATURE",
    "apply_temperatures",
    "fit_temperature",
    "fit_temperatures",
    "temperature_vector",
]

# The search range of T; a fit at a bound means the logits carry almost no (or a very
# sharp) signal, and the bound is kept rather than an unbounded value.
MIN_TEMPERATURE = 0.05
MAX_TEMPERATURE = 20.0


def _nll(z: np.ndarray, y: np.ndarray, t: float) -> float:
    s = z / t
    # log(1 + exp(-|s|)) form: stable for large |s|.
    return float(np.mean(np.maximum(s, 0) - s * y + np.log1p(np.exp(-np.abs(s)))))


def fit_temperature(logits: np.ndarray, targets: np.ndarray) -> float:
    """The T > 0 minimising the mean binary cross-entropy of `sigmoid(logits / T)`.

    Golden-section search on log T over [MIN_TEMPERATURE, MAX_TEMPERATURE] (the loss is
    unimodal in T for a fixed set of logits).

    Args:
        logits: (N,) raw scores of one label.
        targets: (N,) 0/1.

    Returns:
        T rounded to 4 decimals; 1.0 when only one class is present or N = 0.
    """
    z = np.asarray(logits, dtype=np.float64).ravel()
    y = np.asarray(targets, dtype=np.float64).ravel()
    if len(z) == 0 or y.min() == y.max() or not np.isfinite(z).all():
        return 1.0
    lo, hi = math.log(MIN_TEMPERATURE), math.log(MAX_TEMPERATURE)
    golden = (math.sqrt(5) - 1) / 2
    a, b = hi - golden * (hi - lo), lo + golden * (hi - lo)
    fa, fb = _nll(z, y, math.exp(a)), _nll(z, y, math.exp(b))
    for _ in range(60):
        if fa < fb:
            hi, b, fb = b, a, fa
            a = hi - golden * (hi - lo)
            fa = _nll(z, y, math.exp(a))
        else:
            lo, a, fa = a, b, fb
            b = lo + golden * (hi - lo)
            fb = _nll(z, y, math.exp(b))
    return round(math.exp((lo + hi) / 2), 4)


def fit_temperatures(
    logits: np.ndarray, targets: np.ndarray, labels: Sequence[str]
) -> dict[str, float]:
    """Per-label temperatures: label -> T (1.0 for a label without both classes).

    Args:
        logits: (N, C) raw scores.
        targets: (N, C) 0/1.
        labels: C names.
    """
    return {name: fit_temperature(logits[:, c], targets[:, c]) for c, name in enumerate(labels)}


def temperature_vector(temperatures: Mapping[str, float], labels: Sequence[str]) -> np.ndarray:
    """(C,) float32 temperatures in label order; a label missing from the map gets 1.0."""
    return np.array([float(temperatures.get(name, 1.0)) for name in labels], dtype=np.float32)


def apply_temperatures(logits: torch.Tensor, temperatures: torch.Tensor) -> torch.Tensor:
    """Calibrated probabilities `sigmoid(logits / T)`.

    Args:
        logits: (N, C).
        temperatures: (C,) positive, on the same device.

    Returns:
        (N, C) float32 probabilities.
    """
    return torch.sigmoid(logits.float() / temperatures.float())
