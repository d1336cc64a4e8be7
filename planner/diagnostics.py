"""Explain a minimal core of rules as a diagnostic: what collides, because of which request and
which model fact, and a hint (with a machine-applicable fix) that removes it."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

from planner.plan import Diagnostic, Fix
from planner.problem import SCALE, Problem, to_units
from planner.requests import assign_flag, isolate_flag
from planner.rules import RULES, Rule
from planner.solver import Assignment
from planner.topology import tp_rank_names


def _q(flags: tuple[str, ...]) -> str:
    return "`" + " ".join(flags) + "`"


def placement_flags(problem: Problem, a: Assignment) -> tuple[str, ...]:
    """The flags that produce assignment `a` from the declared topology."""
    flags = []
    for s in problem.pipeline.stage_names:
        if s not in a.process:
            continue
        r = problem.request_of.get(s)
        if r is not None and r.alone and s in a.alone_kept and a.process[s] == r.process:
            flags.append(isolate_flag(r.typed))
        elif a.process[s] != problem.baseline.process[s]:
            flags.append(assign_flag(s, a.process[s]))
    return tuple(flags)


def _placement_hint(problem: Problem, nearest: Assignment | None, what: str) -> tuple[str, Fix | None]:
    if nearest is None:
        return (f"no placement near this request avoids the conflict; {what}", None)
    flags = placement_flags(problem, nearest)
    if not flags:
        return (f"{what}: drop the placement flags (the declared topology is valid)", Fix(flags=()))
    return (f"{what}: run with {_q(flags)} instead", Fix(flags=flags))


def _yaml_fractions(values: dict[str, float]) -> tuple[str, dict]:
    lines = ["stages:"]
    overlay = {"stages": []}
    for s, v in values.items():
        lines.append(f"  - {{name: {s}, runtime: {{resources: {{total_gpu_memory_fraction: {v:g}}}}}}}")
        overlay["stages"].append(
            {"name": s, "runtime": {"resources": {"total_gpu_memory_fraction": v}}})
    return "\n".join(lines), overlay


def _config_hint(problem: Problem, yaml_text: str) -> str:
    """Where the YAML goes: the user's config, or a new overlay on the card they started from."""
    pl = problem.pipeline
    if pl.source.startswith("card "):
        return (f"put this in a YAML file and pass it with --config:\nmodel: {pl.name}\n"
                + (f"variant: {pl.variant}\n" if pl.variant != "default" else "") + yaml_text)
    return f"add to your --config YAML:\n{yaml_text}"


class Explainer:
    def __init__(self, problem: Problem, nearest: Callable[..., Assignment | None]):
        self.p = problem
        self._nearest = nearest

    @property
    def nearest(self) -> Assignment | None:
        return self._nearest()

    def _because_requests(self, core: list[Rule]) -> list[str]:
        out = []
        for rule in core:
            if rule.kind == "request":
                r = self.p.request_of[rule.stage]
                if r.noop:
                    continue
                where = f"its own process {r.process}" if r.alone else f"process {r.process}"
                alias = f" (role {r.typed} of {r.stage})" if r.typed != r.stage else ""
                out.append(f"`{r.flag}` puts {r.stage}{alias} in {where}")
        return out

    def explain(self, core: list[Rule]) -> Diagnostic:
        main = next(r for r in core if r.kind != "request")
        diagnostic = getattr(self, "_" + main.kind.replace("-", "_"))(main, core)
        return dataclasses.replace(diagnostic, rule=RULES[main.kind][1])

    # -- one method per rule kind ---------------------------------------------------------------
    def _unsafe(self, rule: Rule, core: list[Rule]) -> Diagnostic:
        if rule.edge in self.p.declared_unsafe_splits:
            return self._declared_unsafe(rule)
        u, v = rule.edge
        pl = self.p.pipeline
        reason = pl.unsupported_reason(rule.edge)
        because = self._because_requests(core)
        because.append(f"{pl.name} needs {u} -> {v} inside one process: {reason}")
        hint, fix = _placement_hint(self.p, self.nearest, f"keep {u} and {v} in one process")
        # When the nearest fix undoes a move, also show how to make that move with its partner.
        moved = frozenset(r.stage for r in core if r.kind == "request")
        nearest = self.nearest
        if moved and nearest is not None and any(
                nearest.process[s] != self.p.target[s] for s in moved):
            along = self._nearest(moved)
            if along is not None:
                names = ", ".join(sorted(moved))
                hint += (f"; or, to keep {names} where you asked, move the partner along: "
                         f"{_q(placement_flags(self.p, along))}")
        return Diagnostic(
            code="unsupported-handoff",
            message=f"the request splits {u} -> {v}, which {pl.name} does not support across "
                    f"processes",
            stages=(u, v), edge=rule.edge, because=tuple(because), hint=hint, fix=fix)

    def _declared_unsafe(self, rule: Rule) -> Diagnostic:
        """The config itself splits an unsafe handoff: blame the YAML line(s) that moved a stage,
        as a request would be blamed, and fix it in the config (or, for one run, with flags)."""
        u, v = rule.edge
        p = self.p
        pl, base = p.pipeline, p.baseline.process
        lines = {s: pl.process_line(s) for s in (u, v) if pl.process_line(s) is not None}
        because = [f"{line} puts {s} in process {base[s]}" for s, line in lines.items()]
        for s in (u, v):
            if s in lines:
                continue
            if s in p.baseline.fused_group:
                because.append(f"fused_stages puts {s} in process {base[s]} with "
                               f"{', '.join(m for m in p.baseline.fused_group[s] if m != s)}")
            else:
                because.append(f"{s} stays in process {base[s]} as {pl.source} declares")
        because.append(f"{pl.name} needs {u} -> {v} inside one process: "
                       f"{pl.unsupported_reason(rule.edge)}")
        sources = sorted({line.source for line in lines.values()}) or [pl.source]
        who = " and ".join(sources)
        message = f"{who} splits {u} -> {v}, which {pl.name} does not support across processes"
        # Prefer moving what a config line moved and keeping what the card placed.
        kept = frozenset(s for s in (u, v) if s not in lines and s not in p.request_of)
        nearest = (self._nearest(kept) if lines and kept else None) or self.nearest
        if nearest is None:
            return Diagnostic(code="unsupported-handoff", message=message, stages=(u, v),
                              edge=rule.edge, because=tuple(because),
                              hint=f"keep {u} and {v} in one process in {who}")
        # The fix persists that placement in the config; flags are then no longer needed.
        moves = {s: nearest.process[s] for s in pl.stage_names
                 if s in nearest.process and nearest.process[s] != base[s]}
        # A generated fused-group name exists only while its members disagree: joining it in YAML
        # means naming it for the members too.
        declared = {st.process for st in pl.stages}
        for group in pl.fused_stages:
            name = base[group[0]]
            if name in moves.values() and name not in declared:
                moves.update({m: name for m in group})
        entries = [{"name": s, "process": moves[s]} for s in pl.stage_names if s in moves]
        text = "stages:\n" + "\n".join(f"  - {{name: {e['name']}, process: {e['process']}}}"
                                        for e in entries)
        flags = placement_flags(p, nearest)
        hint = f"keep {u} and {v} in one process: set in {who}:\n{text}"
        if p.requests:
            hint += "\nand drop the placement flags"
        hint += f"\nor, for one run, use {_q(flags)}"
        return Diagnostic(code="unsupported-handoff", message=message, stages=(u, v),
                          edge=rule.edge, because=tuple(because), hint=hint,
                          fix=Fix(flags=(), config={"stages": entries}))

    def _no_conflict(self, rule: Rule, core: list[Rule]) -> Diagnostic:
        s = rule.stage
        recs = self.p.recommendations.get(s, [])
        listed = "; ".join(f"{u / SCALE:g} from {e[0]} -> {e[1]}" for e, u in recs)
        because = self._because_requests(core)
        because.append(f"{self.p.pipeline.name} recommends different fractions for {s} on the split "
                       f"handoffs: {listed}")
        hint, fix = _placement_hint(self.p, self.nearest,
                                    "split only one of those handoffs")
        return Diagnostic(
            code="conflicting-recommendation",
            message=f"stage {s} gets conflicting recommended fractions ({listed})",
            stages=(s,), because=tuple(because), hint=hint, fix=fix)

    def _limit(self, rule: Rule, core: list[Rule]) -> Diagnostic:
        g = rule.gpu
        pl = self.p.pipeline
        values = self._fractions_when_requested(g)
        total = sum(values.values())
        limit = self.p.limit_units
        excess = total - limit
        parts = ", ".join(f"{s} {u / SCALE:g}" for s, u in values.items())
        because = self._because_requests(core)
        because.append(f"the stages on GPU {g} take {parts}, together {total / SCALE:.3f}")
        because.append(f"placement.max_total_gpu_memory_fraction_per_gpu is {limit / SCALE:.3f}")
        # Shrink the largest fraction by the excess (rounded up to 0.001), or all proportionally.
        step = math.ceil(excess / 1000) * 1000
        biggest = max(values, key=lambda s: (values[s], s))
        if values[biggest] - step > 0:
            new = {biggest: (values[biggest] - step) / SCALE}
        else:
            scale = limit / total
            new = {s: math.floor(u * scale / 1000) / 1000 for s, u in values.items()}
        text, overlay = _yaml_fractions(new)
        return Diagnostic(
            code="over-limit",
            message=f"GPU {g} would be at {total / SCALE:.3f} of its memory, over the limit "
                    f"{limit / SCALE:.3f} by {excess / SCALE:.3f}",
            stages=tuple(sorted(values)), gpu=g, because=tuple(because),
            hint=f"shrink GPU {g} by at least {excess / SCALE:.3f}; " + _config_hint(self.p, text),
            fix=Fix(config=overlay))

    def _fractions_when_requested(self, gpu: int) -> dict[str, int]:
        """Fractions on a GPU as the request would set them (declared, else recommended)."""
        out = {}
        target = self.p.target
        for s in self.p.stages_on(gpu):
            spec = self.p.pipeline.stage(s)
            if spec.fraction is not None:
                out[s] = to_units(spec.fraction)
                continue
            for e, units in self.p.recommendations.get(s, []):
                if target[e[0]] != target[e[1]]:
                    out[s] = units
                    break
        return out

    def _one_gpu(self, rule: Rule, core: list[Rule]) -> Diagnostic:
        proc = rule.process
        members = [s for s, p in self.p.target.items() if p == proc]
        placed = ", ".join(f"{s} (GPU {self.p.pipeline.stage(s).gpus[0]})"
                           for s in members if self.p.pipeline.stage(s).on_gpu)
        gpus = sorted({self.p.pipeline.stage(s).gpus[0] for s in members
                       if self.p.pipeline.stage(s).on_gpu})
        because = self._because_requests(core)
        because.append(f"process {proc} would hold {placed}, and one process drives one GPU")
        hint, fix = _placement_hint(self.p, self.nearest,
                                    "keep the stages of each GPU in their own process")
        return Diagnostic(
            code="spans-gpus",
            message=f"process {proc} would span GPUs {', '.join(map(str, gpus))}",
            stages=tuple(sorted(members)), because=tuple(because), hint=hint, fix=fix)

    def _name(self, rule: Rule, core: list[Rule]) -> Diagnostic:
        proc = rule.process
        because = self._because_requests(core)
        because.append(f"{proc} is the process of rank {proc.rsplit('_tp', 1)[-1]} of "
                       f"tensor-parallel stage {rule.stage}")
        hint, fix = _placement_hint(self.p, self.nearest, "choose another process name")
        stages = tuple(sorted(r.stage for r in core if r.kind == "request"))
        return Diagnostic(
            code="process-name-conflict",
            message=f"process name {proc} is already taken by a tensor-parallel rank of {rule.stage}",
            stages=stages or (rule.stage,), because=tuple(because), hint=hint, fix=fix)

    def _tp_names(self, rule: Rule, core: list[Rule]) -> Diagnostic:
        owners = self.p.rank_names[rule.process]
        later = owners[-1]
        return Diagnostic(
            code="process-name-conflict",
            message=f"tensor-parallel stages {' and '.join(owners)} both name a rank process "
                    f"{rule.process}",
            stages=tuple(sorted(owners)),
            because=(f"TP rank processes are named <process>_tp<rank>, and {', '.join(owners)} "
                     f"share one process name",),
            hint=f"give {later} its own process name; " + _config_hint(
                self.p, f"stages:\n  - {{name: {later}, process: {later}}}"),
            fix=Fix(config={"stages": [{"name": later, "process": later}]}))

    def _fractions(self, rule: Rule, core: list[Rule]) -> Diagnostic:
        g = rule.gpu
        pl = self.p.pipeline
        target = self.p.target
        have = self._fractions_when_requested(g)
        missing = sorted(s for s in self.p.stages_on(g) if s not in have)
        on = self.p.stages_on(g)
        procs = sorted({target[s] for s in on if s in target}
                       | {tp_rank_names(pl, s)[pl.stage(s).gpus.index(g)]
                          for s in on if s in self.p.tp_stages})
        because = self._because_requests(core)
        if not because:
            because.append(f"the declared topology already runs {', '.join(procs)} on GPU {g}")
        because.append("placement.require_memory_fraction_for_colocation is true")
        if any(r.kind == "request" for r in core):
            because.append(f"{pl.name} recommends no fraction for {', '.join(missing)} on this "
                           f"split")
        # Proposed values: the card's own recommendation where it has one, else an even share of
        # what is left under the limit.
        known = {}
        for res in pl.edge_resources:
            for s, v in res.fractions:
                known.setdefault(s, v)
        proposal = {s: known[s] for s in missing if s in known}
        rest = [s for s in missing if s not in proposal]
        if rest:
            left = self.p.limit_units - sum(have.values()) - sum(to_units(v) for v in proposal.values())
            share = max(math.floor(left / len(rest) / 10_000) * 10_000, 10_000)
            proposal.update({s: share / SCALE for s in rest})
        text, overlay = _yaml_fractions({s: proposal[s] for s in missing})
        return Diagnostic(
            code="missing-fraction",
            message=f"GPU {g} is shared by processes {', '.join(procs)}, but "
                    f"{', '.join(missing)} declare{'s' if len(missing) == 1 else ''} no GPU memory "
                    f"fraction",
            stages=tuple(missing), gpu=g, because=tuple(because),
            hint="declare runtime.resources.total_gpu_memory_fraction for each (sized to your "
                 "models; these shares fit the limit); " + _config_hint(self.p, text),
            fix=Fix(config=overlay))

    def _alone(self, rule: Rule, core: list[Rule]) -> Diagnostic:
        s = rule.stage
        r = self.p.request_of[s]
        proc = r.process
        others = sorted({x.stage for x in core if x.kind == "request" and x.stage != s})
        fused = [x for x in core if x.kind == "fused"]
        if fused:
            others = sorted(set(others) | {m for f in fused for m in f.process.split(",") if m != s})
        if not others:
            others = sorted(t for t, p in self.p.target.items() if p == proc and t != s)
        because = self._because_requests(core)
        if fused:
            because.append(f"fused_stages binds {', '.join(fused[0].process.split(','))} into one "
                           f"process")
        hint, fix = _placement_hint(
            self.p, self.nearest,
            "--isolate-stage only makes singletons; group stages with --stage-process")
        return Diagnostic(
            code="isolation-conflict",
            message=f"`{r.flag}` asks {s} to run alone, but {', '.join(others)} would share "
                    f"process {proc}",
            stages=(s, *others), because=tuple(because), hint=hint, fix=fix)

    def _fused(self, rule: Rule, core: list[Rule]) -> Diagnostic:
        group = rule.process.split(",")
        moved = sorted(m for m in group if m in self.p.request_of)
        isolates = [s for s in moved if self.p.request_of[s].alone]
        code = "isolation-conflict" if isolates else "process-name-conflict"
        because = self._because_requests(core)
        because.append(f"fused_stages binds {', '.join(group)} into one process")
        hint, fix = _placement_hint(self.p, self.nearest, "move the fused stages together")
        partners = [m for m in group if m not in moved]
        return Diagnostic(
            code=code,
            message=f"{', '.join(moved) or group[0]} cannot leave fused partner"
                    f"{'s' if len(partners) > 1 else ''} {', '.join(partners)}",
            stages=tuple(sorted(group)), because=tuple(because), hint=hint, fix=fix)

