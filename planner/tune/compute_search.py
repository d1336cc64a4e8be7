"""Compute for a placement: from one thread per stage and one copy per group, step by step give
the busiest stages (as the model's prediction names them) a thread count more that the profile
measured, or their process group a copy more, and keep the step the model predicts best while it
beats the last by more than a tie. Every step is solved by the planner, which refuses what does
not fit: the `over-cpus` rule (a stage's threads times its group's copies at most the node's
CPUs), GPU memory fractions for a copied GPU stage.

Bounded: at most MAX_STEPS steps per placement, each trying at most two moves for each of the
MAX_WIDENED_STAGES busiest stages; so at most 2 * MAX_WIDENED_STAGES * MAX_STEPS plans solved and
predicted per placement widened (`choose` widens the best few placements only). Threads only
where the profile measured a gain (`StageProfile.measured_threads`); copies only under a load of
several requests at once (a lone request uses one copy)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from planner.api import accepted_plan
from planner.pipeline import Pipeline
from planner.placements import FeasiblePlacement
from planner.plan import ComputeRequest, Copies, Plan, Threads
from planner.tune.parallel import predict_many
from planner.tune.profile import Profile
from planner.tune.workload import Prediction, Workload

MAX_WIDENED_STAGES = 2
MAX_STEPS = 6
THREAD_PREFIX = "stage thread "


@dataclass(frozen=True)
class Widened:
    """One compute step tried: the placement's requests plus compute requests, its plan, and
    the model's prediction under each workload."""

    placement: FeasiblePlacement
    predicted: tuple[Prediction, ...]


@dataclass(frozen=True)
class Search:
    tried: tuple[Widened, ...]  # every step the planner accepted, in the order tried
    refused: int  # steps the planner refused (mostly over-cpus)


def busiest_stages(plan: Plan, prediction: Prediction, n: int = MAX_WIDENED_STAGES) -> list[str]:
    """The `n` stages whose threads were busiest (all copies of one counted as the busiest of
    them), busiest first; tensor-parallel stages are left out (their ranks are not copied)."""
    busy: dict[str, float] = {}
    names = {s.name for s in plan.stages if not s.is_tp}
    for resource, share in prediction.utilization:
        if not resource.startswith(THREAD_PREFIX):
            continue
        stage = resource[len(THREAD_PREFIX):].split(" (copy ")[0]
        if stage in names and share > 0:
            busy[stage] = max(busy.get(stage, 0.0), share)
    order = [s.name for s in plan.stages]
    return sorted(busy, key=lambda s: (-busy[s], order.index(s)))[:n]


def compute_requests(plan: Plan, threads: dict[str, int], copies: dict[str, int]
                     ) -> tuple[ComputeRequest, ...]:
    """Requests for the threads and copies that differ from `plan`'s (what its card or config
    declares), in pipeline then group order."""
    return (tuple(Threads(s.name, threads[s.name]) for s in plan.stages
                  if threads.get(s.name, s.threads) != s.threads)
            + tuple(Copies(g.name, copies[g.name]) for g in plan.groups
                    if copies.get(g.name, g.copies) != g.copies))


def _moves(plan: Plan, prediction: Prediction, profile: Profile, threads: dict[str, int],
           copies: dict[str, int], concurrent: bool) -> list[tuple[dict[str, int], dict[str, int]]]:
    out = []
    for stage in busiest_stages(plan, prediction):
        more = [t for t in profile.stage(stage).measured_threads if t > threads[stage]]
        if more:
            out.append(({**threads, stage: min(more)}, copies))
        group = plan.stage(stage).process
        if concurrent and any(g.name == group for g in plan.groups):
            out.append((threads, {**copies, group: copies[group] + 1}))
    return out


def widen(pipeline: Pipeline, start: FeasiblePlacement, predicted: tuple[Prediction, ...],
          profile: Profile, workloads: Sequence[Workload],
          score: Callable[[tuple[Prediction, ...]], float], tie: float, cpus: int,
          cores: int | None = None) -> Search:
    """Climb from `start` (its declared threads and copies: one each unless its card or config
    says more; its `predicted` per workload): each step tries
    the moves of `_moves` from the current plan and goes on from the one `score` puts highest
    while that beats the current plan's score by more than `tie` (a share of it: closer, the
    model cannot tell them apart, and the plan with less compute is kept). Returns every
    accepted step with its predictions."""
    concurrent = any(w.concurrency != 1 for w in workloads)
    plan, preds = start.plan, predicted
    threads = {s.name: s.threads for s in plan.stages}
    copies = {g.name: g.copies for g in plan.groups}
    seen = {(tuple(sorted(threads.items())), tuple(sorted(copies.items())))}
    tried: list[Widened] = []
    refused = 0
    for _ in range(MAX_STEPS):
        accepted: list[tuple[FeasiblePlacement, dict[str, int], dict[str, int]]] = []
        for t, c in _moves(plan, preds[-1], profile, threads, copies, concurrent):
            key = (tuple(sorted(t.items())), tuple(sorted(c.items())))
            if key in seen:
                continue
            seen.add(key)
            requests = start.requests + compute_requests(start.plan, t, c)
            if (found := accepted_plan(pipeline, requests, cpus)) is not None:
                accepted.append((FeasiblePlacement(requests, found), t, c))
            else:
                refused += 1
        if not accepted:
            break
        step_preds = predict_many([f.plan for f, _, _ in accepted], profile, workloads, cores)
        tried += [Widened(f, p) for (f, _, _), p in zip(accepted, step_preds)]
        scores = [score(p) for p in step_preds]
        best = max(range(len(scores)), key=lambda i: (scores[i], -i))
        now = score(preds)
        if scores[best] <= now + abs(now) * tie:
            break
        (f, threads, copies), preds = accepted[best], step_preds[best]
        plan = f.plan
    return Search(tuple(tried), refused)
