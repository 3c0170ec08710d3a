"""A pool of long-lived Ray actors of one kind, started once per run, with bounded retries.

    pool = ActorPool(FileWorker, size=4, init={"config": config}, name="readers")
    pool.broadcast("restore", sr_lines)           # replayed on every actor, also replacements
    pool.submit(7, "process", rows)               # a block of work, tagged
    for done in wait_for([pool]):                  # as blocks finish, in any order
        tag, value = done.tag, done.value          # value: the method's return or a BlockFailure
    pool.submit(8, "read", rows, returns=2)       # (lines, images): the images stay in Ray's
    other.submit(8, "predict", lines, done.rest[0])  # store, handed on by reference
    pool.close()

Ray Data starts a new actor pool for every dataset it executes, so a run of several phases
(structured reports first, then images, then copies read again) paid the actors' start-up
(a spaCy pipeline, a model: seconds each) once per phase. Here the actors live for the run
and every phase submits its blocks to them.

Failures are counted here, not by Ray: actors are created with `max_restarts=0` and
`max_task_retries=0`. When an actor dies (the OOM killer, a lost node), a block it had
finished is kept, the block it was working on is charged one attempt and queued again, and
blocks merely waiting behind it are queued again uncharged; every block that was on the dead
actor then runs alone on an idle actor, so a later loss is charged to the block that caused
it; a replacement actor is started (at most `size * max_attempts`
replacements in a run). A block charged `max_attempts` times comes back as a `BlockFailure`
with the reason, and its items fail with it. A block whose method raised (a bug, not a lost
worker) fails at once. Results are fetched by the driver as soon as a block finishes, so a
node lost later does not redo finished blocks.

A replacement that cannot be placed (no free CPU) stays pending and gets no work; the live
actors take the blocks. Work goes only to actors that answered `ready()`, at most `depth`
blocks each, so that a block waits on the driver, where any actor can take it, rather than
behind a slow or dying actor.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ActorPool", "BlockFailure", "Finished", "wait_for"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BlockFailure:
    """A block given up: every item in it fails with `reason`."""

    reason: str


@dataclass(frozen=True)
class Finished:
    """A block's end: its tag, the method's return value or a `BlockFailure`, and the
    Ray node that worked on it last."""

    pool: ActorPool
    tag: Any
    value: Any
    node: str | None = None
    #: the block's other return values (`submit(..., returns=n)`), left where the actor put
    #: them: ObjectRefs to hand to another pool's block, never fetched by the driver
    rest: tuple[Any, ...] = ()


@dataclass
class _Block:
    tag: Any
    method: str
    args: tuple[Any, ...]
    returns: int = 1
    attempts: int = 0
    reasons: list[str] = field(default_factory=list)
    #: on an actor when it died: it runs alone from then on, so a loss is charged to the
    #: block that caused it, never to one that merely waited behind it
    suspect: bool = False


#: seconds a dead actor's other refs get to settle before the block it ran is charged
_SETTLE_S = 10.0


class ActorPool:
    """`size` actors of `actor_class` for one kind of work, reused for the whole run.

    Args:
        actor_class: the worker class; its `ready()` method returns the actor's node id.
        size: actors to start.
        init: keyword arguments of its constructor (each put in the object store once).
        options: Ray resource options (`num_cpus`, `num_gpus`, `scheduling_strategy`...).
        max_attempts: tries of one block before it fails.
        depth: blocks handed to one actor at a time (one running, the next queued behind it).
        name: how logs and failure reasons name the pool.
    """

    def __init__(
        self,
        actor_class: type,
        *,
        size: int,
        init: dict[str, Any] | None = None,
        options: dict[str, Any] | None = None,
        max_attempts: int = 3,
        depth: int = 2,
        name: str = "workers",
    ) -> None:
        import ray

        if size < 1 or max_attempts < 1 or depth < 1:
            raise ValueError(f"size, max_attempts and depth must be >= 1, got {size}, "
                             f"{max_attempts}, {depth}")  # fmt: skip
        self.name = name
        self.size = size
        self.max_attempts = max_attempts
        self.depth = depth
        self._class: Any = ray.remote(actor_class).options(
            max_restarts=0, max_task_retries=0, **(options or {})
        )
        self._init = {key: ray.put(value) for key, value in (init or {}).items()}
        self._setup: list[tuple[str, tuple[Any, ...]]] = []
        self._actors: dict[int, Any] = {}  # ready actors by number
        self._starting: dict[Any, int] = {}  # ready() ref -> actor number
        self._pending: dict[int, Any] = {}  # actors not ready yet, by number
        self._load: dict[int, list[Any]] = {}  # an actor's running refs, oldest first
        self.nodes: dict[int, str] = {}  # actor number -> its Ray node
        self._running: dict[Any, tuple[_Block, int]] = {}
        self._rest: dict[Any, tuple[Any, ...]] = {}  # a running block's other return refs
        self._queue: collections.deque[_Block] = collections.deque()
        self._numbers = 0
        self.replacements_left = size * max_attempts
        self.lost = 0  # actors that died during the run
        self.failed_blocks = 0
        self._gone: str | None = None  # why no actor is left to start (all blocks fail)
        self._failed_now: list[Finished] = []
        for _ in range(size):
            self._start()

    # --- actors ------------------------------------------------------------------------

    def _start(self) -> None:
        self._numbers += 1
        number = self._numbers
        handle = self._class.remote(**self._init)
        for method, args in self._setup:  # actor tasks run in order: before any block
            getattr(handle, method).remote(*args)
        self._pending[number] = handle
        self._starting[handle.ready.remote()] = number

    def _lose(self, number: int, reason: str) -> list[Finished]:
        """An actor died: charge its running block, queue the rest again, replace it."""
        import ray

        handle = self._actors.pop(number, None) or self._pending.pop(number, None)
        refs = self._load.pop(number, [])
        self.lost += 1
        log.warning("%s: a worker died (%s); its blocks go to the others", self.name, reason)
        finished: list[Finished] = []
        # blocks it finished before it died, whose results were not collected yet, are done.
        # Every ref of a dead actor settles (a value, or its death), but a result sent just
        # before the death may reach this process a moment after it: waiting for them all
        # (bounded) keeps a finished block from being charged with the death.
        done = set(ray.wait(refs, num_returns=len(refs), timeout=_SETTLE_S)[0]) if refs else set()
        charged = False
        for ref in refs:
            block, _ = self._running.pop(ref)
            rest = self._rest.pop(ref, ())
            if ref in done:
                try:
                    value = ray.get(ref)
                except ray.exceptions.RayError:
                    pass  # lost with the actor
                else:
                    node = self.nodes.get(number)
                    finished.append(Finished(self, block.tag, value, node, rest))
                    continue
            if not charged:  # the block it was working on (actor tasks run in order)
                charged = True
                block.attempts += 1
                block.reasons.append(reason)
            if block.attempts >= self.max_attempts:
                self.failed_blocks += 1
                finished.append(Finished(self, block.tag, BlockFailure(self._gave_up(block))))
            else:
                block.suspect = True
                self._queue.appendleft(block)
        if handle is not None:
            ray.kill(handle, no_restart=True)
        if self.replacements_left > 0:
            self.replacements_left -= 1
            self._start()
        elif not self._actors and not self._pending:
            finished += self._give_up_all(f"{self.name}: no worker left (last lost: {reason})")
        return finished

    def _give_up_all(self, reason: str) -> list[Finished]:
        """No actor left and none to start: every queued block, and any submitted later,
        fails with `reason`."""
        self._gone = reason
        failed = [Finished(self, b.tag, BlockFailure(reason)) for b in self._queue]
        self.failed_blocks += len(failed)
        self._queue.clear()
        return failed

    def _gave_up(self, block: _Block) -> str:
        last = block.reasons[-1] if block.reasons else "unknown"
        return f"{self.name}: worker lost {block.attempts} times on this block (last: {last})"

    # --- work --------------------------------------------------------------------------

    def broadcast(self, method: str, *args: Any) -> None:
        """Call `method(*args)` on every actor, now and on every actor started later, before
        any block submitted after this call."""
        import ray

        args = tuple(ray.put(a) if not isinstance(a, ray.ObjectRef) else a for a in args)
        self._setup.append((method, args))
        for handle in [*self._actors.values(), *self._pending.values()]:
            getattr(handle, method).remote(*args)

    def submit(
        self, tag: Any, method: str, *args: Any, attempts_left: int | None = None, returns: int = 1
    ) -> None:
        """Queue a block: `method(*args)` on one of the actors; its result comes back from
        `wait_for` with `tag`.

        Args:
            args: the method's arguments; an ObjectRef among them (another block's `rest`)
                reaches the actor as its value, fetched by the actor's node, not the driver.
            attempts_left: tries for this block (default `max_attempts`).
            returns: values the method returns (a tuple of that many): the first comes
                back as `Finished.value`, the others as ObjectRefs in `Finished.rest`.
        """
        if self._gone is not None:  # handed back by the next `wait_for`
            self.failed_blocks += 1
            self._failed_now.append(Finished(self, tag, BlockFailure(self._gone)))
            return
        left = self.max_attempts if attempts_left is None else max(1, attempts_left)
        self._queue.append(_Block(tag, method, args, returns, self.max_attempts - left))
        self._dispatch()

    def _dispatch(self) -> None:
        while self._queue and self._actors:
            # an actor running a suspect block gets nothing more; a suspect block goes only
            # to an idle actor
            free = [n for n in self._actors if not self._runs_suspect(n)]
            if not free:
                return
            number = min(free, key=lambda n: len(self._load.get(n, ())))
            load = len(self._load.get(number, ()))
            if load >= self.depth or (self._queue[0].suspect and load):
                return
            block = self._queue.popleft()
            method = getattr(self._actors[number], block.method)
            if block.returns > 1:
                ref, *rest = method.options(num_returns=block.returns).remote(*block.args)
                self._rest[ref] = tuple(rest)
            else:
                ref = method.remote(*block.args)
            self._running[ref] = (block, number)
            self._load.setdefault(number, []).append(ref)

    def _runs_suspect(self, number: int) -> bool:
        return any(self._running[ref][0].suspect for ref in self._load.get(number, ()))

    @property
    def busy(self) -> bool:
        """Blocks queued, running, or failed and not handed back yet."""
        return bool(self._queue or self._running or self._failed_now)

    def failed_now(self) -> list[Finished]:
        """Blocks submitted after the pool lost its last actor, failed at once."""
        failed, self._failed_now = self._failed_now, []
        return failed

    @property
    def queued(self) -> int:
        """Blocks waiting for an actor."""
        return len(self._queue)

    def busy_nodes(self) -> set[str]:
        """The Ray nodes whose actors hold blocks now."""
        return {self.nodes[n] for n, refs in self._load.items() if refs and n in self.nodes}

    def refs(self) -> list[Any]:
        """What `wait_for` waits on: running blocks and actors starting."""
        return [*self._running, *self._starting]

    def collect(self, ready: Iterable[Any]) -> list[Finished]:
        """Handle the refs `ray.wait` found ready: actors that started, blocks that ended."""
        import ray

        finished: list[Finished] = []
        # each actor's blocks in the order it ran them: a block that ended before its actor
        # died is taken as done before the death charges the block the actor was on
        # (`ray.wait` returns ready refs in no particular order)
        order = {ref: i for refs in self._load.values() for i, ref in enumerate(refs)}
        for ref in sorted(ready, key=lambda r: order.get(r, -1)):
            if ref in self._starting:
                number = self._starting.pop(ref)
                try:
                    self.nodes[number] = str(ray.get(ref))
                except ray.exceptions.RayError as exc:
                    finished += self._fail_start(number, exc)
                    continue
                self._actors[number] = self._pending.pop(number)
                continue
            entry = self._running.get(ref)
            if entry is None:  # re-queued when its actor died
                continue
            block, number = entry
            try:
                value = ray.get(ref)
            except (ray.exceptions.RayTaskError, ray.exceptions.ObjectLostError) as exc:
                # the method raised (no retry helps), or an argument handed on from another
                # pool was lost with its node: the block fails, the actor stays
                self._running.pop(ref)
                self._rest.pop(ref, None)
                self._load[number].remove(ref)
                self.failed_blocks += 1
                cause = exc.cause if isinstance(exc, ray.exceptions.RayTaskError) else exc
                if isinstance(cause, ray.exceptions.ObjectLostError):
                    reason = f"{self.name}: its input was lost ({_reason(cause)})"
                else:
                    reason = f"{self.name}: {type(cause).__name__}: {cause}"
                finished.append(Finished(self, block.tag, BlockFailure(reason)))
                continue
            except ray.exceptions.RayError as exc:  # the actor or its node is gone
                if number in self._actors or number in self._pending:
                    finished += self._lose(number, _reason(exc))
                else:
                    self._running.pop(ref, None)
                    self._rest.pop(ref, None)
                    self._queue.appendleft(block)
                continue
            self._running.pop(ref)
            self._load[number].remove(ref)
            rest = self._rest.pop(ref, ())
            finished.append(Finished(self, block.tag, value, self.nodes.get(number), rest))
        self._dispatch()
        return finished

    def _fail_start(self, number: int, exc: Exception) -> list[Finished]:
        """An actor failed in its constructor or died starting: replaced while the budget
        lasts; with no actor left to run them, the queued blocks fail."""
        self._pending.pop(number, None)
        self.lost += 1
        reason = _reason(exc)
        log.warning("%s: a worker did not start (%s)", self.name, reason)
        if self.replacements_left > 0:
            self.replacements_left -= 1
            self._start()
        if self._actors or self._pending:
            return []
        return self._give_up_all(f"{self.name}: no worker started: {reason}")

    def close(self) -> None:
        """Stop every actor of the pool (pending ones included)."""
        import ray

        for handle in [*self._actors.values(), *self._pending.values()]:
            ray.kill(handle, no_restart=True)
        self._actors.clear()
        self._pending.clear()
        self._starting.clear()
        self._running.clear()
        self._rest.clear()
        self._load.clear()
        self._queue.clear()


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = next((line for line in text if line.strip()), "")
    return f"{type(exc).__name__}: {first[:300]}" if first else type(exc).__name__


def wait_for(pools: Sequence[ActorPool], timeout_s: float = 5.0) -> list[Finished]:
    """Wait until a block of any pool finishes (or `timeout_s`), and return every block that
    finished meanwhile (possibly none: actors only started)."""
    import ray

    failed = [finished for pool in pools for finished in pool.failed_now()]
    refs = [ref for pool in pools for ref in pool.refs()]
    if failed or not refs:
        return failed
    ready, _ = ray.wait(refs, num_returns=1, timeout=timeout_s, fetch_local=False)
    if ready:  # and whatever else is done by now
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0, fetch_local=False)
    finished: list[Finished] = []
    for pool in pools:
        mine = set(pool.refs())
        finished += pool.collect([ref for ref in ready if ref in mine])
    return finished
