"""Judging a rate question's answer by serving it (`planner tune --rate R --ttfa-p99-ms X
--verify K`): which plans to serve, and, from what serving them at the same open-loop rate
measured, each target met or missed beside its predicted band, and whether the pick meets and the
cheaper runner-up misses when served. Pure; `planner.app.tune_rate_verify` does the serving."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from planner.tune.rate_question import Band, Estimate, RateAnswer, Target

Role = Literal["pick", "cheaper", "closest", "finalist", "replica"]


def to_serve(a: RateAnswer, k: int) -> list[tuple[Role, Estimate]]:
    """The pick (with none: the plan closest to meeting), the cheaper runner-up the answer names,
    and up to `k` - 1 other finalists, cheapest first."""
    out: list[tuple[Role, Estimate]] = []
    if a.pick is not None:
        out.append(("pick", a.pick))
    elif a.closest is not None:
        out.append(("closest", a.closest))
    if a.runner_up is not None:
        out.append(("cheaper", a.runner_up))
    named = {e.candidate.name for _, e in out}
    others = [e for e in a.finalists if e.candidate.name not in named]
    out += [("finalist", e) for e in others[:max(k - 1, 0)]]
    return out


def replica_to_serve(a: RateAnswer) -> tuple[int, Estimate] | None:
    """With nothing meeting on one machine: the replicated plan the answer names and its count.
    One replica is served alone at its share of the rate (rate / count), which is what each of
    the count nodes would take: a random split of Poisson arrivals is Poisson at each node."""
    r = a.replicas
    if a.pick is not None or r is None or r.count is None:
        return None
    return r.count, r.per_replica


def measured_ms(run: Mapping[str, Any], target: Target) -> float | None:
    """`target`'s percentile as a served run measured it (`load_measures` keys), in ms; a
    response with no first-audio time (served whole) had its first audio at its end."""
    got = run.get(f"ttfa_p{target.percentile}_ms") if target.metric == "ttfa" else None
    return got if got is not None else run.get(f"latency_p{target.percentile}_ms")


@dataclass(frozen=True)
class Check:
    """One target of one served plan: its predicted band and what serving measured."""

    target: Target
    predicted: Band
    measured_ms: float | None  # None: not measured (the run failed, or no request succeeded)

    @property
    def met(self) -> bool | None:
        return None if self.measured_ms is None else self.measured_ms <= self.target.ms


@dataclass(frozen=True)
class Served:
    role: Role
    estimate: Estimate
    checks: tuple[Check, ...]
    requests: int  # measured
    errors: int  # requests that got no audio
    stalled_share: float | None  # streamed: the share whose playback ran dry
    # Of the CPUs' running time during the run, the share the hypervisor gave to other guests
    # (None: not known). The model gives the pipeline whole CPUs.
    stolen_of_running: float | None = None

    @property
    def meets(self) -> bool | None:
        """Every target met, with no failed request (a failed request got no first audio at
        all); None: not measured."""
        if any(c.met is None for c in self.checks) or not self.requests:
            return None
        return not self.errors and all(c.met for c in self.checks)


@dataclass(frozen=True)
class RateVerdict:
    rate: float
    stream: bool  # the requests served asked for streamed responses
    served: tuple[Served, ...]
    pick_meets: bool | None  # None: no pick, or it went unmeasured
    cheaper_misses: bool | None  # None: no cheaper runner-up, or it went unmeasured
    replicas: int | None = None  # nothing met: the replica count, one replica served alone

    @property
    def replica(self) -> Served | None:
        return next((s for s in self.served if s.role == "replica"), None)

    @property
    def replica_rate(self) -> float | None:
        return None if self.replicas is None else self.rate / self.replicas

    @property
    def recommended_meets(self) -> bool | None:
        """The plan the answer recommends meets when served: the pick, or with none, one of the
        replicas at its share of the rate."""
        if self.pick_meets is not None or self.replica is None:
            return self.pick_meets
        return self.replica.meets

    @property
    def confirmed(self) -> bool:
        """Serving agrees with the answer: the plan it recommends meets, and the cheaper plan (if
        any) misses."""
        return self.recommended_meets is True and self.cheaper_misses is not False


def _served(a: RateAnswer, role: Role, e: Estimate, run: Mapping[str, Any]) -> Served:
    checks = tuple(Check(t, e.band(t.metric, t.percentile),
                         measured_ms(run, t) if run.get("ok") else None) for t in a.targets)
    return Served(role, e, checks, int(run.get("requests") or 0), int(run.get("errors") or 0),
                  run.get("stalled_share"), run.get("cpu_stolen_of_running"))


def judge(a: RateAnswer, plans: list[tuple[Role, Estimate]],
          measured: Mapping[str, Mapping[str, Any] | None], stream: bool,
          replica: tuple[int, Estimate, Mapping[str, Any] | None] | None = None) -> RateVerdict:
    """Each served plan's targets, predicted beside measured (`measured`: by candidate name, a
    run's measures or None when it was not measured). `replica`: the count, the replicated
    plan's estimate at its share of the rate, and what one replica served at that share
    measured."""
    served = [_served(a, role, e, measured.get(e.candidate.name) or {}) for role, e in plans]
    if replica is not None:
        served.append(_served(a, "replica", replica[1], replica[2] or {}))
    by_role = {s.role: s for s in served}
    pick = by_role.get("pick")
    cheaper = by_role.get("cheaper")
    cheaper_meets = cheaper.meets if cheaper is not None else None
    return RateVerdict(a.rate, stream, tuple(served), pick.meets if pick is not None else None,
                       None if cheaper_meets is None else not cheaper_meets,
                       None if replica is None else replica[0])
