"""Turns on a pinned process's CPUs: at most as many of its stages compute at once as it has
CPUs.

A process pinned to k CPUs whose stages have more threads than that (a copy of
`--process-copies pipeline=2 --process-cpus pipeline=0-1`: three stages of one thread each on one
CPU) would otherwise leave the kernel to share the CPU among them, cutting a running stage short
to run one just woken, and every such switch costs the caches the other stage had warmed.
Taking turns, a stage that starts a step (a call, or a stream's next chunk) computes it to its
end. When a turn ends, a later stage of the pipeline goes before an earlier one (a request in
flight is carried out before the next is taken further), and a stage of t threads takes
min(t, k) of the CPUs.

Only CPU stages take turns (a GPU stage waits on its device, not on a core), and only in a
pinned process whose CPU stages have more threads than it has CPUs: otherwise there is nothing
to share, and `turn` costs nothing. The time a stage waits for its turn is time it waits for a
core, and is counted as such (`clock`). A stage that waits inside a step on something other than
its CPUs says so (`launcher.off_cpu`) and leaves the turns from then on.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager

from launcher.off_cpu import holding
from launcher.wire.specs import WorkerSpec

_NO_TURN: AbstractContextManager[None] = contextlib.nullcontext()


class _Waited(threading.local):
    def __init__(self) -> None:
        self.seconds = 0.0


class CoreTurns:
    """Turns of the stages named in `widths` (stage -> CPUs it takes) on `cpus` CPUs, a stage
    with a higher `rank` first; a stage not named computes whenever it likes."""

    def __init__(self, cpus: int, widths: Mapping[str, int], rank: Mapping[str, int]) -> None:
        self._free = cpus
        self._widths = {stage: max(1, min(width, cpus)) for stage, width in widths.items()}
        self._rank = dict(rank)
        self._queue: list[tuple[int, int]] = []  # (-rank, arrival) of the stages waiting
        self._arrivals = itertools.count()
        self._changed = threading.Condition()
        self._waited = _Waited()

    @property
    def stages(self) -> frozenset[str]:
        """The stages that take turns now."""
        with self._changed:
            return frozenset(self._widths)

    def turn(self, stage: str) -> AbstractContextManager[None]:
        """Held while `stage` computes one step."""
        width = self._widths.get(stage)
        return _NO_TURN if width is None else self._turn(stage, width)

    @contextlib.contextmanager
    def _turn(self, stage: str, width: int) -> Iterator[None]:
        self._take(stage, width)
        held = True

        def leave() -> None:  # the stage waits off the CPUs: it takes no more turns
            nonlocal held
            with self._changed:
                self._widths.pop(stage, None)
            held = False
            self._give_back(width)

        try:
            with holding(leave):
                yield
        finally:
            if held:
                self._give_back(width)

    def _take(self, stage: str, width: int) -> None:
        ticket = (-self._rank.get(stage, 0), next(self._arrivals))
        with self._changed:
            heapq.heappush(self._queue, ticket)
            if not self._next(ticket, width):
                since = time.perf_counter()
                self._changed.wait_for(lambda: self._next(ticket, width))
                self._waited.seconds += time.perf_counter() - since
            heapq.heappop(self._queue)
            self._free -= width
            self._changed.notify_all()  # the next in line may fit in what is left

    def _give_back(self, width: int) -> None:
        with self._changed:
            self._free += width
            self._changed.notify_all()

    def _next(self, ticket: tuple[int, int], width: int) -> bool:
        return self._queue[0] == ticket and self._free >= width

    @property
    def waiting(self) -> int:
        """How many steps wait for their turn now."""
        with self._changed:
            return len(self._queue)

    def waited(self) -> float:
        """Seconds the calling thread has waited for its turns so far."""
        return self._waited.seconds

    def clock(self, core_wait: Callable[[], float]) -> Callable[[], float]:
        """The calling thread's wait for a core so far: the kernel's (`core_wait`, a
        `WaitClock`) and its waits for a turn here."""
        return lambda: core_wait() + self._waited.seconds


def core_turns(spec: WorkerSpec) -> CoreTurns:
    """The turns of `spec`'s process: its CPU stages share its pinned CPUs where their threads
    are more than those CPUs; otherwise no stage takes turns."""
    on_cpu = {s.name: s.threads for s in spec.stages if s.device == "cpu"}
    if not spec.cpus or spec.tp is not None or sum(on_cpu.values()) <= len(spec.cpus):
        on_cpu = {}
    return CoreTurns(len(spec.cpus), on_cpu,
                     {s.name: i for i, s in enumerate(spec.stages)})
