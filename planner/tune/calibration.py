"""Calibration of a measured profile: pure arithmetic on what profiling measured (no torch, no
processes), so it is tested on its own. `planner.app.profiling` measures; this scales."""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Mapping

from planner.plan import Plan
from planner.tune.profile import HandoffCost, StageProfile


def request_scales(cost: dict[str, list[float]], names: list[str]) -> tuple[float, ...]:
    """Each profiled request's total cost over the mean, sorted: how much requests differ in size
    (the model simulates a mix with these weights)."""
    totals = [sum(cost[n][i] for n in names) for i in range(len(cost[names[0]]))]
    mean = statistics.fmean(totals) or 1.0
    return tuple(sorted(round(t / mean, 4) for t in totals))


def calibrate_to_served(plan: Plan, stages: list[StageProfile], served_ms: Mapping[str, float],
               handoff: HandoffCost) -> list[StageProfile]:
    """The stages with their costs scaled to what they took served as `plan` places them: a
    stage served shares the caches and the cores with the launcher and the other stages, and
    runs a few percent slower than alone. Each kind of work keeps the proportions measured alone.

    Only a stage that ran by itself within its process is timed fairly: one that a streaming edge
    joins to another stage of its process, or one of parallel branches sharing a process, ran
    beside another stage of the same request and waited for its interpreter lock (which the model
    adds itself). Those get the factor of the others together; a factor far from 1 is not
    believed (a cost that depends on the input more than on how it runs)."""
    overlapping = plan.overlapping_stages()
    chunks = {s.name: s.chunks_out for s in stages}
    factors = {}
    for stage in stages:
        outgoing = [h for h in plan.handoffs if h.source == stage.name]
        # Called once per chunk it is handed over a streaming edge, once per request otherwise.
        calls = max([chunks.get(h.source, 1.0) for h in plan.handoffs
                     if h.target == stage.name and h.streaming] or [1.0])
        # what the model charges apart for handing the output on (the launcher's timing has it):
        # each crossing (a streaming one per chunk), or each result sent to the serving process
        emit = sum((stage.chunks_out if h.streaming else 1.0) * handoff.fixed_ms
                   + handoff.copy_ms(stage.out_bytes) for h in outgoing if h.crosses)
        emit += calls * handoff.fixed_ms if not outgoing else 0.0
        if stage.name in served_ms and stage.name not in overlapping and stage.busy_ms > 0:
            factor = (served_ms[stage.name] - emit) / stage.busy_ms
            if SERVED_FACTOR_RANGE[0] <= factor <= SERVED_FACTOR_RANGE[1]:
                factors[stage.name] = factor
    # The others get the factor of the calibrated work as a whole, if it is a fair share of all
    # the work: a tiny stage's factor says little about a big one.
    timed = sum(s.busy_ms for s in stages if s.name in factors)
    common = 1.0
    if timed >= COMMON_FACTOR_SHARE * sum(s.busy_ms for s in stages):
        common = sum(s.busy_ms * factors[s.name] for s in stages if s.name in factors) / timed
    return [dataclasses.replace(
        s, gil_ms=round(s.gil_ms * (f := factors.get(s.name, common)), 4),
        native_ms=round(s.native_ms * f, 4), device_ms=round(s.device_ms * f, 4))
        for s in stages]


SERVED_FACTOR_RANGE = (0.8, 1.5)
COMMON_FACTOR_SHARE = 0.25
