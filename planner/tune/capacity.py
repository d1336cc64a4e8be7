"""A plan's capacity: the most requests per second the model predicts it completes, however long
it runs. A plan given requests faster than that is overloaded: its backlog grows for as long as it
serves, so its percentiles over any finite run say how long the run was, not how the plan serves.

How it is measured: a closed loop that keeps the plan full, its completions per second over the
loop's steady part (`Prediction.steady_rps`: warm-up, filling and drain left out), at a
concurrency that saturates the plan. Not from the open-loop run of the rate question itself:
that run drains its backlog before it ends, so its completions per second are about its
arrivals' whether it keeps up or not, and the backlog's growth between its halves is a few
hundred Poisson arrivals' worth of noise near the edge; both also change with the run's length.
The closed loop asks the plan the one thing stability depends on, at the rate it completes work
when it never waits for any, and does not depend on the rate asked (so replicas reuse it).
"""

from __future__ import annotations

from collections.abc import Sequence

from planner.plan import Plan
from planner.tune.parallel import predict_pairs
from planner.tune.profile import Profile
from planner.tune.workload import Workload

# Requests a capacity draw simulates: about 80 of them in its steady part, whose mean request
# size moves a percent or two from draw to draw (the band shows it); a closed loop costs about what
# an open loop of as many requests does, so this adds about a third of a finalist's banding.
CAPACITY_REQUESTS = 96
CAPACITY_WARMUP = 16


def saturating_concurrency(plan: Plan) -> int:
    """Requests in flight that keep every stage thread busy: one at each thread of each copy and
    one more waiting in its inbox, so that no thread, the busiest included, ever waits on the
    stage before it for work (with one each, the slowest idles while a request is upstream)."""
    threads = sum(plan.copies_of(s.name) for s in plan.stages)
    return 2 * max(1, threads)


def capacity_workload(plan: Plan, seed: int) -> Workload:
    """The closed loop whose `steady_rps` is `plan`'s capacity, for one draw of request sizes."""
    return Workload(concurrency=saturating_concurrency(plan), requests=CAPACITY_REQUESTS,
                    warmup=CAPACITY_WARMUP, seed=seed)


def capacities(plans: Sequence[Plan], profile: Profile, seeds: Sequence[int],
               cores: int | None = None) -> list[list[float]]:
    """Each plan's capacity in requests per second, one per seed (a draw of request sizes)."""
    pairs = [(p, capacity_workload(p, s)) for p in plans for s in seeds]
    found = predict_pairs(pairs, profile, cores)
    n = len(seeds)
    return [[p.steady_rps if p.steady_rps is not None else p.throughput_rps
             for p in found[i * n:(i + 1) * n]] for i in range(len(plans))]
