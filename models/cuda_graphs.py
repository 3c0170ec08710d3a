"""CUDA graphs of the LayerCAM pass's body stages: one launch instead of hundreds.

On one H200 a one-image LayerCAM pass (the service's batch: a 1024 px ResNet-50, two maps)
kept the GPU busy 5.2 ms of about 19: the rest was the host issuing some 600 operations
(convolutions, their autocast casts, the backward's additions and ReLU masks) one by one.
A CUDA graph records the early stages' forward, and the later stages' forward and input
gradient, once per batch shape, and replays each with one call: on the same machine a
one-image pass and its boxes took 13.4 ms against 18.8 eager, and the service's p50 for a
2500 x 2048 DICOM went from 59 to 48 ms.

`LayerCamGraphs.stages` hands `models.layercam.forward_with_layercam` the graphed stages
for a chunk's shape when they were captured (`Predictor.capture_graphs`): the early stages
with `torch.cuda.graph`, the later ones with `torch.cuda.make_graphed_callables` (forward
and backward, so each map's backward through them is one replay). Only the batch sizes
asked for are captured (memory: a graph keeps its activations, about a gigabyte per
1024 px image): one image for the service, a full batch for `cxr predict`. A capture that
fails (memory, an operation graphs do not support) logs once and leaves that shape to the
eager path, which gives the same numbers.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import torch
from torch import nn

__all__ = ["GraphedStages", "LayerCamGraphs"]

log = logging.getLogger(__name__)

# Warm-up passes before a capture (cuDNN picks its kernels; the allocator settles).
_WARMUP = 3


@dataclass
class GraphedStages:
    """One batch shape's graphs: `early(x)` runs the stages before the LayerCAM cut (no
    gradient), `tail(a)` the later stages with a graphed backward to `a`."""

    _input: torch.Tensor
    _early_out: torch.Tensor
    _early_graph: torch.cuda.CUDAGraph
    tail: Callable[[torch.Tensor], torch.Tensor]

    def early(self, x: torch.Tensor) -> torch.Tensor:
        """The cut's activations for `x` (a fresh tensor: the graph's own is reused)."""
        self._input.copy_(x)
        self._early_graph.replay()
        return self._early_out.clone()


class LayerCamGraphs:
    """Captures and keeps `GraphedStages` per input shape, for a model on a CUDA device.

    Capture is explicit (`capture`), at a moment when no other thread of the process uses
    the device: a capture forbids other threads' allocations of pinned memory and
    synchronising calls, which `predict_files`'s staging thread and the service's decode
    threads make. `stages` only looks up.

    Args:
        model: a `ChestNet` in eval mode whose parameters need no gradient.
        stage: the LayerCAM stage (`ChestNet.split_body`).
    """

    def __init__(self, model: nn.Module, stage: int) -> None:
        self.model = model
        self.stage = stage
        self._by_shape: dict[tuple[int, ...], GraphedStages | None] = {}
        self._pool = torch.cuda.graph_pool_handle()

    def stages(self, x: torch.Tensor) -> GraphedStages | None:
        """The graphs captured for `x`'s shape, or None: run it eagerly."""
        return self._by_shape.get(tuple(x.shape)) if x.is_cuda else None

    def capture(self, x: torch.Tensor) -> bool:
        """Capture the graphs for `x`'s shape (its values do not matter) unless tried
        before; False when that capture failed (logged once; the shape runs eagerly)."""
        shape = tuple(x.shape)
        if shape not in self._by_shape:
            try:
                with torch.enable_grad():  # the capture records the tail's backward too
                    self._by_shape[shape] = self._capture(x)
            except (RuntimeError, AssertionError) as exc:  # memory, or an uncapturable op
                log.warning("CUDA graph capture for %s failed, running eagerly: %s", shape, exc)
                self._by_shape[shape] = None
        return self._by_shape[shape] is not None

    def _capture(self, x: torch.Tensor) -> GraphedStages:
        head, tail = self.model.split_body(self.stage)  # type: ignore[operator]
        prepare = self.model.prepare_input

        def autocast() -> torch.autocast:
            # Graphs need autocast's weight cache off: a cached cast is not replayed.
            return torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False)

        def run_head(inp: torch.Tensor) -> torch.Tensor:
            with torch.no_grad(), autocast():
                out: torch.Tensor = head(prepare(inp))  # type: ignore[operator]
            return out

        def run_tail(a: torch.Tensor) -> torch.Tensor:
            with autocast():
                out: torch.Tensor = tail(a)
            return out

        static_x = torch.empty_like(x)
        static_x.copy_(x)
        side = torch.cuda.Stream(x.device)  # type: ignore[no-untyped-call]
        side.wait_stream(torch.cuda.current_stream(x.device))
        with torch.cuda.stream(side):
            for _ in range(_WARMUP):
                run_head(static_x)
        torch.cuda.current_stream(x.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self._pool):
            static_early = run_head(static_x)
        sample = static_early.clone().requires_grad_(True)
        with warnings.catch_warnings():
            # The capture's backward runs on its own stream, the sample's gradient node was
            # made on this one: torch warns of a possible synchronisation, once, at capture.
            warnings.filterwarnings("ignore", "The AccumulateGrad node's stream", UserWarning)
            graphed_tail = torch.cuda.make_graphed_callables(
                run_tail,
                (sample,),
                num_warmup_iters=_WARMUP,
                pool=self._pool,
            )
        replay_tail = cast(Callable[[torch.Tensor], torch.Tensor], graphed_tail)
        return GraphedStages(static_x, static_early, graph, replay_tail)
