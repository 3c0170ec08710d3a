"""A two-node Ray cluster on 127.0.0.1 for the tests, and the driver they run against it.

`start_two_nodes` runs `ray start` twice (a head and a second node, one CPU each) with their
files in a folder of the test's own; `kill_under(folder)` ends every process the cluster
started, by id, found by that folder. Run as a script, this module is the driver: it runs
a folder job on the cluster with `batch.cluster.run_on_ray`, kills the second node once
both nodes have finished a block, and writes the lines and the cluster's report as JSON.

The driver runs in a process of its own because a Ray driver keeps the settings of the
first cluster it joined (token authentication among them) for its whole life: a test
process that ran a local Ray before could not drive this cluster's workers.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

# `ray start`, except that a node given 127.0.0.1 keeps it: Ray otherwise swaps a loopback
# node address for the machine's outward one, and the nodes would listen on every interface.
RAY_START = """
import sys
import ray._private.services as services
services.resolve_ip_for_localhost = lambda host: host
from ray.scripts.scripts import main
sys.argv = ["ray", "start", *sys.argv[1:]]
main()
"""

# Token authentication off: a cluster reachable from this machine's loopback only.
ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pids_under(marker: str) -> list[int]:
    """Processes (not this one) whose command line holds `marker`, and their descendants."""
    parents: dict[int, int] = {}
    chosen: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
        if marker in cmdline:
            chosen.add(int(entry.name))
    grew = True
    while grew:
        children = {pid for pid, parent in parents.items() if parent in chosen} - chosen
        chosen |= children
        grew = bool(children)
    return sorted(chosen)


def kill_under(marker: str) -> list[int]:
    """SIGKILL `pids_under(marker)`; returns their ids."""
    pids = pids_under(marker)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return pids


def start_two_nodes(folder: str) -> tuple[str, int]:
    """Start the head and the second node; returns (the head's address, the second node's
    raylet port, which names its processes).

    Raises:
        RuntimeError: `ray start` failed (its last words in the message).
        subprocess.TimeoutExpired: it took over two minutes.
    """
    port, second_port = _free_port(), _free_port()
    common = ["--node-ip-address=127.0.0.1", "--num-cpus=1", "--disable-usage-stats",
              f"--temp-dir={folder}", "--object-store-memory=80000000"]  # fmt: skip
    # A lost node is noticed after 2 missed health checks a second apart (default: 5 x 3 s).
    config = json.dumps({"health_check_period_ms": 1000, "health_check_failure_threshold": 2})
    for start in (
        ["--head", f"--port={port}", "--include-dashboard=false", f"--system-config={config}"],
        [f"--address=127.0.0.1:{port}", f"--node-manager-port={second_port}"],
    ):
        done = subprocess.run(
            [sys.executable, "-c", RAY_START, *start, *common],
            env={**os.environ, **ENV},
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode != 0:
            raise RuntimeError(done.stderr.strip()[-300:])
    return f"127.0.0.1:{port}", second_port


def drive(address: str, export: Path, second_port: int, out: Path) -> None:
    """Run the folder job on the cluster, killing the second node mid-run (see module)."""
    import ray

    from batch.cluster import ClusterReport, connect, run_on_ray
    from batch.engine import plan
    from batch.job import FolderInput, JobSpec, build_job
    from batch.labeling import PipelineLabeler
    from batch.results import outcome_line

    connect(address)
    nodes = [n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"]]
    [second] = [n["NodeID"] for n in ray.nodes() if n["NodeManagerPort"] == second_port]
    spec = JobSpec(FolderInput(export))
    job = build_job(spec, labeler=PipelineLabeler(), predictor=None)
    items = plan(list(job.source.scan()), [], job.processor)
    report = ClusterReport()
    killed: list[int] = []
    at_kill: dict[str, int] = {}

    def kill_second(blocks: int) -> None:
        # Once the second node has finished a block and holds more, with blocks still
        # waiting: its worker may have finished what it held before it dies (the results
        # reach the driver), but a waiting block is then handed to it, and the pool sees
        # it gone. Killed with nothing left to hand out, nothing would notice.
        pool = report.pools[0]
        if not report.blocks_by_node[second]:
            # The second node's worker takes seconds to start (it loads the labeler): the
            # head, held back one second a block meanwhile, cannot run out the queue alone.
            time.sleep(1.0)
            return
        if (not killed and report.blocks_by_node[second] and second in pool.busy_nodes()
                and pool.queued >= 3):  # fmt: skip
            killed.extend(kill_under(f"--node_manager_port={second_port}"))
            at_kill.update(blocks=blocks, queued=pool.queued)

    blocks = run_on_ray(spec, items, [], model=None, block_size=2, report=report,
                        after_block=kill_second)  # fmt: skip
    lines = [outcome_line(outcome) for block in blocks for outcome in block]
    ray.shutdown()
    by_node = {"second" if n == second else "head": count
               for n, count in report.blocks_by_node.items()}  # fmt: skip
    result = {"nodes": nodes, "items": [i.key for i in items], "lines": lines,
              "killed": killed, "at_kill": at_kill, "lost": report.lost,
              "blocks_by_node": by_node}  # fmt: skip
    out.write_text(json.dumps(result))


if __name__ == "__main__":
    drive(sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4]))
