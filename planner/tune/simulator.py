"""A small discrete-event engine of the machine a plan runs on: a pool of cores that the OS
time-shares in slices, interpreter locks handed over first come first served after a wake-up, and
threads doing pure-Python work (holding their process's lock, a switch interval at a time) and
native work (in calls, needing the lock back between calls).

Threads are generators that yield what they need next; `Simulator.step` drives them. Two shortcuts
keep a busy run's events few without changing what is simulated (a test checks them against
stepping every event): no event marks a time slice while nobody waits for a core, and threads that
convoy at a lock take their turns without events while nothing else is due.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import deque
from collections.abc import Callable, Generator

EPS = 1e-9  # times closer than this are the same moment


def os_slice_ms(cores: int) -> float:
    """How long a thread keeps a core while others wait for one: Linux's default base slice,
    0.75 ms scaled by 1 + log2 of the CPUs (at most 8), as the kernel scales it (1.5 ms on 2)."""
    return 0.75 * (1 + math.floor(math.log2(min(max(cores, 1), 8))))


class Resource:
    __slots__ = ("name", "free", "capacity", "queue", "busy", "since", "runners", "retakers",
                 "wake")

    def __init__(self, name: str, capacity: int = 1, wake: float = 0.0) -> None:
        self.name, self.capacity, self.free = name, capacity, capacity
        self.wake = wake  # from the hand-over to a waiting thread until it runs
        self.queue: deque[Generator | NativeWork | PythonWork] = deque()
        self.busy = 0.0  # server-milliseconds held
        self.since: list[float] = []
        # An interpreter lock only: its process's threads running native work (a dict, not a set:
        # the order they are told of a new holder must not depend on object addresses), and the
        # queued threads that want it only to make their next native call.
        self.runners: dict[NativeWork, None] = {}
        self.retakers: set[NativeWork] = set()


class NativeWork:
    """A thread's native work in progress: `left` ms of it, in calls of `call` ms, `into` ms into
    the current call; between calls it needs the lock of its process. `ran` ms of it since it
    last got a core: at an OS time slice it goes back to the end of the queue for cores, if
    anyone is in it. The engine drives it from the moment its thread starts it to its end (the
    thread, `gen`, is resumed then): a busy pipeline spends most of its events here."""

    __slots__ = ("at_boundary", "at_slice", "call", "gen", "into", "left", "lock", "preempted",
                 "ran", "since", "token")

    def __init__(self, lock: Resource, ms: float, call: float) -> None:
        self.lock, self.left, self.call, self.into = lock, ms, max(call, 1e-6), 0.0
        self.gen: Generator | None = None
        self.since = 0.0
        self.ran = 0.0
        self.token = 0  # bumped to void the event scheduled before
        self.at_boundary = False  # the event scheduled is a call boundary, not the end
        self.at_slice = False  # ... or the end of its time slice on the core
        self.preempted = False  # it gave up its core at a time slice, not at a boundary


class PythonWork:
    """A thread's pure-Python work in progress, then its native work (`then`): `left` ms of it
    still to take its process's lock for, in stretches of at most a switch interval (`part` ms
    left of the current one), each run on a core in OS slices (`run_for`: the current one; `ran`:
    ms on this core since it got it)."""

    __slots__ = ("gen", "left", "lock", "part", "ran", "run_for", "then")

    def __init__(self, lock: Resource, ms: float, then: NativeWork | None) -> None:
        self.lock, self.left, self.then = lock, ms, then
        self.gen: Generator | None = None
        self.part = self.run_for = self.ran = 0.0



class Simulator:
    def __init__(self, cores: Resource, slice_ms: float, switch_ms: float,
                 shortcuts: bool = True) -> None:
        self.cores, self.slice, self.switch = cores, slice_ms, switch_ms
        self.shortcuts = shortcuts  # off: every convoy turn as events (to test that it is alike)
        self.now = 0.0
        # Native work on a core now. While nobody waits for a core a time slice changes nothing
        # (the thread gets the next one on the same core), so no event marks it: when a thread
        # starts to wait, these are told, and their slices count from then on.
        self.running: dict[NativeWork, None] = {}
        self._heap: list = []
        self._seq = itertools.count()
        self.halted = False  # set by whatever ends the run
        # A thread that ended a piece of CPU work and goes straight on to the next one keeps its
        # core (thread, ms run on it): see `_carry_on`.
        self.kept: tuple[Generator, float] | None = None

    def at(self, delay: float, fn: Callable, *args) -> None:
        heapq.heappush(self._heap, (self.now + delay, next(self._seq), fn, args))

    def _release(self, res: Resource) -> None:
        res.busy += self.now - res.since.pop()
        if res.queue:
            self._hand_on(res)
        else:
            res.free += 1

    def _take_core(self, waiter: PythonWork | NativeWork) -> bool:
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
        more processes than cores (benchmarks/EVIDENCE.md, "The simulated thread keeps its core
        between pieces")."""
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
    # ("cpu", PythonWork): its Python work, holding its process's lock (first come first served,
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

    def _hand_on(self, res: Resource) -> None:
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
        if kind is PythonWork:
            self.at(res.wake, self._py_run if res is self.cores else self._py_locked, nxt)
        elif kind is not NativeWork:
            self.at(res.wake, self.step, nxt)
        elif nxt in res.retakers:
            res.retakers.discard(nxt)
            self.at(res.wake, self._passed_through, res, nxt)
        else:
            self.at(res.wake, self._on_core, nxt)

    def _passed_through(self, res: Resource, n: NativeWork) -> None:
        """`n` took the lock between two native calls and now drops it."""
        res.busy += self.now - res.since.pop()
        cores = self.cores
        if self.shortcuts and res.queue and not res.runners and not cores.queue and cores.free:
            if len(res.queue) == 1 and len(res.retakers) == 1:
                n = self._convoy_pair(res, n)
            n = self._convoy(res, n)
        self._hand_on(res)
        self._want_core(n)

    def _convoy_pair(self, res: Resource, n: NativeWork) -> NativeWork:
        """`_convoy` for the commonest convoy, two threads taking turns (an engine and its
        vocoder), on their state in local variables: the same arithmetic in the same order, the
        containers (the one retaker in the queue) and the threads written once at the end."""
        other = res.queue[0]
        if type(other) is not NativeWork or other not in res.retakers:
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
            to_boundary = call - into if call - into > EPS else call
            boundary, woken = t + to_boundary, t + wake
            if not (to_boundary < sx[0] - EPS and boundary < woken < limit):
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

    def _convoy(self, res: Resource, n: NativeWork) -> NativeWork:
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
            if type(nxt) is not NativeWork or nxt not in retakers:
                break
            call, into = n.call, n.into
            to_boundary = call - into if call - into > EPS else call
            boundary, woken = t + to_boundary, t + wake
            if not (to_boundary < n.left - EPS and boundary < woken < limit):
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
    def _python(self, p: PythonWork) -> None:
        """Take the lock for the next stretch; with none left, go on to the native work."""
        if p.left > EPS:
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

    def _py_locked(self, p: PythonWork) -> None:
        p.part = min(p.left, self.switch)
        p.left -= p.part
        self._py_core(p)

    def _py_core(self, p: PythonWork) -> None:
        """The next OS slice of the stretch (the OS may take the core away in between: the lock
        stays held), or, the stretch done, let go of the lock."""
        if p.part > EPS:
            if self._take_core(p):
                self._py_run(p)
        else:
            self._release(p.lock)
            self._python(p)

    def _py_run(self, p: PythonWork) -> None:
        p.run_for = min(p.part, max(self.slice - p.ran, EPS))
        self.at(p.run_for, self._py_ran, p)

    def _py_ran(self, p: PythonWork) -> None:
        p.part -= p.run_for
        p.ran += p.run_for
        if p.part > EPS:  # its time slice ended within the stretch
            if self.cores.queue:  # to the back of the queue for cores, the lock still held
                self._release(self.cores)
                self._py_core(p)
            else:  # nobody waits: a new slice on the same core
                p.ran = 0.0
                self._py_run(p)
            return
        self._carry_on(p.gen, p.ran, self._py_core, p)

    # -- native work against its process's lock -----------------------------------------------
    def _want_core(self, n: NativeWork) -> None:
        if self._take_core(n):
            self._on_core(n)

    def _on_core(self, n: NativeWork) -> None:
        n.since = self.now  # `ran`: set as it got the core (`_take_core`, `_hand_on`)
        n.lock.runners[n] = None
        self.running[n] = None
        self._schedule(n)

    def _advance(self, n: NativeWork) -> None:
        done = self.now - n.since
        n.since = self.now
        n.left = max(n.left - done, 0.0)
        n.into = (n.into + done) % n.call
        n.ran += done

    def _schedule(self, n: NativeWork) -> None:
        """Its next event: the end of its work, or, while the lock is held, the next call
        boundary (where it will have to wait) if that comes first."""
        n.token += 1
        to_boundary = n.call - n.into if n.call - n.into > EPS else n.call
        n.at_boundary = not n.lock.free and to_boundary < n.left - EPS
        until = to_boundary if n.at_boundary else n.left
        n.at_slice = False
        if self.cores.queue:
            n.ran %= self.slice  # the slices that ended while nobody waited went on on this core
            to_slice = max(self.slice - n.ran, EPS)
            n.at_slice = to_slice < until - EPS
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

    def _lock_taken(self, lock: Resource) -> None:
        """Someone took `lock` for Python: each native thread of its process will stop at its
        next call boundary unless the lock is free again by then (one already bound for a
        boundary keeps it: when that comes does not depend on who holds the lock)."""
        for n in lock.runners:
            if not n.at_boundary:
                self._advance(n)
                self._schedule(n)

    def _native_event(self, n: NativeWork, token: int) -> None:
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
        if n.left <= EPS:  # on to its next piece of work, on the same core if it needs one
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
