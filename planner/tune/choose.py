"""Rank the placements the planner accepts by what the model predicts for a workload, under the
operator's constraints, and say why the best one wins."""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Literal

from planner.placements import feasible_placements
from planner.pipeline import Pipeline
from planner.plan import Plan, Request
from planner.render.flags import flags
from planner.tune.model import Prediction, Workload
from planner.tune.parallel import predict_many
from planner.tune.profile import Profile

Objective = Literal["throughput", "latency", "ttfa"]


@dataclass(frozen=True)
class Candidate:
    requests: tuple[Request, ...]  # from the declared topology; () is the declared topology
    plan: Plan
    predicted: tuple[Prediction, ...]  # one per workload, in the order given
    memory_mib: float
    crowding_ms: float = 0.0  # see `crowding_ms`

    @property
    def processes(self) -> int:
        return self.plan.process_count()

    @property
    def name(self) -> str:
        return " ".join(flags(self.requests)) or "declared"

    @property
    def groups(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        return tuple((g.name, g.stages) for g in self.plan.groups)


@dataclass(frozen=True)
class Choice:
    workloads: tuple[Workload, ...]
    objective: Objective
    ranked: tuple[Candidate, ...]  # best first
    excluded: tuple[tuple[Candidate, str], ...]  # (candidate, why it was left out)
    declared: Candidate
    cores: int = 1  # of the machine predicted for

    @property
    def best(self) -> Candidate | None:
        return self.ranked[0] if self.ranked else None


def _geomean(values: list[float]) -> float:
    values = [max(v, 1e-9) for v in values]
    return math.exp(sum(math.log(v) for v in values) / len(values))


def score(c: Candidate, objective: Objective) -> float:
    """Higher is better, over every workload at once (geometric mean)."""
    return objective_score(objective, [p.throughput_rps for p in c.predicted],
                           [p.latency_p50_ms for p in c.predicted],
                           [p.ttfa_p90_ms for p in c.predicted])


def objective_score(objective: str, throughput_rps: Sequence[float],
                    latency_p50_ms: Sequence[float], ttfa_p90_ms: Sequence[float | None]) -> float:
    """The objective over a candidate's workloads (one value each, predicted or measured),
    higher is better."""
    if objective == "throughput":
        return _geomean(list(throughput_rps))
    if objective == "ttfa" and all(t is not None for t in ttfa_p90_ms):
        return -_geomean([t for t in ttfa_p90_ms if t is not None])
    return -_geomean(list(latency_p50_ms))  # latency; or ttfa without streaming: first byte


def memory_mib(plan: Plan, profile: Profile) -> float:
    """Each process's own footprint plus what its stages' construction added."""
    per_stage = {s.name: s.rss_mib for s in profile.stages}
    return round(plan.process_count() * profile.process_rss_mib
                 + sum(per_stage.get(s.name, 0.0) * max(1, s.tp_size) for s in plan.stages), 1)


def choose(pipeline: Pipeline, profile: Profile, workloads: tuple[Workload, ...],
           objective: Objective = "throughput", slo_p99_ms: float | None = None,
           max_processes: int | None = None, max_memory_mib: float | None = None,
           cores: int | None = None) -> Choice:
    candidates = []
    placements = feasible_placements(pipeline)
    predicted = predict_many([f.plan for f in placements], profile, workloads, cores)
    for f, preds in zip(placements, predicted):
        groups = [g.stages for g in f.plan.groups]
        # One request at a time, only stages of that request running at once can crowd.
        company = None if any(map(_several_in_flight, preds)) else f.plan.overlapping_stages()
        candidates.append(Candidate(f.requests, f.plan, preds, memory_mib(f.plan, profile),
                                    crowding_ms(groups, profile, company)))
    declared = next(c for c in candidates if not c.requests)
    kept, excluded = [], []
    for c in candidates:
        if max_processes is not None and c.processes > max_processes:
            excluded.append((c, f"{c.processes} processes > --max-processes {max_processes}"))
        elif max_memory_mib is not None and c.memory_mib > max_memory_mib:
            excluded.append((c, f"{c.memory_mib:.0f} MiB > {max_memory_mib:.0f} MiB"))
        elif slo_p99_ms is not None and any(p.latency_p99_ms > slo_p99_ms for p in c.predicted):
            worst = max(p.latency_p99_ms for p in c.predicted)
            excluded.append((c, f"p99 {worst:.0f} ms > --slo-p99-ms {slo_p99_ms:g}"))
        else:
            kept.append(c)
    machine_cores = cores or profile.cores
    order = rank([score(c, objective) for c in kept], [c.processes for c in kept],
                 [not c.requests for c in kept], [c.crowding_ms for c in kept], machine_cores)
    return Choice(workloads, objective, tuple(kept[i] for i in order), tuple(excluded), declared,
                  machine_cores)


# Predictions closer than this are ties: the model does not resolve them. On this project's
# 2-core machine the same placement measures up to 10% apart from run to run.
TIE = 0.03
# Stages beside the busiest one that do less than this share of its CPU work do not crowd it.
CROWDING_FLOOR = 0.10
# Company slows the busiest stage only if it re-takes the interpreter lock so often that a wake-up
# per re-take (the profile's handoff latency) would add up to this share of its CPU time. Measured
# on 2 vCPUs: company cost the busiest stage where that share was 13% (four-mixed of
# `tune_accuracy.py` at C=8: its terminal stage, 73 hashing calls per request, beside the other
# hashing stage measured 60-65 req/s against 65-73 beside a pure-Python one; the process of the
# two used one core, and the machine idled 22% of the time against 4%) and 77% (Qwen3-TTS's
# stand-ins, torch ops of 0.02 ms). Where it was 4.5% (device-bound: mostly a device wait),
# isolating the busiest stage measured 7% worse. Set between the two.
RETAKE_SHARE = 0.075


def _several_in_flight(p: Prediction) -> bool:
    """Whether requests overlap at this workload (Little's law: the rate times the time each
    spends inside): one client, or arrivals rarer than a request's latency, leave one at a time."""
    return p.throughput_rps * p.latency_p50_ms / 1000.0 >= 1.5


def crowding_ms(groups: Sequence[Sequence[str]], profile: Profile,
                company: Collection[str] | None = None) -> float:
    """Native work per request of the stages that share a process with the busiest stage (by
    CPU): work that, like the busiest stage's own, re-takes the interpreter lock between calls,
    so the two keep meeting at it. Pure-Python company is not counted: it holds the lock in long
    stretches, which the model shares out itself (on four-mixed at C=8 the busiest stage measured
    65-73 req/s beside a pure-Python stage and 60-65 beside a hashing one; on a pipeline whose
    encoder runs 2 ms of pure Python around a 15 ms device wait, counting it split the encoder
    off at x0.921 of the one process). 0 when that work is under `CROWDING_FLOOR` of the busiest
    stage's CPU, or the busiest stage re-takes the lock too rarely for company to slow it
    (`RETAKE_SHARE`: long native calls, or pure Python). `company`: the only stages that can run
    beside it, when not every stage can (one request at a time: `Plan.overlapping_stages`)."""
    cpu = {s.name: s.gil_ms + s.native_ms for s in profile.stages}
    if not cpu:
        return 0.0
    name = max(cpu, key=lambda s: cpu[s])
    busiest = profile.stage(name)
    retakes = busiest.native_ms / busiest.call_ms
    if retakes * profile.handoff.latency_ms < RETAKE_SHARE * cpu[name]:
        return 0.0
    if company is not None and name not in company:
        return 0.0
    native = {s.name: s.native_ms for s in profile.stages}
    for stages in groups:
        if name in stages:
            beside = sum(native.get(s, 0.0) for s in stages
                         if s != name and (company is None or s in company))
            return beside if beside >= CROWDING_FLOOR * cpu[name] else 0.0
    return 0.0


def rank(scores: Sequence[float], processes: Sequence[int], declared: Sequence[bool],
         crowding: Sequence[float], cores: int) -> list[int]:
    """Indices best first. Repeatedly: among the candidates left whose score is within `TIE` of
    the best one left (higher is better), the one that `tie_order` puts first.

    What the model misses decides a tie, and it misses two things that pull opposite ways, both
    measured on this project's machines:
    - Threads of one process that are busy at once wait for each other's interpreter lock far
      longer than the lock time the profile measured: a stage of short native calls (torch ops)
      re-takes the lock thousands of times per request, and each re-take it waits for wakes a
      thread on another core (`crowding_ms`). Qwen3-TTS's stand-ins with the vocoder beside the
      engine measured up to 18% below the isolated vocoder over nine runs on 2 cores (above it by
      more than 0.4% once, in a disturbed run), predicted equal; of nine placements of four-mixed
      predicted alike at C=8, the five that gave its busiest stage company measured 8-19% below
      the best, the four that did not 0-6%. So the placement that leaves the busiest stage the
      least company of the same kind (native calls; see `crowding_ms`) wins.
    - Switching the cores between processes costs what switching between threads of one process
      does not, and the model charges neither. With two processes or more per core the cores do
      little else: on 1 core Qwen3-TTS's isolated vocoder measured 7-8% below one process, though
      predicted equal. So placements with at least twice as many processes as cores come last.
      (Three processes on two cores do not: on native-device and four-mixed they measured at or
      within 3% of the best, where the model's own time-sharing of the cores predicts them.)
    Then fewer processes (less memory, fewer crossings), the declared topology (nothing to change),
    and the higher score."""
    left, out = list(range(len(scores))), []
    while left:
        top = max(scores[i] for i in left)
        near = [i for i in left if scores[i] >= top - abs(top) * TIE]
        pick = min(near, key=lambda i: tie_order(processes[i], declared[i], crowding[i], cores)
                   + (-scores[i], i))
        out.append(pick)
        left.remove(pick)
    return out


def tie_order(processes: int, declared: bool, crowding: float, cores: int) -> tuple:
    """The tie-break key, smaller first (see `rank`); `_tie_reason` words each position."""
    return (processes >= 2 * cores, crowding, processes, not declared)


def why(choice: Choice) -> str:
    """One line: which resource bounds the declared topology, and what the winner changes."""
    best, base = choice.best, choice.declared
    if best is None:
        return "no placement meets the constraints; relax --slo-p99-ms or --max-processes"
    rival = _rival(choice)
    i = len(choice.workloads) - 1  # the heaviest load given last decides the explanation
    w = choice.workloads[i]
    res, busy = base.predicted[i].bottleneck
    if best is base:
        return (f"the declared topology wins at {w.label}: its busiest resource is {res} "
                f"({busy:.0%}), and no split removes more than the handoffs it adds"
                f"{_tie_note(best, rival, choice.cores)}")
    gain = best.predicted[i].throughput_rps / max(base.predicted[i].throughput_rps, 1e-9)
    if rival is base:
        return (f"{best.name} wins at {w.label}, but not by the model's numbers: the declared "
                f"topology is predicted within {TIE:.0%} of it (x{gain:.2f} req/s), closer than "
                f"the model resolves, and {_tie_reason(best, base, choice.cores)}")
    bres, bbusy = best.predicted[i].bottleneck
    split = [f"{'+'.join(stages)}" for _, stages in best.groups]
    return (f"{best.name} wins at {w.label}: the declared topology is bound by {res} "
            f"({busy:.0%} busy); running {' | '.join(split)} lets their work overlap "
            f"(x{gain:.2f} req/s), and its busiest resource is {bres} ({bbusy:.0%})"
            f"{_tie_note(best, rival, choice.cores)}")


def _rival(choice: Choice) -> Candidate | None:
    """The placement the winner had to beat in a tie, if any: the declared topology when it was
    within the tie (an operator's first question is why not keep it), else the best predicted."""
    best = choice.best
    if best is None:
        return None
    scores = {id(c): score(c, choice.objective) for c in choice.ranked}
    mine = scores[id(best)]
    near = [c for c in choice.ranked
            if c is not best and abs(scores[id(c)] - mine) <= abs(mine) * TIE]
    if choice.declared in near:
        return choice.declared
    return max(near, key=lambda c: scores[id(c)], default=None)


def _tie_note(best: Candidate, rival: Candidate | None, cores: int) -> str:
    if rival is None:
        return ""
    return (f"; {rival.name} is predicted within {TIE:.0%} of it, closer than the model "
            f"resolves, and {_tie_reason(best, rival, cores)}")


def _tie_reason(best: Candidate, rival: Candidate, cores: int) -> str:
    """Why `best` won its tie with `rival`: the first key of `tie_order` that tells them apart,
    in words."""
    keys = [tie_order(c.processes, not c.requests, c.crowding_ms, cores) for c in (best, rival)]
    first = next((k for k, (a, b) in enumerate(zip(*keys)) if a != b), None)
    if first == 0:
        return (f"{rival.processes} processes on {cores} cores would keep switching the cores "
                "between processes (the model does not charge for that)")
    if first == 1:
        return (f"it leaves the busiest stage {best.crowding_ms:.0f} ms of other native work per "
                f"request in its process against {rival.crowding_ms:.0f}: a stage of short native "
                "calls waits for its neighbours' interpreter lock more than the model charges")
    if first == 2:
        one = "process" if best.processes == 1 else "processes"
        return f"it needs {best.processes} {one} against {rival.processes}"
    if first == 3:
        return "it is the declared topology: nothing to change"
    return "it is predicted a little higher"
