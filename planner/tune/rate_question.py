"""A rate question: at an open-loop rate, the cheapest plan predicted to meet first-audio (and
latency) targets, with the model's own uncertainty, and, when no plan on this machine meets
them, how many whole replicas would.

Cost is what a plan occupies: its CPUs (`Plan.cpu_demand`: each copy of a group as many as its
widest stage's threads), then its GPUs; plans of equal cost go by predicted TTFA p99.

Uncertainty: a prediction's percentiles come from one draw of Poisson arrivals and request sizes
(`RATE_REQUESTS` of them), and a p99 over a few hundred requests moves from draw to draw. So each
finalist (a plan whose one-draw prediction is within `NEAR` of every target, or below it) is
simulated again with `SEEDS` seeds, and every percentile is told as the median with the low-high
band over the seeds. A plan *meets* when the band's high end meets every target, is *marginal*
when the medians meet but some high end does not, and *misses* otherwise; only a plan that meets
is picked. The profile keeps each stage's mean cost (and each profiled request's total over the
mean, which the draws already sample), not per-sample stage times, so the band is the draws'
spread only, not the model's own error against a served run (docs/tune.md, "How good it is").

Stability: a finalist's capacity (`planner.tune.capacity`: the requests per second it completes
when kept full) is banded over the same seeds, and a plan whose median capacity is below the rate
is *overloaded*, whatever its percentiles: requests arrive faster than it completes them, so its
backlog grows for as long as it serves. Its TTFA over a run of a few hundred requests can still
look fine, since the launcher's fair order (`planner.fair_queue`) serves a new request's first
item before earlier requests' later chunks: first audio stays early while the open streams starve
(benchmarks/EVIDENCE.md, "Served on the real voice"). So a plan meets only when the band's low
capacity keeps up with the rate too (marginal when only the median does), an overloaded plan's percentiles
are its one draw's (banding them would only measure the run's length), and replicas are counted
so that each one's share of the rate is within its capacity.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from planner.tune.capacity import capacities
from planner.tune.choose import Candidate
from planner.tune.parallel import predict_pairs
from planner.tune.profile import Profile
from planner.tune.workload import Prediction, Workload

# Requests a rate question simulates per draw: a p99 needs a few hundred (as the open-loop runs
# that judge it serve).
RATE_REQUESTS = 300
# Draws per finalist: the band is their min-max.
SEEDS = 5
# Plans whose first draw is above a target by at most this share are banded too, to tell
# "marginal" from "misses". A plan above a target at its first draw cannot meet it (the band
# holds that draw), so banding only the plans at or below every target would find the same pick.
NEAR = 0.25
# Finalists banded at a time, cheapest first; more only while a cheaper-or-equal pick may exist.
BATCH = 6
MAX_REPLICAS = 8

Metric = Literal["ttfa", "latency"]
Verdict = Literal["meets", "marginal", "misses", "overloaded"]
# Every percentile a rate answer tells, banded: (metric, percentile).
SHOWN: tuple[tuple[Metric, int], ...] = (("ttfa", 50), ("ttfa", 90), ("ttfa", 99),
                                         ("latency", 50), ("latency", 99))


@dataclass(frozen=True)
class Target:
    """`metric`'s `percentile` at most `ms` milliseconds."""

    metric: Metric
    percentile: int
    ms: float

    @property
    def label(self) -> str:
        return f"{'TTFA' if self.metric == 'ttfa' else 'latency'} p{self.percentile}"

    @property
    def key(self) -> str:
        return f"{self.metric}_p{self.percentile}_ms"


def observed(p: Prediction, metric: Metric, percentile: int) -> float:
    """A prediction's percentile. A pipeline that does not stream sends its first audio with the
    whole response, so its time to first audio is its latency."""
    latency = {50: p.latency_p50_ms, 90: p.latency_p90_ms, 99: p.latency_p99_ms}[percentile]
    if metric == "ttfa":
        ttfa = {50: p.ttfa_p50_ms, 90: p.ttfa_p90_ms, 99: p.ttfa_p99_ms}[percentile]
        if ttfa is not None:
            return ttfa
    if latency is None:  # a Prediction made before latency p90 was kept
        raise ValueError(f"the prediction has no latency p{percentile}")
    return latency


@dataclass(frozen=True)
class Band:
    """One percentile over the draws: their median and their lowest and highest."""

    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Band:
        return cls(statistics.median(values), min(values), max(values))


@dataclass(frozen=True)
class Estimate:
    """A plan under `rate`: its cost, each shown percentile banded over `draws` draws (one:
    not a finalist, low = median = high), its capacity in requests per second over as many draws
    (None: not a finalist, not measured), and its verdict against the targets and the rate."""

    candidate: Candidate
    cpus: int
    gpus: int
    bands: tuple[tuple[str, Band], ...]  # (Target.key-style name, band), as SHOWN
    draws: int
    verdict: Verdict
    # The target it misses by the largest share (of the medians), and by how many ms; None: the
    # medians meet every target.
    worst: tuple[Target, float] | None
    # How far its medians are from meeting: the largest median over its target, or the rate over
    # its median capacity if larger (<= 1: they meet and it keeps up).
    closeness: float
    rate: float | None = None
    capacity: Band | None = None

    @property
    def overloaded(self) -> bool | None:
        """Requests arrive faster than it completes them (by the median); None: not measured."""
        if self.capacity is None or self.rate is None:
            return None
        return self.capacity.median < self.rate

    def band(self, metric: Metric, percentile: int) -> Band:
        return dict(self.bands)[f"{metric}_p{percentile}_ms"]


def estimate(c: Candidate, predictions: Sequence[Prediction], targets: Sequence[Target],
             rate: float | None = None, capacity: Band | None = None) -> Estimate:
    """`c` judged on its draws' `predictions` under `rate`, and on its `capacity` when measured:
    overloaded before anything else, since its percentiles then say how long the run was."""
    if any((t.metric, t.percentile) not in SHOWN for t in targets):
        raise ValueError(f"a rate question's targets are among {SHOWN}")
    bands = tuple((f"{m}_p{q}_ms", Band.of([observed(p, m, q) for p in predictions]))
                  for m, q in SHOWN)
    by = dict(bands)
    ratios = [(by[t.key].median / t.ms, t) for t in targets]
    worst_ratio, worst_target = max(ratios, key=lambda x: x[0])
    keeps_up = capacity is None or rate is None or capacity.low >= rate
    load = 0.0 if capacity is None or rate is None else rate / max(capacity.median, 1e-9)
    if load > 1.0:
        verdict: Verdict = "overloaded"
    elif all(by[t.key].high <= t.ms for t in targets) and keeps_up:
        verdict = "meets"
    elif worst_ratio <= 1.0:
        verdict = "marginal"
    else:
        verdict = "misses"
    worst = None if worst_ratio <= 1.0 else (
        worst_target, by[worst_target.key].median - worst_target.ms)
    return Estimate(c, c.plan.cpu_demand(), len(c.plan.gpus), bands,
                    len(predictions), verdict, worst, max(worst_ratio, load), rate, capacity)


def cost(e: Estimate) -> tuple[int, int]:
    return (e.cpus, e.gpus)


def _order(e: Estimate) -> tuple:
    """Cheapest first; equal cost by predicted TTFA p99, then by name (a fixed order)."""
    return (cost(e), e.band("ttfa", 99).median, e.candidate.name)


@dataclass(frozen=True)
class Replicas:
    """A plan split over whole replicas, each taking rate / count: the smallest count up to
    MAX_REPLICAS that meets (None: none does), and the plan's estimate at that count (or at the
    largest tried); `per_replica.candidate` is the plan replicated."""

    count: int | None
    per_replica: Estimate
    tried: int


@dataclass(frozen=True)
class RateAnswer:
    rate: float
    targets: tuple[Target, ...]
    streams: bool  # False: TTFA targets are held against latency (whole responses)
    cores: int  # of the machine predicted for: a replica takes a node of this size
    seeds: int  # draws per banded plan
    considered: int  # plans predicted
    finalists: tuple[Estimate, ...]  # banded, in cost order
    pick: Estimate | None  # the cheapest that meets
    runner_up: Estimate | None  # cheaper than the pick, closest to meeting
    closest: Estimate | None  # with no pick: the plan closest to meeting
    replicas: Replicas | None  # with no pick: how many whole replicas of `closest` would meet

    @property
    def met(self) -> bool:
        return self.pick is not None


def answer(candidates: Sequence[Candidate], profile: Profile, workload: Workload,
           targets: Sequence[Target], cores: int, seeds: int | None = None) -> RateAnswer:
    """The cheapest of `candidates` (each predicted once under `workload`, an open loop) whose
    band over `seeds` draws (default SEEDS) meets every target; see the module's docstring."""
    seeds = seeds or SEEDS
    if workload.rate is None:
        raise ValueError("a rate question is asked of an open loop (a rate)")
    targets = tuple(targets)
    rate = workload.rate
    # One draw, no capacity: only to choose the finalists, which are judged on both.
    once = sorted((estimate(c, c.predicted[:1], targets) for c in candidates), key=_order)
    streams = any(c.predicted[0].ttfa_p90_ms is not None for c in candidates)
    banded: dict[str, Estimate] = {}

    def band(chosen: Sequence[Estimate]) -> None:
        """Capacity first: an overloaded plan's percentiles say how long the run was, so they
        are not banded (its one draw is shown), which spares most of what its verdict costs."""
        todo = [e for e in chosen if e.candidate.name not in banded]
        draws = [replace(workload, seed=workload.seed + s) for s in range(seeds)]
        found = capacities([e.candidate.plan for e in todo], profile, [w.seed for w in draws],
                           cores)
        keeping = []
        for e, capacity in zip(todo, map(Band.of, found)):
            if capacity.median < rate:
                banded[e.candidate.name] = estimate(e.candidate, e.candidate.predicted[:1],
                                                    targets, rate, capacity)
            else:
                keeping.append((e, capacity))
        preds = predict_pairs([(e.candidate.plan, w) for e, _ in keeping for w in draws],
                              profile, cores)
        for i, (e, capacity) in enumerate(keeping):
            banded[e.candidate.name] = estimate(e.candidate, preds[i * seeds:(i + 1) * seeds],
                                                targets, rate, capacity)

    near = [e for e in once if e.closeness <= 1.0 + NEAR]
    pick: Estimate | None = None
    while near and (pick is None or cost(near[0]) <= cost(pick)):
        band(near[:BATCH])
        near = near[BATCH:]
        meeting = [e for e in banded.values() if e.verdict == "meets"]
        pick = min(meeting, key=_order) if meeting else None
    runner_up = closest = None
    replicas = None
    cheaper = [e for e in once if pick is None or cost(e) < cost(pick)]
    if cheaper:
        nearest = min(cheaper, key=lambda e: (e.closeness, _order(e)))
        band([nearest])
        best = banded[nearest.candidate.name]
        if pick is not None:
            runner_up = best
        else:
            closest = min(banded.values(), key=lambda e: (e.closeness, _order(e)))
            replicas = _fewest_replicas(list(banded.values()), closest, profile, workload,
                                        targets, cores, seeds)
    finalists = tuple(sorted(banded.values(), key=_order))
    return RateAnswer(workload.rate, targets, streams, cores, seeds, len(candidates), finalists,
                      pick, runner_up, closest, replicas)


def _least_replicas(e: Estimate, rate: float) -> int:
    """The fewest whole replicas whose shares of `rate` are each within `e`'s capacity (its
    band's low end); at least two (one is the plan itself, which did not meet)."""
    if e.capacity is None or e.capacity.low <= 0:
        return 2
    return min(MAX_REPLICAS, max(2, math.ceil(rate / e.capacity.low - 1e-9)))


def _fewest_replicas(finalists: Sequence[Estimate], closest: Estimate, profile: Profile,
                     workload: Workload, targets: tuple[Target, ...], cores: int,
                     seeds: int) -> Replicas:
    """Of every finalist, the fewest whole replicas predicted to meet, then the cheapest plan
    per replica: each replica takes a node of its own, so nodes are the larger cost, and the
    plan closest to meeting on one machine is not always the one that needs the fewest (a
    cheap plan that is merely overloaded can meet on two nodes as well as a dear one). Plans
    are tried from the fewest replicas their capacity allows and the cheapest, each up to two
    counts past that (or to MAX_REPLICAS for `closest`); none meeting: `closest`'s count."""
    assert workload.rate is not None
    rate = workload.rate
    best: Replicas | None = None
    # equal counts and costs: `closest` first (it is the one the answer names), then by order
    least = {id(e): _least_replicas(e, rate) for e in finalists}
    for e in sorted(finalists, key=lambda e: (least[id(e)], cost(e), e is not closest,
                                               _order(e))):
        start = least[id(e)]
        stop = MAX_REPLICAS if e is closest else min(MAX_REPLICAS, start + 2)
        if best is not None:
            assert best.count is not None
            # a count as small as the best's only for a cheaper plan
            stop = min(stop, best.count if cost(e) < cost(best.per_replica) else best.count - 1)
        if start > stop:
            continue
        found = _replicas(e, profile, workload, targets, cores, seeds, start, stop)
        if found.count is not None:
            best = found
    return best or _replicas(closest, profile, workload, targets, cores, seeds)


def _replicas(e: Estimate, profile: Profile, workload: Workload, targets: tuple[Target, ...],
              cores: int, seeds: int, start: int = 2, stop: int = MAX_REPLICAS) -> Replicas:
    """`e`'s plan at rate / k for k = 2 .. MAX_REPLICAS: a random split of Poisson arrivals over
    k replicas is k Poisson streams of rate / k (a router that takes turns evens them out, so
    this errs on the cautious side), each replica on a node of its own. A count whose share of
    the rate is beyond the plan's capacity (band's low end) cannot meet, and is not simulated:
    the capacity does not depend on the rate."""
    assert workload.rate is not None
    at = e
    for k in range(start, stop + 1):
        share = workload.rate / k
        if k < stop and e.capacity is not None and e.capacity.low < share:
            continue
        draws = [replace(workload, rate=share, seed=workload.seed + s) for s in range(seeds)]
        preds = predict_pairs([(e.candidate.plan, w) for w in draws], profile, cores)
        at = estimate(e.candidate, preds, targets, share, e.capacity)
        if at.verdict == "meets":
            return Replicas(k, at, k)
    return Replicas(None, at, stop)
