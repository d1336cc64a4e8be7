"""An independent, plain-Python reading of the placement semantics, used to check the solver.

It applies the requests directly (no search) and lists every rule the requested topology breaks.
It shares only request parsing and the declared baseline with the planner.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from planner.pipeline import Pipeline
from planner.flags import from_options
from planner.requests import parse_requests
from planner.topology import declared_baseline, tp_rank_names


@dataclass
class Verdict:
    request_errors: set[str]
    violations: set[tuple] = field(default_factory=set)  # (code, subject)
    process: dict[str, str] = field(default_factory=dict)
    fraction: dict[str, float | None] = field(default_factory=dict)

    @property
    def codes(self) -> set[str]:
        return {v[0] for v in self.violations}

    @property
    def status(self) -> str:
        if self.request_errors:
            return "error"
        return "infeasible" if self.violations else "ok"


def judge(pl: Pipeline, isolate=(), assign=()) -> Verdict:
    base = declared_baseline(pl)
    parsed = parse_requests(pl, base, from_options(isolate, assign))
    v = Verdict(request_errors={d.code for d in parsed.diagnostics})
    tp = {s.name for s in pl.stages if s.is_tp}
    proc = dict(base.process)
    for r in parsed.requests:
        proc[r.stage] = r.process
    v.process = proc

    for group in pl.fused_stages:
        if len({proc[m] for m in group}) > 1:
            # Moving a fused member away is an isolation conflict when it was asked to run alone,
            # otherwise the request only names another process for part of the group.
            isolating = any(r.alone for r in parsed.requests if r.stage in group)
            v.violations.add(("isolation-conflict" if isolating else "process-name-conflict", group))
    for r in parsed.requests:
        if r.alone and any(t != r.stage and p == r.process for t, p in proc.items()):
            v.violations.add(("isolation-conflict", r.stage))

    newly = []
    for (a, b) in pl.handoffs():
        if a in tp or b in tp:
            continue
        if base.process[a] != base.process[b]:
            # A complete pipeline's own split is its baseline: not checked. An overlay or variant
            # that split it is checked like a request, unless a request joins them.
            if pl.over_card and proc[a] != proc[b] and (a, b) not in pl.process_safe_edges:
                v.violations.add(("unsupported-handoff", (a, b)))
            continue
        if proc[a] != proc[b]:
            newly.append((a, b))
            if (a, b) not in pl.process_safe_edges:
                v.violations.add(("unsupported-handoff", (a, b)))

    recs: dict[str, set[float]] = {}
    if parsed.any_option:
        for res in pl.edge_resources:
            if res.edge in newly:
                for s, val in res.fractions:
                    if pl.stage(s).on_gpu:
                        recs.setdefault(s, set()).add(val)
    for s, vals in recs.items():
        if len(vals) > 1:
            v.violations.add(("conflicting-recommendation", s))
    for s in pl.stages:
        if s.on_gpu:
            v.fraction[s.name] = s.fraction if s.fraction is not None else (
                min(recs[s.name]) if s.name in recs else None)

    ranks: dict[str, list[str]] = {}
    for s in tp:
        for n in tp_rank_names(pl, s):
            ranks.setdefault(n, []).append(s)
    for n, owners in ranks.items():
        if len(owners) > 1 or n in proc.values():
            v.violations.add(("process-name-conflict", n))

    gpus = sorted({g for s in pl.stages for g in s.gpus})
    for g in gpus:
        on = [s.name for s in pl.stages if g in s.gpus]
        total = sum(v.fraction[s] or 0 for s in on)
        if total > pl.placement.max_total_gpu_memory_fraction_per_gpu + 1e-9:
            v.violations.add(("over-limit", g))
        processes = {proc[s] for s in on if s not in tp} | {
            n for s in on if s in tp for n in [tp_rank_names(pl, s)[pl.stage(s).gpus.index(g)]]}
        if len(processes) >= 2 and pl.placement.require_memory_fraction_for_colocation:
            if any(v.fraction[s] is None for s in on):
                v.violations.add(("missing-fraction", g))
    for p in set(proc.values()):
        used = {pl.stage(s).gpus[0] for s, q in proc.items() if q == p and pl.stage(s).on_gpu}
        if len(used) > 1:
            v.violations.add(("spans-gpus", p))
    return v
