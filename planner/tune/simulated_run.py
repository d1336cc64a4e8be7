"""A plan's run under a workload, on the simulator: how the launcher executes it.

Every stage is one thread taking one item at a time; a handoff inside a process is a call, one
across processes costs interpreter time on both sides, a copy of its bytes and a little latency;
the serving process reads each request and encodes its audio; a streaming stage hands each chunk
on as it makes it (in at most MAX_PIECES pieces). One client's run is put together from one
request per size (the third shortcut, beside the simulator's two).

Compute, as the plan places it: a stage of N intra-op threads splits each piece of its native work
into N parts run at once (fork-join: its own thread runs one, re-taking the lock between calls as
before; N - 1 pool threads, which never need the lock, run the others), each as long as the
profile's native time at N threads (`StageProfile.native_speedup`), so the piece takes N cores
for that long and ends when the last part does: on fewer free cores the parts take turns and a
thread more gains nothing. A group of c copies runs c independent processes (a lock and a thread
per stage each); a request is bound when it arrives to the copy of each group with the fewest
requests in flight (ties to the lowest), for its whole life, as the launcher binds it. One thread
and one copy simulate exactly as they did before either existed.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Generator, Iterable
from dataclasses import dataclass, replace

from planner.fair_queue import FairQueue
from planner.plan import Plan
from planner.stats import percentile
from planner.tune.profile import Profile
from planner.tune.simulator import EPS, NativeWork, PythonWork, Resource, Simulator, os_slice_ms
from planner.tune.workload import Prediction, Workload

FRONTEND = "(serving process)"
CLIENT = "(load client)"
# Chunks beyond this many per request are simulated in groups (the first one always alone, so the
# time to first audio stays exact): it bounds the events per request.
MAX_PIECES = 8


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
    threads: int = 1  # intra-op threads
    speedup: float = 1.0  # its native work's wall time with `threads` over one thread's


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
                             preds[s.name], p.first_chunk_share, max(1, s.threads),
                             p.native_speedup(s.threads))
    return out


def _copy_key(name: str, k: int) -> str:
    """The thread of stage `name` in copy `k` of its process."""
    return f"{name} (copy {k})"


class _Join:
    """The parts of a piece of native work still running on pool threads, and the stage thread
    parked until they end."""

    __slots__ = ("left", "slot")

    def __init__(self, left: int) -> None:
        self.left = left
        self.slot: dict[int, Generator] = {}


@dataclass
class _Item:
    request: int
    share: float  # the fraction of a stage's per-request work this item carries (x its scale)
    whole: bool  # request-level (all of it), not a chunk
    recv_gil: float = 0.0  # interpreter time the receiving side pays (a cross-process handoff)


@dataclass
class _Run:
    """An item a stage thread has begun: the pieces of its output and how far it has got."""
    item: _Item
    pieces: list[float]  # fractions of the item's output handed on, piece by piece
    works: list[float]  # fractions of the item's work done before each piece
    whole_pieces: bool  # a whole request's input, streamed out in pieces
    cost: float  # the request's scale
    chunk: float  # one chunk, as a fraction of the request's output
    k: int = 0  # the next piece to work
    ahead: float | None = None  # a piece done, not yet handed on


class SimulatedRun:
    def __init__(self, plan: Plan, profile: Profile, workload: Workload, cores: int,
                 shortcuts: bool = True) -> None:
        self.p, self.w = profile, workload
        self.stages = _stages(plan, profile)
        group_copies = {g.name: g.copies for g in plan.groups}
        self.copies = {n: max(1, group_copies.get(s.process, 1)) for n, s in self.stages.items()}
        # Each stage's thread in each copy of its process (one copy: the stage's own name).
        self.units: dict[str, _Stage] = {}
        for n, s in self.stages.items():
            c = self.copies[n]
            for k in range(c):
                self.units[n if c == 1 else _copy_key(n, k)] = (
                    s if c == 1 else replace(s, process=f"{s.process}.{k}"))
        # A request's copy of each group of several: bound when it arrives, for its life.
        self.in_flight = {s.process: [0] * self.copies[n] for n, s in self.stages.items()
                          if self.copies[n] > 1}
        self.bound: dict[int, dict[str, int]] = {}
        self.switch = max(profile.switch_interval_ms, 0.01)
        self.cores = Resource("cores", max(1, cores))
        self.sim = Simulator(self.cores, os_slice_ms(cores), self.switch, shortcuts)
        # A thread handed its process's lock after waiting for it slept on it: until it runs,
        # the lock is held and unused. The profile's handoff latency is such a wake-up.
        wake = profile.handoff.latency_ms
        self.gil: dict[str, Resource] = {}
        self.gpu: dict[int, Resource] = {}
        on_device = profile.device == "cuda"
        for s in self.units.values():
            self.gil.setdefault(s.process, Resource(f"interpreter lock of {s.process}", 1, wake))
            if on_device:
                for g in s.gpus:
                    self.gpu.setdefault(g, Resource(f"GPU {g}"))
        self.gil[FRONTEND] = Resource(f"interpreter lock of the {FRONTEND}", 1, wake)
        self.gil[CLIENT] = Resource(f"interpreter lock of the {CLIENT}", 1, wake)
        # Intra-op pool threads run native code only: they never take an interpreter lock.
        self.pool = Resource("intra-op pool", 1, 0.0)
        self.inbox: dict[str, FairQueue] = {n: FairQueue() for n in self.units}
        self.taken: dict[tuple[str, int], float] = {}  # (thread, request) -> input done there
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
        for n in self.units:
            self._thread(n)

    # -- threads ----------------------------------------------------------------------------------
    def _thread(self, name: str) -> None:
        self.sim.step(self._stage_loop(name))

    def _work(self, proc: str, gil: float, native: float, device: float,
              gpus: Iterable[Resource] = (), call: float = float("inf"), threads: int = 1,
              speedup: float = 1.0) -> Generator:
        if threads > 1 and native > 0:
            yield from self._forked(proc, gil, native, call, threads, speedup)
        elif gil > EPS or native > 0:
            lock = self.gil[proc]
            then = NativeWork(lock, native, call) if native > 0 else None
            yield ("cpu", PythonWork(lock, gil, then))
        if device > 0:
            held = list(gpus)
            for g in held:
                yield ("get", g)
            yield ("hold", device)
            for g in reversed(held):
                yield ("put", g)

    def _forked(self, proc: str, gil: float, native: float, call: float, threads: int,
                speedup: float) -> Generator:
        """`native` ms of one thread's work on `threads` threads: its Python, then the native
        work in `threads` parts at once, each `native * speedup` long (this thread's part in calls
        `speedup` times shorter: as many re-takes of the lock), ending with the last part."""
        lock = self.gil[proc]
        if gil > EPS:
            yield ("cpu", PythonWork(lock, gil, None))
        each = native * speedup
        join = _Join(threads - 1)
        for _ in range(threads - 1):
            self.sim.at(0.0, self.sim.step, self._pool_part(each, join))
        yield ("cpu", PythonWork(lock, 0.0, NativeWork(lock, each, call * speedup)))
        if join.left:
            yield ("park", (join.slot, 0))

    def _pool_part(self, ms: float, join: _Join) -> Generator:
        yield ("cpu", PythonWork(self.pool, 0.0, NativeWork(self.pool, ms, float("inf"))))
        join.left -= 1
        if not join.left and join.slot:
            self.sim.at(0.0, self.sim.step, join.slot.pop(0))

    def _key(self, name: str, r: int) -> str:
        """The thread of stage `name` that request `r` is bound to."""
        if self.copies[name] == 1:
            return name
        return _copy_key(name, self.bound[r][self.stages[name].process])

    def _stage_loop(self, key: str) -> Generator:
        """A stage thread: it takes its work in the launcher's fair order (`FairQueue`: a
        request's first item first, then a turn each), and a stream it produces gives the others
        their turn after each piece it hands on."""
        s = self.units[key]
        gpus = [self.gpu[g] for g in s.gpus if g in self.gpu]
        box = self.inbox[key]
        streaming = any(st for _, st in s.succ)
        while True:
            while not box:
                yield ("park", (self.parked, key))
            r, entry = box.take()
            t0 = self.sim.now
            run = entry if isinstance(entry, _Run) else self._run_of(s, entry, streaming)
            yield from self._advance(s, gpus, run)
            if run.k < len(run.pieces):
                box.put_front(r, run)
            else:
                yield from self._emit(s, s.name, run.item, run.ahead, run.whole_pieces, True)
                self.taken[key, r] = self.taken.get((key, r), 0.0) + run.item.share
                if self.taken[key, r] >= 1.0 - 1e-6:  # its last input here is done
                    del self.taken[key, r]
                    box.finish(r)
            self.thread_busy[key] += self.sim.now - t0

    def _run_of(self, s: _Stage, item: _Item, streaming: bool) -> _Run:
        whole_pieces = item.whole and streaming and s.chunks_out > 1
        pieces = _pieces(s.chunks_out) if whole_pieces else [1.0]
        works = _work_fractions(pieces, s.first) if whole_pieces else pieces
        return _Run(item, pieces, works, whole_pieces, self.scale[item.request],
                    1.0 / max(1, round(s.chunks_out)))

    def _advance(self, s: _Stage, gpus: list[Resource], run: _Run) -> Generator:
        """Work `run` on: its first piece and into the second (the launcher holds a stream's
        first chunk until the next is known), then one piece a turn."""
        item = run.item
        while run.k < len(run.pieces):
            k = run.k
            share = item.share * run.pieces[k]  # of the request's output, handed on
            work = item.share * run.works[k] * run.cost  # of the stage's work, done before it
            # The launcher hands a streamed chunk on once the stage has produced the next
            # (it looks one ahead to mark the last): the piece before goes after this one's
            # first chunk.
            first = work if run.ahead is None else work * run.chunk / run.pieces[k]
            yield from self._work(s.process, s.gil * first + (item.recv_gil if k == 0 else 0),
                                  s.native * first, s.device * first, gpus, s.call,
                                  s.threads, s.speedup)
            handed = run.ahead is not None
            if handed:
                yield from self._emit(s, s.name, item, run.ahead, run.whole_pieces, False)
                rest = work - first
                yield from self._work(s.process, s.gil * rest, s.native * rest,
                                      s.device * rest, gpus, s.call, s.threads, s.speedup)
            run.ahead = share
            run.k += 1
            if handed and run.k < len(run.pieces):
                return  # a turn: the others' work goes before its next piece

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
        if self.stages[target].process == self.stages[s.name].process:  # the same copy of it
            self._deliver(target, item)
            return
        h = self.p.handoff
        yield from self._work(s.process, h.fixed_ms, h.copy_ms(nbytes), 0.0)
        item.recv_gil = h.fixed_ms
        self.sim.at(h.latency_ms, self._deliver, target, item)

    def _deliver(self, name: str, item: _Item) -> None:
        s = self.stages[name]
        unit = self._key(name, item.request)
        if item.whole and s.preds > 1:
            key = (name, item.request)
            self.joins[key] += 1
            if self.joins[key] < s.preds:
                return
            del self.joins[key]
        self.inbox[unit].put(item.request, item)
        gen = self.parked.pop(unit, None)
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
        if self.in_flight:
            bound = self.bound[r] = {}
            for group, load in self.in_flight.items():
                k = min(range(len(load)), key=lambda i: (load[i], i))
                load[k] += 1
                bound[group] = k
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
        for group, k in self.bound.get(r, {}).items():
            self.in_flight[group][k] -= 1
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
                    util: list[tuple[str, float]], steady: float | None = None) -> Prediction:
        util.sort(key=lambda x: -x[1])
        return Prediction(
            throughput_rps=n / span * 1000.0,
            latency_p50_ms=_percentile(lat, 50), latency_p99_ms=_percentile(lat, 99),
            ttfa_p90_ms=_percentile(ttfa, 90) if self.streams else None,
            utilization=tuple((name, round(u, 4)) for name, u in util),
            ttfa_p50_ms=_percentile(ttfa, 50) if self.streams else None,
            ttfa_p99_ms=_percentile(ttfa, 99) if self.streams else None,
            latency_p90_ms=_percentile(lat, 90),
            steady_rps=steady if steady is not None or self.w.concurrency is None
            else n / span * 1000.0)

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
        return self._prediction(len(measured), span, lat, ttfa, util, self._steady_rps())

    def _steady_rps(self) -> float | None:
        """A closed loop's completions per second from the loop being full (past its warm-up and
        its first `concurrency` ends) to the end that sent its last request (then it drains), over
        whole rounds of `concurrency` ends: in the fair order requests advance together and end
        in bunches, and a span from just after one bunch to just before another would miss one."""
        c = self.w.concurrency
        if c is None:
            return None
        ends = sorted(self.done.values())
        first = max(self.w.warmup, c)
        last = first + (len(ends) - c - 1 - first) // c * c
        if last <= first or ends[last] <= ends[first]:
            return None  # too short a run to have a steady part: its throughput stands in
        return (last - first) / (ends[last] - ends[first]) * 1000.0


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
    """`planner.stats.percentile`, the one the bench measures (NaN for a run that finished no
    request)."""
    p = percentile(values, q)
    return float("nan") if p is None else p
