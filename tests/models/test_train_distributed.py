"""`cxr train` under torchrun: two CPU processes (gloo) on tiny phantoms see disjoint shards,
rank 0 alone writes the checkpoint and reports, and a second run resumes from it."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from models.checkpoint import load_checkpoint

pytestmark = [pytest.mark.issue(21), pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
_SHARD = re.compile(r"^rank (\d) of 2, epoch (\d+): trained on images (\[.*\])$", re.MULTILINE)


def _torchrun(phantom_dir: Path, out: Path, *extra: str) -> str:
    """Run `cxr train` in two processes; returns their stderr (checked to succeed)."""
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
        "-m", "app.cli", "train", "--data", str(phantom_dir), "--out", str(out),
        "--arch", "resnet18", "--weights", "none", "--image-size", "64", "--labels", "auto",
        "--transition-channels", "16", "--batch-size", "4", "--workers", "0", "--threads", "1",
        "--device", "cpu", "--no-progress", "--verbose", *extra,
    ]  # fmt: skip
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "OMP_NUM_THREADS": "1",
        "CUDA_VISIBLE_DEVICES": "",
    }
    done = subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stderr


def _shards(stderr: str) -> dict[tuple[int, int], list[int]]:
    """(rank, epoch) -> the training-set indices that rank trained on that epoch."""
    shards: dict[tuple[int, int], list[int]] = {}
    for rank, epoch, indices in _SHARD.findall(stderr):
        key = (int(rank), int(epoch))
        assert key not in shards, f"rank {rank} logged epoch {epoch} twice"
        shards[key] = ast.literal_eval(indices)
    return shards


def test_train_torchrun_two_ranks_disjoint_shards_one_writer_resume(
    phantom_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run.pt"
    first = _torchrun(phantom_dir, out, "--epochs", "1")
    shards = _shards(first)
    assert set(shards) == {(0, 1), (1, 1)}
    rank0, rank1 = shards[(0, 1)], shards[(1, 1)]
    assert rank0 and rank1 and len(rank0) == len(rank1)
    assert not set(rank0) & set(rank1), "the ranks trained on the same images"
    assert len(set(rank0)) == len(rank0) and len(set(rank1)) == len(rank1)
    # Rank 0 alone validates, writes and reports.
    assert first.count("epoch 1: loss") == 1 and first.count("wrote ") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.best.pt", "run.pt"]
    ckpt = load_checkpoint(out)
    assert ckpt.card.metrics["world_size"] == 2
    assert ckpt.card.training["effective_batch"] == 4 * ckpt.card.training["accum"] * 2
    assert ckpt.train_state is not None and ckpt.train_state["epoch"] == 1
    steps = ckpt.train_state["step"]
    assert steps == ckpt.card.training["steps_per_epoch"] > 0
    weights = {k: v.clone() for k, v in ckpt.model.state_dict().items()}

    second = _torchrun(phantom_dir, out, "--epochs", "2", "--resume")
    assert second.count("resumed from") == 1
    shards = _shards(second)
    assert set(shards) == {(0, 2), (1, 2)}  # epoch 1 is not run again
    assert not set(shards[(0, 2)]) & set(shards[(1, 2)])
    assert shards[(0, 2)] != rank0  # the sampler reshuffles each epoch
    resumed = load_checkpoint(out)
    assert resumed.train_state is not None and resumed.train_state["epoch"] == 2
    assert resumed.train_state["step"] == 2 * steps
    assert any(not v.equal(weights[k]) for k, v in resumed.model.state_dict().items()), (
        "the resumed run did not train"
    )
