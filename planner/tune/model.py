"""Predict how a placement performs under a load, from a measured profile.

The model is a discrete-event simulation of how the launcher executes a plan, not of an abstract
queue: every stage is one thread taking one item at a time; the work of an item is a part that
holds its process's interpreter lock and a core, a native part that needs only a core, and a part
that waits on a device (a GPU is one server shared by the processes on it; without CUDA the wait
is a pure delay); a handoff inside a process is a call, one across processes costs interpreter time
on both sides, a copy of its bytes and a little latency; the serving process reads each request
and encodes its audio; a streaming stage hands each chunk on as it makes it. A mean-value analysis
would give means only; the simulation also gives the percentiles and the time to first audio that
the choice is made on, and it is cheap enough (tens of milliseconds per candidate) to run on
every placement the planner accepts. Three shortcuts keep it so, none of which changes what is
simulated (a test checks the last two against stepping every event): no event marks an OS time
slice while nobody waits for a core (so a slice's end can now follow, not precede, an event due at
the very same moment: two of 452 replayed predictions moved, by 1.6% and 0.06%); threads that
convoy at a lock take their turns without events while nothing else is due; and one client's run
is put together from one request per size.

Assumptions (the README lists them too): costs are the profile's means, scaled per chunk (a
streaming stage's profiled share of its work before its first chunk, the rest spread evenly); the
interpreter lock is handed over first come first served (CPython is close to that under load),
and a thread that waited for it runs only after a wake-up (the profile's handoff latency: the lock
is held, unused, until then); cores are a shared pool that the OS time-shares (below); memory
never limits throughput; every process spends CPU only on the work charged here (the launcher
keeps it so: workers and the serving process run torch with one intra-op thread, since a second
one spin-waits after every op and, measured on 2 cores, took 5-8 ms of CPU per request from the
workers).

Cores: with more runnable threads than cores the OS does not let one run its work to the end; it
gives each a base slice in turn (Linux's default: 0.75 ms x (1 + log2 CPUs), 1.5 ms on 2). A
thread preempted while it holds its process's interpreter lock keeps it, so its process's other
threads wait as well. Measured on `native-device` at C=8 on 2 vCPUs, the three-process split
kept the machine 84% busy where the model without slices had it 99% busy (and over-predicted its
rate by 23%), with the CPU per request predicted right (18.1 against 18.9 ms).

Native work and the lock: native code releases the interpreter lock for a call (a torch op, a
hashed block) and needs it back to run the Python that makes the next call. A thread that asks
for the lock while another thread of its process runs pure Python waits until that thread drops
it, which CPython forces only after a switch interval (5 ms by default) or when the holder blocks
or calls native code itself. So while a process runs pure Python, its native work gets about one
call in per switch interval: a process mixing the two serialises them far more than their CPU
times suggest (measured on `native-device` of `benchmarks/tune_accuracy.py` at C=8, the model
without this over-predicted such placements by 22-50%). The model runs native work in calls of
the profiled size (`native_call_ms`): between calls the thread takes the lock for no time if it
is free, and otherwise gives up its core and queues for it; pure-Python work holds the lock in
slices of at most a switch interval and queues again after each, so a waiter's wait is bounded by
the switch interval (first come first served: a waiter arriving mid-slice waits out the rest of
that slice). CPython's waiter instead sleeps a full interval from when it began waiting; modelled
that way, no prediction over runs 1-10 of `benchmarks/tune_runs/2026-11-30` changed (their
pure-Python stretches are all shorter than an interval, or all pure Python), so the simpler rule
stays.
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
from collections import defaultdict, deque
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass

from planner.plan import Plan
from planner.tune.profile import Profile

FRONTEND = "(serving process)"
CLIENT = "(load client)"
# Chunks beyond this many per request are simulated in groups (the first one always alone, so the
# time to first audio stays exact): it bounds the events per request.
MAX_PIECES = 8


def os_slice_ms(cores: int) -> float:
    """How long a thread keeps a core while others wait for one: Linux's default base slice,
    0.75 ms scaled by 1 + log2 of the CPUs (at most 8), as the kernel scales it (1.5 ms on 2)."""
    return 0.75 * (1 + math.floor(math.log2(min(max(cores, 1), 8))))


@dataclass(frozen=True)
class Workload:
    """Closed loop (`concurrency` clients, each sending its next request when its last one ended)
    or open loop (`rate` requests per second, Poisson arrivals). `requests`: as many as
    `planner bench` (and so `tune --verify`) measures by default, so that a prediction is the
    figure such a run would give (a closed loop's throughput includes the drain at its end).
    Replaying the 82 saved picks of `benchmarks/tune_runs/2026-11-30` with 96 instead of 160
    changed no pick and lowered the mean throughput error from 6.8% to 6.4%."""

    concurrency: int | None = None
    rate: float | None = None
    requests: int = 96
    warmup: int = 16
    seed: int = 0

    def __post_init__(self) -> None:
        if (self.concurrency is None) == (self.rate is None):
            raise ValueError("a workload has either a concurrency or a rate")

    @property
    def label(self) -> str:
        return f"C={self.concurrency}" if self.concurrency is not None else f"{self.rate:g} req/s"


@dataclass(frozen=True)
class Prediction:
    throughput_rps: float
    latency_p50_ms: float
    latency_p99_ms: float
    ttfa_p90_ms: float | None  # None: the pipeline does not stream
    # (resource, fraction of the time it was busy), busiest first; a core pool counts all cores.
    utilization: tuple[tuple[str, float], ...]

    @property
    def bottleneck(self) -> tuple[str, float]:
        return self.utilization[0] if self.utilization else ("none", 0.0)


# -- the plan as the simulation sees it ------------------------------------------------------------
@dataclass(frozen=True)
class _Stage:
    name: str
    process: str
    gpus: tuple[int, ...]
    gil: float
    native: float
    device: float
    call: float  # native work per call (between two re-takes of the lock)
    chunks_out: float
    out_bytes: float
    succ: tuple[tuple[str, bool], ...]  # (successor, streaming)
    preds: int  # request-level inputs it waits for
    first: float | None  # share of its work before its first chunk (None: 1 / chunks)


def _stages(plan: Plan, profile: Profile) -> dict[str, _Stage]:
    succ: dict[str, list[tuple[str, bool]]] = defaultdict(list)
    preds: dict[str, int] = defaultdict(int)
    for h in plan.handoffs:
        succ[h.source].append((h.target, h.streaming))
        preds[h.target] += 1
    out = {}
    for s in plan.stages:
        p = profile.stage(s.name)
        unit = s.process if not s.is_tp else f"{s.name} (tp)"  # ranks run in lock step
        out[s.name] = _Stage(s.name, unit, tuple(s.gpus), p.gil_ms, p.native_ms, p.device_ms,
                             p.call_ms, max(p.chunks_out, 1.0), p.out_bytes, tuple(succ[s.name]),
                             preds[s.name], p.first_chunk_share)
    return out


# -- a small discrete-event engine -----------------------------------------------------------------
class _Resource:
    __slots__ = ("name", "free", "capacity", "queue", "busy", "since", "runners", "retakers",
                 "wake")

    def __init__(self, name: str, capacity: int = 1, wake: float = 0.0) -> None:
        self.name, self.capacity, self.free = name, capacity, capacity
        self.wake = wake  # from the hand-over to a waiting thread until it runs
        self.queue: deque[Generator | _Native | _Python] = deque()
        self.busy = 0.0  # server-milliseconds held
        self.since: list[float] = []
        # An interpreter lock only: its process's threads running native work (a dict, not a set:
        # the order they are told of a new holder must not depend on object addresses), and the
        # queued threads that want it only to make their next native call.
        self.runners: dict[_Native, None] = {}
        self.retakers: set[_Native] = set()


class _Native:
    """A thread's native work in progress: `left` ms of it, in calls of `call` ms, `into` ms into
    the current call; between calls it needs the lock of its process. `ran` ms of it since it
    last got a core: at an OS time slice it goes back to the end of the queue for cores, if
    anyone is in it. The engine drives it from the moment its thread starts it to its end (the
    thread, `gen`, is resumed then): a busy pipeline spends most of its events here."""

    __slots__ = ("at_boundary", "at_slice", "call", "gen", "into", "left", "lock", "preempted",
                 "ran", "since", "token")

    def __init__(self, lock: _Resource, ms: float, call: float) -> None:
        self.lock, self.left, self.call, self.into = lock, ms, max(call, 1e-6), 0.0
        self.gen: Generator | None = None
        self.since = 0.0
        self.ran = 0.0
        self.token = 0  # bumped to void the event scheduled before
        self.at_boundary = False  # the event scheduled is a call boundary, not the end
        self.at_slice = False  # ... or the end of its time slice on the core
        self.preempted = False  # it gave up its core at a time slice, not at a boundary


class _Python:
    """A thread's pure-Python work in progress, then its native work (`then`): `left` ms of it
    still to take its process's lock for, in stretches of at most a switch interval (`part` ms
    left of the current one), each run on a core in OS slices (`run_for`: the current one; `ran`:
    ms on this core since it got it)."""

    __slots__ = ("gen", "left", "lock", "part", "ran", "run_for", "then")

    def __init__(self, lock: _Resource, ms: float, then: _Native | None) -> None:
        self.lock, self.left, self.then = lock, ms, then
        self.gen: Generator | None = None
        self.part = self.run_for = self.ran = 0.0


_EPS = 1e-9


class _Sim:
    def __init__(self, cores: _Resource, slice_ms: float, switch_ms: float,
                 shortcuts: bool = True) -> None:
        self.cores, self.slice, self.switch = cores, slice_ms, switch_ms
        self.shortcuts = shortcuts  # off: every convoy turn as events (to test that it is alike)
        self.now = 0.0
        # Native work on a core now. While nobody waits for a core a time slice changes nothing
        # (the thread gets the next one on the same core), so no event marks it: when a thread
        # starts to wait, these are told, and their slices count from then on.
        self.running: dict[_Native, None] = {}
        self._heap: list = []
        self._seq = itertools.count()
        self.halted = False  # set by whatever ends the run
        # A thread that ended a piece of CPU work and goes straight on to the next one keeps its
        # core (thread, ms run on it): see `_carry_on`.
        self.kept: tuple[Generator, float] | None = None

    def at(self, delay: float, fn: Callable, *args) -> None:
        heapq.heappush(self._heap, (self.now + delay, next(self._seq), fn, args))

    def _release(self, res: _Resource) -> None:
        res.busy += self.now - res.since.pop()
        if res.queue:
            self._hand_on(res)
        else:
            res.free += 1

    def _take_core(self, waiter: _Python | _Native) -> bool:
        """A core for `waiter` now (True), or it queues for one (False): then native work on a
        core ends its slices again (`_core_wanted`)."""
        cores, kept = self.cores, self.kept
        if kept is not None and kept[0] is waiter.gen:
            self.kept = None
            waiter.ran = kept[1]
            return True
        if cores.free:
            cores.free -= 1
            cores.since.append(self.now)
            waiter.ran = 0.0
            return True
        cores.queue.append(waiter)
        if len(cores.queue) == 1:
            self._core_wanted()
        return False

    def _carry_on(self, gen: Generator, ran: float, fn: Callable, *args) -> None:
        """`gen`'s thread ended a piece of CPU work on a core (`ran` ms on it so far): run `fn`,
        and if that has the thread take a core for its next piece at once, it keeps its own.
        The OS takes a core from a thread only when its time slice ends or when it blocks:
        giving the core up between two pieces (its Python and its native work, two stretches of
        Python, a stage's work and its handoff) put the thread behind every other one waiting
        for a core, and with more busy threads than cores that under-predicted placements of
        more processes than cores (issue 26: three and four processes on two cores, 17% low)."""
        if self.kept is not None:  # not taken by the thread it was kept for: free it
            self.kept = None
            self._release(self.cores)
        self.kept = (gen, ran)
        fn(*args)
        if self.kept is not None:  # it blocked (a lock, a device, its inbox) or finished
            self.kept = None
            self._release(self.cores)

    def run(self) -> None:
        """Until `halted` is set, or nothing is left to happen."""
        heap, pop = self._heap, heapq.heappop
        self.halted = False
        while heap and not self.halted:
            self.now, _, fn, args = pop(heap)
            fn(*args)

    # Threads are generators yielding ("hold", ms) | ("get", gpu) | ("put", gpu) |
    # ("park", (slots, key)): wait, stored in slots[key], until someone steps it again |
    # ("cpu", _Python): its Python work, holding its process's lock (first come first served,
    # let go at least every switch interval), and then its native work to its end, on a core,
    # re-taking the lock between calls (take it and drop it at once: the Python between two
    # calls; first come first served if it is held, without a core while it waits).
    def step(self, gen: Generator, _: object = None) -> None:
        while True:
            try:
                op, arg = next(gen)
            except StopIteration:
                return
            if op == "hold":
                if arg > 0:
                    self.at(arg, self.step, gen)
                    return
            elif op == "get":  # a GPU: locks and cores are taken by the "cpu" op's work
                if arg.free:
                    arg.free -= 1
                    arg.since.append(self.now)
                else:
                    arg.queue.append(gen)
                    return
            elif op == "put":
                self._release(arg)
            elif op == "cpu":
                arg.gen = gen
                self._python(arg)
                return
            else:  # park
                slots, key = arg
                slots[key] = gen
                return

    def _hand_on(self, res: _Resource) -> None:
        """`res` was released: the next in line gets it. A thread waiting for an interpreter lock
        sleeps; the lock is its from the hand-over, but it runs only once woken (`res.wake`), and
        a retaker drops it again as soon as it runs."""
        if not res.queue:
            res.free += 1
            return
        nxt = res.queue.popleft()
        res.since.append(self.now)
        if res.runners:
            self._lock_taken(res)
        kind = type(nxt)
        if res is self.cores:
            nxt.ran = 0.0
        if kind is _Python:
            self.at(res.wake, self._py_run if res is self.cores else self._py_locked, nxt)
        elif kind is not _Native:
            self.at(res.wake, self.step, nxt)
        elif nxt in res.retakers:
            res.retakers.discard(nxt)
            self.at(res.wake, self._passed_through, res, nxt)
        else:
            self.at(res.wake, self._on_core, nxt)

    def _passed_through(self, res: _Resource, n: _Native) -> None:
        """`n` took the lock between two native calls and now drops it."""
        res.busy += self.now - res.since.pop()
        cores = self.cores
        if self.shortcuts and res.queue and not res.runners and not cores.queue and cores.free:
            if len(res.queue) == 1 and len(res.retakers) == 1:
                n = self._convoy_pair(res, n)
            n = self._convoy(res, n)
        self._hand_on(res)
        self._want_core(n)

    def _convoy_pair(self, res: _Resource, n: _Native) -> _Native:
        """`_convoy` for the commonest convoy, two threads taking turns (an engine and its
        vocoder), on their state in local variables: the same arithmetic in the same order, the
        containers (the one retaker in the queue) and the threads written once at the end."""
        other = res.queue[0]
        if type(other) is not _Native or other not in res.retakers:
            return n
        heap, cores = self._heap, self.cores
        limit = heap[0][0] if heap else math.inf
        t, wake = self.now, res.wake
        cores_busy, lock_busy = cores.busy, res.busy
        # per thread: [left, into, since, ran, turns]; `x` makes the call, `y` holds the lock
        x, y = n, other
        sx, sy = [x.left, x.into, x.since, x.ran, 0], [y.left, y.into, y.since, y.ran, 0]
        while True:
            call, into = x.call, sx[1]
            to_boundary = call - into if call - into > _EPS else call
            boundary, woken = t + to_boundary, t + wake
            if not (to_boundary < sx[0] - _EPS and boundary < woken < limit):
                break
            done = boundary - t
            sx[0] = max(sx[0] - done, 0.0)
            sx[1], sx[2], sx[3] = 0.0, boundary, done
            sx[4] += 1
            cores_busy += boundary - t
            lock_busy += woken - t
            t = woken
            x, y, sx, sy = y, x, sy, sx
        if sx[4] or sy[4]:
            for thread, st in ((x, sx), (y, sy)):
                if st[4]:
                    thread.left, thread.into, thread.since, thread.ran = st[:4]
                    thread.token += 2 * st[4]
                    thread.at_boundary, thread.at_slice = True, False
            cores.busy, res.busy = cores_busy, lock_busy
            res.queue[0] = y  # the one that made the last call waits for the lock again
            res.retakers.clear()
            res.retakers.add(y)
            self.now = t
        return x

    def _convoy(self, res: _Resource, n: _Native) -> _Native:
        """Threads of one process making native calls shorter than a wake-up convoy: the lock
        goes to the next retaker in line and is held while it wakes; meanwhile `n` makes one
        call (on a free core), finds the lock still held and queues again; then the woken one
        drops the lock, and so on, two events per call (most of a busy pipeline's events). Take
        the turns that end before anything else is due here, with the arithmetic the events
        would do (nothing else can change in between: no runner of this lock, no wait for a
        core), and return the thread whose wake-up ends the last one taken; the engine's time is
        then that end, and the events take the next turn."""
        queue, retakers, cores, heap = res.queue, res.retakers, self.cores, self._heap
        limit = heap[0][0] if heap else math.inf
        t, wake = self.now, res.wake
        while queue:
            nxt = queue[0]
            if type(nxt) is not _Native or nxt not in retakers:
                break
            call, into = n.call, n.into
            to_boundary = call - into if call - into > _EPS else call
            boundary, woken = t + to_boundary, t + wake
            if not (to_boundary < n.left - _EPS and boundary < woken < limit):
                break
            # `_hand_on`: the lock is `nxt`'s until `woken`
            queue.popleft()
            retakers.discard(nxt)
            # `_want_core`, `_on_core`, `_schedule`: `n` runs to its next call boundary, ...
            n.token += 2  # the event it schedules there, voided again when it stops
            n.at_boundary, n.at_slice = True, False
            done = boundary - t
            n.since, n.ran = boundary, done
            n.left = max(n.left - done, 0.0)
            # ... where (`_native_event`) the lock is held: it gives up its core and queues
            n.into = 0.0
            cores.busy += boundary - t
            queue.append(n)
            retakers.add(n)
            # `_passed_through` at `woken`: `nxt` drops the lock
            res.busy += woken - t
            t, n = woken, nxt
        self.now = t
        return n

    # -- Python work: the lock, then a core -----------------------------------------------------
    def _python(self, p: _Python) -> None:
        """Take the lock for the next stretch; with none left, go on to the native work."""
        if p.left > _EPS:
            lock = p.lock
            if lock.free:
                lock.free -= 1
                lock.since.append(self.now)
                if lock.runners:
                    self._lock_taken(lock)
                self._py_locked(p)
            else:
                lock.queue.append(p)
        elif p.then is not None:
            p.then.gen = p.gen
            self._want_core(p.then)
        else:
            self.step(p.gen)

    def _py_locked(self, p: _Python) -> None:
        p.part = min(p.left, self.switch)
        p.left -= p.part
        self._py_core(p)

    def _py_core(self, p: _Python) -> None:
        """The next OS slice of the stretch (the OS may take the core away in between: the lock
        stays held), or, the stretch done, let go of the lock."""
        if p.part > _EPS:
            if self._take_core(p):
                self._py_run(p)
        else:
            self._release(p.lock)
            self._python(p)

    def _py_run(self, p: _Python) -> None:
        p.run_for = min(p.part, max(self.slice - p.ran, _EPS))
        self.at(p.run_for, self._py_ran, p)

    def _py_ran(self, p: _Python) -> None:
        p.part -= p.run_for
        p.ran += p.run_for
        if p.part > _EPS:  # its time slice ended within the stretch
            if self.cores.queue:  # to the back of the queue for cores, the lock still held
                self._release(self.cores)
                self._py_core(p)
            else:  # nobody waits: a new slice on the same core
                p.ran = 0.0
                self._py_run(p)
            return
        self._carry_on(p.gen, p.ran, self._py_core, p)

    # -- native work against its process's lock -----------------------------------------------
    def _want_core(self, n: _Native) -> None:
        if self._take_core(n):
            self._on_core(n)

    def _on_core(self, n: _Native) -> None:
        n.since = self.now  # `ran`: set as it got the core (`_take_core`, `_hand_on`)
        n.lock.runners[n] = None
        self.running[n] = None
        self._schedule(n)

    def _advance(self, n: _Native) -> None:
        done = self.now - n.since
        n.since = self.now
        n.left = max(n.left - done, 0.0)
        n.into = (n.into + done) % n.call
        n.ran += done

    def _schedule(self, n: _Native) -> None:
        """Its next event: the end of its work, or, while the lock is held, the next call
        boundary (where it will have to wait) if that comes first."""
        n.token += 1
        to_boundary = n.call - n.into if n.call - n.into > _EPS else n.call
        n.at_boundary = not n.lock.free and to_boundary < n.left - _EPS
        until = to_boundary if n.at_boundary else n.left
        n.at_slice = False
        if self.cores.queue:
            n.ran %= self.slice  # the slices that ended while nobody waited went on on this core
            to_slice = max(self.slice - n.ran, _EPS)
            n.at_slice = to_slice < until - _EPS
            if n.at_slice:
                n.at_boundary = False
                until = to_slice
        self.at(until, self._native_event, n, n.token)

    def _core_wanted(self) -> None:
        """A thread began to wait for a core: native work on one now ends its slice (counted
        from when it got its core) at the next slice boundary, instead of its next event."""
        for n in self.running:
            self._advance(n)
            self._schedule(n)

    def _lock_taken(self, lock: _Resource) -> None:
        """Someone took `lock` for Python: each native thread of its process will stop at its
        next call boundary unless the lock is free again by then (one already bound for a
        boundary keeps it: when that comes does not depend on who holds the lock)."""
        for n in lock.runners:
            if not n.at_boundary:
                self._advance(n)
                self._schedule(n)

    def _native_event(self, n: _Native, token: int) -> None:
        if token != n.token:
            return
        self._advance(n)
        if n.at_slice:
            if not self.cores.queue:  # nobody waits for a core: a new slice on the same one
                n.ran = 0.0
                self._schedule(n)
                return
            n.preempted = True
        elif n.at_boundary:
            n.into = 0.0
            if n.lock.free:  # the holder let go before this call ended: carry on
                self._schedule(n)
                return
        else:
            n.left = 0.0
        del n.lock.runners[n]
        del self.running[n]
        n.token += 1
        if n.left <= _EPS:  # on to its next piece of work, on the same core if it needs one
            self._carry_on(n.gen, n.ran if self.cores.queue else n.ran % self.slice,
                           self.step, n.gen)
            return
        self._release(self.cores)
        if n.preempted:  # to the back of the queue for cores; it needs no lock
            n.preempted = False
            self._want_core(n)
        elif n.lock.free:
            self._want_core(n)
        else:  # waiting for the lock takes no core
            n.lock.queue.append(n)
            n.lock.retakers.add(n)


@dataclass
class _Item:
    request: int
    share: float  # the fraction of a stage's per-request work this item carries (x its scale)
    whole: bool  # request-level (all of it), not a chunk
    recv_gil: float = 0.0  # interpreter time the receiving side pays (a cross-process handoff)


class _Run:
    def __init__(self, plan: Plan, profile: Profile, workload: Workload, cores: int,
                 shortcuts: bool = True) -> None:
        self.p, self.w = profile, workload
        self.stages = _stages(plan, profile)
        self.switch = max(profile.switch_interval_ms, 0.01)
        self.cores = _Resource("cores", max(1, cores))
        self.sim = _Sim(self.cores, os_slice_ms(cores), self.switch, shortcuts)
        # A thread handed its process's lock after waiting for it slept on it: until it runs,
        # the lock is held and unused. The profile's handoff latency is such a wake-up.
        wake = profile.handoff.latency_ms
        self.gil: dict[str, _Resource] = {}
        self.gpu: dict[int, _Resource] = {}
        on_device = profile.device == "cuda"
        for s in self.stages.values():
            self.gil.setdefault(s.process, _Resource(f"interpreter lock of {s.process}", 1, wake))
            if on_device:
                for g in s.gpus:
                    self.gpu.setdefault(g, _Resource(f"GPU {g}"))
        self.gil[FRONTEND] = _Resource(f"interpreter lock of the {FRONTEND}", 1, wake)
        self.gil[CLIENT] = _Resource(f"interpreter lock of the {CLIENT}", 1, wake)
        self.inbox: dict[str, deque[_Item]] = {n: deque() for n in self.stages}
        self.parked: dict[str, Generator] = {}
        # Chunks a plain (not streaming) edge holds until the request's last one: the launcher
        # hands such an edge the complete output, every chunk at once (launcher.worker.stages).
        self.held: dict[tuple[str, str, int], list[_Item]] = defaultdict(list)
        self.thread_busy: dict[str, float] = defaultdict(float)
        self.entry = [n for n, s in self.stages.items() if s.preds == 0]
        self.terminal = [n for n, s in self.stages.items() if not s.succ]
        self.joins: dict[tuple[str, int], int] = defaultdict(int)
        self.left: dict[int, float] = {}  # request -> terminal work still to come
        self.started: dict[int, float] = {}
        self.first_audio: dict[int, float] = {}
        self.done: dict[int, float] = {}
        self.sent = 0
        self.total = workload.warmup + workload.requests
        self.rng = random.Random(workload.seed)
        self.scale: dict[int, float] = {}
        self.streams = any(st for s in self.stages.values() for _, st in s.succ)
        for n in self.stages:
            self._thread(n)

    # -- threads ----------------------------------------------------------------------------------
    def _thread(self, name: str) -> None:
        self.sim.step(self._stage_loop(name))

    def _work(self, proc: str, gil: float, native: float, device: float,
              gpus: Iterable[_Resource] = (), call: float = float("inf")) -> Generator:
        if gil > _EPS or native > 0:
            lock = self.gil[proc]
            yield ("cpu", _Python(lock, gil, _Native(lock, native, call) if native > 0 else None))
        if device > 0:
            held = list(gpus)
            for g in held:
                yield ("get", g)
            yield ("hold", device)
            for g in reversed(held):
                yield ("put", g)

    def _stage_loop(self, name: str) -> Generator:
        s = self.stages[name]
        gpus = [self.gpu[g] for g in s.gpus if g in self.gpu]
        box = self.inbox[name]
        streaming = any(st for _, st in s.succ)
        while True:
            while not box:
                yield ("park", (self.parked, name))
            item = box.popleft()
            t0 = self.sim.now
            whole_pieces = item.whole and streaming and s.chunks_out > 1
            pieces = _pieces(s.chunks_out) if whole_pieces else [1.0]
            works = _work_fractions(pieces, s.first) if whole_pieces else pieces
            cost = self.scale[item.request]
            chunk = 1.0 / max(1, round(s.chunks_out))  # of the request's output
            ahead: float | None = None  # a piece done, not yet handed on
            for k, (frac, done) in enumerate(zip(pieces, works)):
                share = item.share * frac  # of the request's output, handed on
                work = item.share * done * cost  # of the stage's work, done before it
                # The launcher hands a streamed chunk on once the stage has produced the next
                # (it looks one ahead to mark the last): the piece before goes after this one's
                # first chunk.
                first = work if ahead is None else work * chunk / frac
                yield from self._work(s.process, s.gil * first + (item.recv_gil if k == 0 else 0),
                                      s.native * first, s.device * first, gpus, s.call)
                if ahead is not None:
                    yield from self._emit(s, name, item, ahead, whole_pieces, False)
                    rest = work - first
                    yield from self._work(s.process, s.gil * rest, s.native * rest,
                                          s.device * rest, gpus, s.call)
                ahead = share
            yield from self._emit(s, name, item, ahead, whole_pieces, True)
            self.thread_busy[name] += self.sim.now - t0

    def _emit(self, s: _Stage, name: str, item: _Item, share: float, whole_pieces: bool,
              last: bool) -> Generator:
        """A piece of `item`'s output (`share` of the request's) handed on: each chunk over a
        streaming edge, the whole once done over a plain one, the audio back to the server."""
        for target, st in s.succ:
            if st and whole_pieces:
                yield from self._handoff(s, target, _Item(item.request, share, False),
                                         s.out_bytes * share)
            elif last:
                for out in self._complete(name, target, st, item):
                    yield from self._handoff(s, target, out, s.out_bytes * out.share)
        if not s.succ:  # the result goes back to the serving process
            yield from self._work(s.process, self.p.handoff.fixed_ms, 0.0, 0.0)
            self._audio(item.request, share)

    def _complete(self, name: str, target: str, streaming: bool, item: _Item) -> list[_Item]:
        """What `name` hands `target` once it is done with `item`: the item itself, except that a
        chunk bound for a plain edge waits for the rest of its request's chunks."""
        out = _Item(item.request, item.share, item.whole)
        if item.whole or streaming:
            return [out]
        key = (name, target, item.request)
        held = self.held[key]
        held.append(out)
        if sum(i.share for i in held) < 1.0 - 1e-6:
            return []
        del self.held[key]
        return held

    def _handoff(self, s: _Stage, target: str, item: _Item, nbytes: float) -> Generator:
        t = self.stages[target]
        if t.process == s.process:
            self._deliver(target, item)
            return
        h = self.p.handoff
        yield from self._work(s.process, h.fixed_ms, h.copy_ms(nbytes), 0.0)
        item.recv_gil = h.fixed_ms
        self.sim.at(h.latency_ms, self._deliver, target, item)

    def _deliver(self, name: str, item: _Item) -> None:
        s = self.stages[name]
        if item.whole and s.preds > 1:
            key = (name, item.request)
            self.joins[key] += 1
            if self.joins[key] < s.preds:
                return
            del self.joins[key]
        self.inbox[name].append(item)
        gen = self.parked.pop(name, None)
        if gen is not None:
            self.sim.at(0.0, self.sim.step, gen)

    # -- requests ---------------------------------------------------------------------------------
    def _submit(self, scale: float | None = None) -> None:
        if self.sent >= self.total:
            return
        r = self.sent
        self.sent += 1
        self.started[r] = self.sim.now
        self.left[r] = float(len(self.terminal))
        self.scale[r] = self.rng.choice(self.p.request_scale) if scale is None else scale
        self.sim.step(self._frontend_in(r))

    def _frontend_in(self, r: int) -> Generator:
        yield from self._work(CLIENT, self.p.client_ms / 2, 0.0, 0.0)
        yield from self._work(FRONTEND, self.p.frontend_ms / 2, 0.0, 0.0)
        h = self.p.handoff
        for name in self.entry:
            yield from self._work(FRONTEND, h.fixed_ms, 0.0, 0.0)
            self.sim.at(h.latency_ms, self._deliver, name, _Item(r, 1.0, True, h.fixed_ms))

    def _audio(self, r: int, share: float) -> None:
        if r not in self.first_audio:
            self.first_audio[r] = self.sim.now
        self.left[r] -= share
        if self.left[r] <= 1e-9:
            self.sim.step(self._frontend_out(r))

    def _frontend_out(self, r: int) -> Generator:
        h = self.p.handoff
        yield ("hold", h.latency_ms)
        yield from self._work(FRONTEND, h.fixed_ms + self.p.frontend_ms / 2, 0.0, 0.0)
        yield from self._work(CLIENT, self.p.client_ms / 2, 0.0, 0.0)
        self.done[r] = self.sim.now
        self.sim.halted = len(self.done) >= self.total
        if self.w.concurrency is not None:
            self._submit()

    def _arrivals(self) -> None:
        self._submit()
        if self.sent < self.total:
            self.sim.at(self.rng.expovariate(self.w.rate / 1000.0), self._arrivals)

    def _busy(self) -> dict[str, float]:
        """Each resource's and stage thread's busy time so far (server-milliseconds)."""
        out = {r.name: r.busy for r in (self.cores, *self.gil.values(), *self.gpu.values())}
        out.update((f"stage thread {n}", b) for n, b in self.thread_busy.items())
        return out

    def _run_alone(self) -> Prediction:
        """One client: each request finds the pipeline empty (its thread parked, every lock and
        core free) and the next is sent the moment it ends, so a request's whole timeline depends
        on its size alone. Each size drawn is simulated once, and the run is put together from
        them in the order drawn: the same figures as simulating every request, at the cost of
        a dozen."""
        scales = [self.rng.choice(self.p.request_scale) for _ in range(self.total)]
        seen: dict[float, tuple[float, float, dict[str, float]]] = {}
        for x in scales:
            if x in seen:
                continue
            before, r = self._busy(), self.sent
            self.total = self.sent + 1  # this request is the run's last: no next one, halt
            self._submit(x)
            self.sim.run()
            after = self._busy()
            seen[x] = (self.done[r] - self.started[r], self.first_audio[r] - self.started[r],
                       {k: v - before.get(k, 0.0) for k, v in after.items()})
        measured = scales[self.w.warmup:]
        lat = [seen[x][0] for x in measured]
        ttfa = [seen[x][1] for x in measured]
        total_time = max(sum(seen[x][0] for x in scales), 1e-9)
        capacity = {self.cores.name: self.cores.capacity}
        util = [(name, sum(seen[x][2].get(name, 0.0) for x in scales) / total_time
                 / capacity.get(name, 1)) for name in self._busy()]
        return self._prediction(len(measured), max(sum(lat), 1e-9), lat, ttfa, util)

    def _prediction(self, n: int, span: float, lat: list[float], ttfa: list[float],
                    util: list[tuple[str, float]]) -> Prediction:
        util.sort(key=lambda x: -x[1])
        return Prediction(
            throughput_rps=n / span * 1000.0,
            latency_p50_ms=_percentile(lat, 50), latency_p99_ms=_percentile(lat, 99),
            ttfa_p90_ms=_percentile(ttfa, 90) if self.streams else None,
            utilization=tuple((name, round(u, 4)) for name, u in util))

    def run(self) -> Prediction:
        if self.w.concurrency == 1 and self.sim.shortcuts:
            return self._run_alone()
        if self.w.concurrency is not None:
            for _ in range(self.w.concurrency):
                self._submit()
        else:
            self._arrivals()
        self.sim.run()
        measured = [r for r in range(self.w.warmup, self.total) if r in self.done]
        t0 = min(self.started[r] for r in measured)
        t1 = max(self.done[r] for r in measured)
        span = max(t1 - t0, 1e-9)
        lat = [self.done[r] - self.started[r] for r in measured]
        ttfa = [self.first_audio[r] - self.started[r] for r in measured]
        total_time = max(self.sim.now, 1e-9)
        util = [(r.name, r.busy / total_time / r.capacity)
                for r in (self.cores, *self.gil.values(), *self.gpu.values())]
        util += [(f"stage thread {n}", b / total_time) for n, b in self.thread_busy.items()]
        return self._prediction(len(measured), span, lat, ttfa, util)


def _pieces(chunks: float) -> list[float]:
    """Fractions of a streaming stage's work per simulated piece: its first chunk alone, the rest
    in at most MAX_PIECES - 1 groups."""
    n = max(1, round(chunks))
    if n <= MAX_PIECES:
        return [1.0 / n] * n
    rest = n - 1
    groups = MAX_PIECES - 1
    sizes = [rest // groups + (1 if i < rest % groups else 0) for i in range(groups)]
    return [1.0 / n] + [k / n for k in sizes]


def _work_fractions(pieces: list[float], first: float | None) -> list[float]:
    """Fractions of a streaming stage's work done for each simulated piece: `first` (the
    profile's `first_chunk_share`) before the first chunk, the rest spread over the other pieces
    as their chunks are; without a measured `first`, as the chunks are (`pieces`). A stage that
    computes a whole request in one call and then hands its chunks on in a burst does nearly all
    of its work before its first chunk: spread evenly, the next stage would start on that chunk
    after a fraction of it (piper's acoustic stage at C=1: the model's latency 25% short)."""
    if first is None or len(pieces) < 2:
        return pieces
    first = min(max(first, 0.0), 1.0)
    rest = sum(pieces[1:])
    return [first] + [(1.0 - first) * p / rest for p in pieces[1:]]


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    idx = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[idx]


def predict(plan: Plan, profile: Profile, workload: Workload, cores: int | None = None
            ) -> Prediction:
    """Throughput, latency percentiles and time to first audio of `plan` under `workload`, on a
    machine with `cores` cores (default: the profiled machine's)."""
    return _Run(plan, profile, workload, cores or profile.cores).run()

