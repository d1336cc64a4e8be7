"""Rank the placements the planner accepts by what the model predicts for a workload, under the
operator's constraints, and say why the best one wins."""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Literal

from planner.api import accepted_plan
from planner.placements import FeasiblePlacement, feasible_placements
from planner.pipeline import Pipeline
from planner.plan import ComputeRequest, Copies, Pin, Plan, Request, Threads
from planner.flags import flags
from planner.tune.compute_search import widen
from planner.tune.model import Prediction, Workload
from planner.tune.parallel import predict_many
from planner.tune.pinning import pin_for
from planner.tune.profile import Profile

Objective = Literal["throughput", "latency", "ttfa"]

# The placements (best by the one-thread prediction first) that `choose(compute=True)` gives
# threads and copies: each costs up to compute_search's bound in solves and predictions.
WIDENED_PLACEMENTS = 3
# Predictions closer than this are ties: the same placement measures further apart than this from
# run to run on a small shared machine, so the model does not resolve them.
TIE = 0.03
# Predictions closer than this the model does not tell apart at all: its own noise (a profile's
# timings of one stage at one and at two threads, taken a second apart, differ by about as much).
RESOLUTION = 0.001
# Stages beside the busiest one that do less than this share of its CPU work do not crowd it.
CROWDING_FLOOR = 0.10
# Company slows the busiest stage only if it re-takes the interpreter lock so often that a wake-up
# per re-take (the profile's handoff latency) would add up to this share of its CPU time: between
# the share where company was measured to cost the busiest stage and the one where isolating it
# cost instead (benchmarks/EVIDENCE.md, "Ties: what the model knows it misses").
RETAKE_SHARE = 0.075


@dataclass(frozen=True)
class Candidate:
    # from the declared topology (placement, then compute); () is the declared topology
    requests: tuple[Request | ComputeRequest, ...]
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

    @property
    def extra_threads(self) -> int:
        """The threads it asks for beyond one per stage, every copy counted."""
        return sum((s.threads - 1) * self.plan.copies_of(s.name) for s in self.plan.stages)

    @property
    def compute(self) -> tuple[ComputeRequest, ...]:
        """Its threads, copies and CPU requests (none: one thread per stage, one copy per group,
        no pin)."""
        return tuple(r for r in self.requests if isinstance(r, (Threads, Copies, Pin)))

    def copies_of(self, group: str) -> int:
        """How many copies its plan runs of process group `group`."""
        return next((g.copies for g in self.plan.groups if g.name == group), 1)

    @property
    def moves_stages(self) -> bool:
        """Whether it places stages in other processes than declared, not only adds compute."""
        return len(self.compute) < len(self.requests)


@dataclass(frozen=True)
class Choice:
    workloads: tuple[Workload, ...]
    objective: Objective
    ranked: tuple[Candidate, ...]  # best first
    excluded: tuple[tuple[Candidate, str], ...]  # (candidate, why it was left out)
    declared: Candidate
    cores: int = 1  # of the machine predicted for
    slo_p99_ms: float | None = None
    refused: int = 0  # compute steps the planner refused (`planner.tune.compute_search`)

    @property
    def best(self) -> Candidate | None:
        return self.ranked[0] if self.ranked else None

    @property
    def headline(self) -> int:
        """The workload that "why" speaks of: the last given, the heaviest by convention."""
        return len(self.workloads) - 1


@dataclass(frozen=True)
class RankKey:
    """What `rank` orders a candidate by: its predicted score and what settles a tie."""

    score: float  # over every workload at once, higher is better (`score`)
    processes: int
    declared: bool  # the declared topology: it asks for nothing
    crowding_ms: float = 0.0  # native work beside its busiest stage (`crowding_ms`)
    name: str = ""  # its flags, for a fixed order among exact equals
    extra_threads: int = 0  # threads asked for beyond one per stage (`Candidate.extra_threads`)

    @classmethod
    def of(cls, c: Candidate, objective: Objective) -> RankKey:
        return cls(score(c, objective), c.processes, not c.requests, c.crowding_ms, c.name,
                   c.extra_threads)

    @property
    def exact_order(self) -> tuple[float, int, bool, str]:
        """The order among exact equals: higher score, fewer processes, declared, then by name."""
        return (-self.score, self.processes, not self.declared, self.name)


def _geomean(values: list[float]) -> float:
    values = [max(v, 1e-9) for v in values]
    return math.exp(sum(math.log(v) for v in values) / len(values))


def score(c: Candidate, objective: Objective) -> float:
    """Higher is better, over every workload at once (geometric mean)."""
    return objective_score(objective, [p.throughput_rps for p in c.predicted],
                           [p.latency_p50_ms for p in c.predicted],
                           [p.ttfa_p90_ms for p in c.predicted])


def gain(choice: Choice, c: Candidate, k: int | None = None) -> float:
    """`c`'s predicted requests per second over the declared topology's at workload `k`
    (default: `Choice.headline`)."""
    k = choice.headline if k is None else k
    return c.predicted[k].throughput_rps / max(choice.declared.predicted[k].throughput_rps, 1e-9)


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
                 + sum(per_stage.get(s.name, 0.0) * max(1, s.tp_size) * plan.copies_of(s.name)
                       for s in plan.stages), 1)


def choose(pipeline: Pipeline, profile: Profile, workloads: tuple[Workload, ...],
           objective: Objective = "throughput", slo_p99_ms: float | None = None,
           max_processes: int | None = None, max_memory_mib: float | None = None,
           cores: int | None = None, compute: bool = False,
           cpu_ids: Sequence[int] | None = None, pins: bool = True) -> Choice:
    """Rank every accepted placement (one thread per stage, one copy per group) and, with
    `compute`, the threads and copies `planner.tune.compute_search` steps to from the best
    WIDENED_PLACEMENTS of them, each solved for the machine's CPUs. Under a closed loop of several
    requests at once each plan but the declared one gets the pin `planner.tune.pinning` gives it
    (on `cpu_ids`, default 0 to the cores - 1; none without `pins`, as to replay runs measured
    without); the model predicts a plan alike with or without."""
    candidates = []
    placements = feasible_placements(pipeline)
    predicted = predict_many([f.plan for f in placements], profile, workloads, cores)
    machine_cores = cores or profile.cores
    # A pin names this machine's CPUs where they are the cores counted, else 0 to cores - 1.
    node = tuple(cpu_ids) if cpu_ids and len(cpu_ids) == machine_cores else machine_cores
    refused = 0
    if compute:
        def by_objective(preds: tuple[Prediction, ...]) -> float:
            return objective_score(objective, [p.throughput_rps for p in preds],
                                   [p.latency_p50_ms for p in preds],
                                   [p.ttfa_p90_ms for p in preds])
        top = sorted(range(len(placements)), key=lambda i: -by_objective(predicted[i]))
        widened: list[FeasiblePlacement] = []
        more: list[tuple[Prediction, ...]] = []
        for i in top[:WIDENED_PLACEMENTS]:
            found = widen(pipeline, placements[i], predicted[i], profile, workloads,
                          by_objective, TIE, machine_cores, cores)
            widened += [w.placement for w in found.tried]
            more += [w.predicted for w in found.tried]
            refused += found.refused
        placements, predicted = placements + widened, predicted + more
    for f, preds in zip(placements, predicted):
        groups = [g.stages for g in f.plan.groups]
        # One request at a time, only stages of that request running at once can crowd.
        company = None if any(map(_several_in_flight, preds)) else f.plan.overlapping_stages()
        requests, plan = f.requests, f.plan
        # Pins were measured on closed loops only (C=4); a rate question's first-audio tails
        # were judged unpinned, so its plans stay so.
        busy = [p for p, w in zip(preds, workloads)
                if w.concurrency is not None and _several_in_flight(p)]
        pin = (pin_for(plan, profile, busy, cpu_ids or range(machine_cores))
               if requests and pins else None)
        if pin is not None and (pinned := accepted_plan(pipeline, requests + (pin,),
                                                        node)) is not None:
            requests, plan = requests + (pin,), pinned
        candidates.append(Candidate(requests, plan, preds, memory_mib(plan, profile),
                                    crowding_ms(groups, profile, company)))
    declared = next(c for c in candidates if not c.requests)
    kept, excluded = [], []
    for c in candidates:
        if max_processes is not None and c.processes > max_processes:
            excluded.append((c, f"{c.processes} processes > --max-processes {max_processes}"))
        elif max_memory_mib is not None and c.memory_mib > max_memory_mib:
            excluded.append((c, f"{c.memory_mib:.0f} MiB > {max_memory_mib:.0f} MiB"))
        elif slo_p99_ms is not None and any(p.latency_p99_ms > slo_p99_ms for p in c.predicted):
            worst, k = max((p.latency_p99_ms, k) for k, p in enumerate(c.predicted))
            reason = f"p99 {worst:.0f} ms at {workloads[k].label} > --slo-p99-ms {slo_p99_ms:g}"
            excluded.append((c, reason))
        else:
            kept.append(c)
    order = rank([RankKey.of(c, objective) for c in kept], machine_cores)
    return Choice(workloads, objective, tuple(kept[i] for i in order), tuple(excluded), declared,
                  machine_cores, slo_p99_ms, refused)


def _several_in_flight(p: Prediction) -> bool:
    """Whether requests overlap at this workload (Little's law: the rate times the time each
    spends inside): one client, or arrivals rarer than a request's latency, leave one at a time."""
    return p.throughput_rps * p.latency_p50_ms / 1000.0 >= 1.5


def crowding_ms(groups: Sequence[Sequence[str]], profile: Profile,
                company: Collection[str] | None = None) -> float:
    """Native work per request of the stages that share a process with the busiest stage (by
    CPU): work that, like the busiest stage's own, re-takes the interpreter lock between calls,
    so the two keep meeting at it. Pure-Python company is not counted: it holds the lock in long
    stretches, which the model shares out itself. 0 when that work is under `CROWDING_FLOOR` of
    the busiest stage's CPU, or the busiest stage re-takes the lock too rarely for company to slow
    it (`RETAKE_SHARE`: long native calls, or pure Python). `company`: the only stages that can
    run beside it, when not every stage can (one request at a time: `Plan.overlapping_stages`).
    The cases behind each part: benchmarks/EVIDENCE.md, "Ties: what the model knows it misses"."""
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


def rank(keys: Sequence[RankKey], cores: int) -> list[int]:
    """Indices into `keys`, best first: by predicted score (higher is better), except where two are
    within `TIE` of each other and the model knows of something it does not charge that tells them
    apart (`tie_order`); `tie_note` says so next to the numbers. The same keys give the same order
    (exact equals: fewer processes, then the declared topology, then by name), whatever order they
    come in.

    Repeatedly: among the candidates left whose score is within `TIE` of the best one left, the one
    that `tie_order` puts first. What the model knows it misses:
    - Threads of one process that are busy at once wait for each other's interpreter lock far
      longer than the lock time the profile measured: a stage of short native calls (torch ops)
      re-takes the lock thousands of times per request, and each re-take it waits for wakes a
      thread on another core. So less native company beside the busiest stage comes first
      (`crowding_ms`).
    - On one core, switching it between processes costs what switching between threads of one
      process does not: there placements of more than one process come last in a tie. Not on
      more cores: there the kernel leaves a CPU idle beside a thread it queued on the other, and a
      plan with more processes has more runnable threads to fill those gaps.
    Nothing else settles a tie (giving it to fewer processes kept the busiest pure-Python stage
    beside another one where isolating it measured better). A tie that neither tells apart stays
    in predicted order and is said as a tie, with `--verify` to settle it.

    Among those the model predicts within `RESOLUTION` of each other (no difference at all, by its
    own noise), the one asking for the fewest threads comes first: a thread that gains nothing
    costs what the model does not charge, a pool's hand-offs for every call.

    The cases behind each rule: benchmarks/EVIDENCE.md, "Ties: what the model knows it misses"."""
    exact = {i: k.exact_order + (i,) for i, k in enumerate(keys)}
    ties = [tie_order(k.processes, k.crowding_ms, cores) for k in keys]
    left, out = sorted(range(len(keys)), key=exact.__getitem__), []
    while left:
        top = keys[left[0]].score
        near = [i for i in left if keys[i].score >= top - abs(top) * TIE]
        first = min(ties[i] for i in near)
        ahead = [i for i in near if ties[i] == first]
        best = max(keys[i].score for i in ahead)
        same = [i for i in ahead if keys[i].score >= best - abs(best) * RESOLUTION]
        pick = min(same, key=lambda i: (keys[i].extra_threads,) + exact[i])
        out.append(pick)
        left.remove(pick)
    return out


def tie_order(processes: int, crowding: float, cores: int) -> tuple:
    """The tie-break key, smaller first (see `rank`); `tie_break` names the position that
    differs."""
    return (cores == 1 and processes > 1, crowding)


# What puts one plan of a tie before another (`tie_break`), in the order `rank` weighs them.
TieBreak = Literal["one_core", "less_crowding", "predicted_higher", "fewer_threads",
                   "unresolved_lead", "fixed_order"]


def predicted_lead(first: Candidate, other: Candidate, objective: Objective) -> float:
    """How far `first` is predicted above `other`, as a share of `first`'s score (negative:
    below)."""
    mine = score(first, objective)
    return (mine - score(other, objective)) / max(abs(mine), 1e-9)


def tie_break(first: Candidate, other: Candidate, objective: Objective, cores: int) -> TieBreak:
    """What puts `first` before `other`, a plan of its tie that `rank` put after it: the key of
    `tie_order` that tells them apart; else a prediction higher by `RESOLUTION` or more; else
    fewer threads asked for; else a lead too small to resolve; else nothing but the fixed order of
    equal predictions. The screen's, the table's and tune.json's words all say this one answer."""
    mine = tie_order(first.processes, first.crowding_ms, cores)
    theirs = tie_order(other.processes, other.crowding_ms, cores)
    if mine[0] != theirs[0]:
        return "one_core"
    if mine[1] != theirs[1]:
        return "less_crowding"
    lead = predicted_lead(first, other, objective)
    if lead >= RESOLUTION:
        return "predicted_higher"
    if other.extra_threads > first.extra_threads:
        return "fewer_threads"
    return "unresolved_lead" if lead > 0 else "fixed_order"


def tied(choice: Choice, i: int = 0) -> tuple[int, ...]:
    """Indices into `choice.ranked` of the others predicted within `TIE` of the i-th."""
    s = [score(c, choice.objective) for c in choice.ranked]
    return tuple(j for j in range(len(s)) if j != i and abs(s[j] - s[i]) <= abs(s[i]) * TIE)


def tie_note(choice: Choice, i: int) -> str:
    """What the table says beside the i-th row: a tie with the rows near it, and why it is placed
    above a row predicted higher, if it is."""
    s = [score(c, choice.objective) for c in choice.ranked]
    above = [j for j in range(i + 1, len(s)) if s[j] > s[i]]
    if above:
        j = above[0]
        return f"tie; above #{j + 1}: {_short_reason(choice, i, j)}"
    near = tied(choice, i)
    if not near:
        return ""
    return "tie with " + ", ".join(f"#{j + 1}" for j in near)


def _short_reason(choice: Choice, i: int, j: int) -> str:
    """Why the i-th row is above the j-th, predicted higher, in a few words."""
    first, other = choice.ranked[i], choice.ranked[j]
    match tie_break(first, other, choice.objective, choice.cores):
        case "one_core":
            return f"{other.processes} procs on 1 core"
        case "less_crowding":
            return "less native work beside the busiest stage"
        case "fewer_threads":
            return "fewer threads, no gain resolved"
        case _:
            return "predicted equal"


def why(choice: Choice) -> str:
    """Which resource bounds the declared topology, what the winner changes, and, when others are
    predicted within `TIE` of the winner, that the model calls it a tie and how it was settled.
    tune.json's full account; the screen says the same in short (`planner.tune.answer.reasons`)."""
    best, base = choice.best, choice.declared
    if best is None:
        return unmet(choice)
    i = choice.headline
    w = choice.workloads[i]
    res, busy = base.predicted[i].bottleneck
    if best is base:
        return (f"the declared topology wins at {w.label}: the busiest resource of the declared "
                f"topology is {res} ({busy:.0%}), and no split removes more than the handoffs "
                f"the split adds{_tie_note(choice)}")
    bres, bbusy = best.predicted[i].bottleneck
    changes = []
    if best.moves_stages:
        split = [f"{'+'.join(stages)}" for _, stages in best.groups]
        changes.append(f"running {' | '.join(split)} lets their work overlap")
    for r in best.compute:
        match r:
            case Threads(stage=stage, count=n):
                changes.append(f"{n} threads share {stage}'s native work out over cores")
            case Copies(process=group, count=n):
                changes.append(f"{n} copies of {group} serve requests side by side")
            case Pin(process=group, cpus=cpus) if best.copies_of(group) > 1:
                changes.append(f"one copy of {group} on each of CPUs "
                               f"{','.join(map(str, cpus or ()))} lets its stages take turns "
                               "there and keeps the copies from trading CPUs")
            case Pin(process=group, cpus=cpus):
                changes.append(f"pinning {group} to CPU {','.join(map(str, cpus or ()))} keeps "
                               f"the lock hand-overs of {group} off the CPUs of other processes")
    return (f"`{best.name}` wins at {w.label}: the declared topology is bound by {res} "
            f"({busy:.0%} busy); {', '.join(changes)} (x{gain(choice, best, i):.2f} req/s), "
            f"and the busiest resource of `{best.name}` is {bres} ({bbusy:.0%})"
            f"{_tie_note(choice)}")


def unmet(choice: Choice) -> str:
    """Why nothing is ranked: the constraints that left every placement out; for an SLO, the load
    whose p99 broke it and the best p99 any placement reached there."""
    if not choice.excluded:
        return "no placement is accepted"
    slo = [(c, r) for c, r in choice.excluded if "--slo-p99-ms" in r]
    if choice.slo_p99_ms is not None and len(slo) == len(choice.excluded):
        # the placement whose worst p99 over the loads is lowest, and the load of that worst
        def worst(c: Candidate) -> tuple[float, int]:
            return max((p.latency_p99_ms, k) for k, p in enumerate(c.predicted))
        c = min((c for c, _ in slo), key=lambda c: (worst(c)[0], c.name))
        p99, k = worst(c)
        return (f"no placement meets --slo-p99-ms {choice.slo_p99_ms:g}: at {choice.workloads[k].label} the "
                f"best p99 reached is {p99:.0f} ms (`{c.name}`); hint: allow at least "
                f"--slo-p99-ms {math.ceil(p99)}, or predict a lighter load")
    return ("no placement meets the constraints (each is listed as excluded, with why); relax "
            "--slo-p99-ms, --max-processes or the memory limit")


def _tie_note(choice: Choice) -> str:
    """`; within 3% of it ... equal by the model; picked X because ...; --verify` or ''."""
    near = tied(choice)
    if not near:
        return ""
    best = choice.ranked[0]
    others = ", ".join(f"`{choice.ranked[j].name}`" for j in near)
    return (f". Within {TIE:.0%} of `{best.name}`: {others}, equal by the model; picked "
            f"`{best.name}` because {_tie_reason(choice, near)}; `planner tune --verify "
            f"{len(near) + 1}` serves them to settle the tie")


def _tie_reason(choice: Choice, near: Sequence[int]) -> str:
    """Why the pick (`choice.ranked[0]`) is first of its tie, against each of the others
    (`tie_break`), in words. Others put after it for the same reason share a clause."""
    best = choice.ranked[0]
    by: dict[TieBreak, list[Candidate]] = {}
    for j in near:
        c = choice.ranked[j]
        by.setdefault(tie_break(best, c, choice.objective, choice.cores), []).append(c)
    names = (lambda cs: ", ".join(f"`{c.name}`" for c in cs))
    out = []
    if switching := by.get("one_core"):
        out.append(f"{names(switching)} run{'s' if len(switching) == 1 else ''} more than one "
                   "process on the one core, which keeps switching it between processes (the "
                   "model does not charge for that)")
    if crowded := by.get("less_crowding"):
        out.append(f"`{best.name}` leaves the busiest stage {best.crowding_ms:.0f} ms of other "
                   f"native work per request beside that stage, against "
                   f"{', '.join(f'{c.crowding_ms:.0f}' for c in crowded)} ms in {names(crowded)}, "
                   "and a stage of short native calls waits for the interpreter lock of the "
                   "stages beside that stage more than the model charges")
    if lower := by.get("predicted_higher"):
        least = min(predicted_lead(best, c, choice.objective) for c in lower)
        out.append(f"`{best.name}` is predicted higher than {names(lower)}, by {least:.1%} or more")
    if threads := by.get("fewer_threads"):
        out.append(f"{names(threads)} {'asks' if len(threads) == 1 else 'ask'} for more threads "
                   f"than `{best.name}` and {'is' if len(threads) == 1 else 'are'} predicted "
                   f"within {RESOLUTION:.1%} of it, no gain the model resolves: a thread that "
                   "gains nothing still costs its hand-offs, which the model does not charge")
    if hair := by.get("unresolved_lead"):
        out.append(f"{names(hair)} {'is' if len(hair) == 1 else 'are'} predicted below "
                   f"`{best.name}` by less than {RESOLUTION:.1%}, a difference the model does not "
                   "resolve")
    if exact := by.get("fixed_order"):
        out.append(f"the model predicts {names(exact)} exactly the same as `{best.name}`, and a "
                   f"fixed order puts `{best.name}` first (fewer processes, then by name)")
    return "; ".join(out)
