"""The placement question as a CP-SAT model, solved under assumptions.

Variables: one boolean per (stage, candidate process), exactly one per stage; per handoff a
"crosses" boolean; per (process, GPU) an "on" boolean and per GPU a "shared" boolean; fractions as
integers (millionths). Every user-visible rule instance is enforced by its own assumption literal
(`planner.rules.Rule`), so an infeasible request yields a core of named rules. Cores are shrunk to
minimal by deletion, reported, relaxed, and the search repeats until every independent conflict is
found. A second model with wider domains finds the nearest feasible placement for hints.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from ortools.sat.python import cp_model

from planner.errors import ConfigError, ConfigIssue
from planner.limits import SOLVER_TIME_LIMIT_S
from planner.problem import Problem, to_units
from planner.rules import REGISTRY, REQUEST, rank
from planner.rules.base import Rule

MAX_CORES = 32  # a request with more independent conflicts than this is cut short, and says so


def check_domains(problem: Problem) -> dict[str, tuple[str, ...]]:
    """Where each non-TP stage may go in the check model: its declared and its requested process."""
    return {s: tuple(dict.fromkeys((problem.baseline.process[s], problem.target[s])))
            for s in problem.baseline.process}


def hint_domains(problem: Problem) -> dict[str, tuple[str, ...]]:
    """Wider domains for hints: also the processes of the stage's neighbours, so that the nearest
    placement may move a partner along with a requested stage (or move the stage back)."""
    base = check_domains(problem)
    out: dict[str, list[str]] = {s: list(d) for s, d in base.items()}
    for u, v in problem.handoffs:
        if u in base and v in base:
            out[u].extend(base[v])
            out[v].extend(base[u])
    for group in problem.pipeline.fused_stages:
        union = [p for m in group for p in out[m]]
        for m in group:
            out[m].extend(union)
    return {s: tuple(dict.fromkeys(d)) for s, d in out.items()}


@dataclass
class Assignment:
    process: dict[str, str]  # non-TP stage -> process
    fraction_units: dict[str, int | None]  # GPU stage -> fraction, None when it has none
    alone_kept: set[str]


class PlacementModel:
    """The CP-SAT encoding of one Problem over given candidate domains."""

    def __init__(self, problem: Problem, domains: dict[str, tuple[str, ...]]):
        self.problem = problem
        self.domains = domains
        self.model = cp_model.CpModel()
        self.x: dict[tuple[str, str], cp_model.IntVar] = {}
        self.rules: list[Rule] = []
        self.lits: list[cp_model.IntVar] = []
        self._index_of: dict[int, int] = {}
        self.frac: dict[str, cp_model.LinearExprT] = {}
        self.has: dict[str, cp_model.IntVar | bool] = {}
        self.cross: dict[tuple[str, str], cp_model.IntVar] = {}
        self._build()

    # -- construction ---------------------------------------------------------------------------
    def literal(self, rule: Rule) -> cp_model.IntVar:
        """A new assumption literal enforcing one rule instance (or one request)."""
        lit = self.model.new_bool_var(f"{rule.kind}:{rule.stage or rule.edge or rule.gpu}")
        self._index_of[lit.index] = len(self.rules)
        self.rules.append(rule)
        self.lits.append(lit)
        return lit

    def _build(self) -> None:
        """The variables every rule shares; then each rule of the registry adds its literals."""
        m, p = self.model, self.problem
        by_process: dict[str, list[str]] = defaultdict(list)
        for s, dom in self.domains.items():
            vs = []
            for proc in dom:
                v = m.new_bool_var(f"x[{s},{proc}]")
                self.x[s, proc] = v
                vs.append(v)
                by_process[proc].append(s)
            m.add_exactly_one(vs)
        self.by_process = by_process

        # Requests: each its own literal, so a core names the flag that caused it.
        for r in p.requests:
            m.add_implication(self.literal(Rule(REQUEST, stage=r.stage, process=r.process)),
                              self.x[r.stage, r.process])

        # Handoffs that a request may newly split, and unsafe ones the declared topology splits
        # (a request may join those again).
        for e in p.splittable_edges + p.declared_unsafe_splits:
            u, v = e
            common = [proc for proc in self.domains[u] if proc in self.domains[v]]
            cross = m.new_bool_var(f"cross[{u},{v}]")
            both = []
            for proc in common:
                b = m.new_bool_var("")
                xu, xv = self.x[u, proc], self.x[v, proc]
                m.add_implication(b, xu)
                m.add_implication(b, xv)
                m.add_bool_or([b, ~xu, ~xv])
                both.append(b)
            m.add(cross + sum(both) == 1)
            self.cross[e] = cross

        # Fractions: declared values are constants; recommendations fill the others when their edge
        # newly crosses.
        recs = p.recommendations
        for s in p.pipeline.stages:
            if not s.on_gpu:
                continue
            if s.fraction is not None:
                self.frac[s.name] = to_units(s.fraction)
                self.has[s.name] = True
                continue
            by_value: dict[int, list] = defaultdict(list)
            for e, units in recs.get(s.name, ()):
                by_value[units].append(self.cross[e])
            if not by_value:
                self.frac[s.name] = 0
                self.has[s.name] = False
                continue
            rvs = []
            for units, crosses in sorted(by_value.items()):
                rv = m.new_bool_var(f"rec[{s.name},{units}]")
                m.add_max_equality(rv, crosses)
                rvs.append((units, rv))
            has = m.new_bool_var(f"has[{s.name}]")
            m.add_max_equality(has, [rv for _, rv in rvs])
            self.has[s.name] = has
            self.frac[s.name] = sum(units * rv for units, rv in rvs)

        # GPUs: which processes use each.
        self.on: dict[tuple[str, int], cp_model.IntVar] = {}
        self.processes_on: dict[int, dict[str, cp_model.IntVar]] = {}  # GPU -> process -> on
        for g in p.gpu_ids:
            candidates: dict[str, list] = defaultdict(list)
            for s in p.stages_on(g):
                for proc in self.domains.get(s, ()):
                    if p.copies_on(s, proc, g):
                        candidates[proc].append(self.x[s, proc])
            self.processes_on[g] = {}
            for proc, xs in candidates.items():
                on = m.new_bool_var(f"on[{proc},{g}]")
                m.add_max_equality(on, xs)
                self.on[proc, g] = self.processes_on[g][proc] = on

        for kind in REGISTRY:
            kind.encode(self)

    # -- solving --------------------------------------------------------------------------------
    def _solver(self) -> cp_model.CpSolver:
        solver = cp_model.CpSolver()
        solver.parameters.num_workers = 1
        solver.parameters.random_seed = 0
        solver.parameters.max_time_in_seconds = SOLVER_TIME_LIMIT_S
        # These models are tiny and solved many times (core shrinking): probing and symmetry
        # detection cost more than they save (measured: 1.9 s -> 0.7 s on 1,000 stages).
        solver.parameters.cp_model_probing_level = 0
        solver.parameters.symmetry_level = 0
        return solver

    def feasible(self, active: list[int], solver: cp_model.CpSolver | None = None) -> bool:
        self.model.clear_assumptions()
        self.model.add_assumptions([self.lits[i] for i in active])
        solver = solver or self._solver()
        status = solver.solve(self.model)
        if status == cp_model.UNKNOWN:
            raise ConfigError(ConfigIssue(
                "solver", "", f"CP-SAT found no answer within its limit of "
                f"{SOLVER_TIME_LIMIT_S:g} s on a placement model of {len(self.rules)} rule(s) "
                "(the pipeline is too large, or the machine too busy)",
                "hint: split the pipeline into smaller configs, or run again on a less busy "
                "machine"))
        ok = status in (cp_model.OPTIMAL, cp_model.FEASIBLE)
        # Keep the solver's (sufficient, not necessarily minimal) core of this very call.
        self._last_core = [] if ok else [
            self._index_of[i] for i in solver.sufficient_assumptions_for_infeasibility()
            if i in self._index_of]
        return ok

    def solve_one(self) -> Assignment | None:
        """Solve with every rule: the assignment, or None where a rule breaks, without finding
        which (what enumerating placements needs: most partitions it tries break a rule, and
        explaining each cost more than judging it)."""
        solver = self._solver()
        if self.feasible(list(range(len(self.rules))), solver):
            return self._assignment(solver)
        return None

    def solve_all(self) -> tuple[Assignment | None, list[list[Rule]], bool]:
        """Solve with every rule; on conflict return one minimal core per broken rule.

        Requests fix the topology, so a rule is either kept or broken by the request as a whole.
        One optimisation finds every broken rule; each is then explained by a minimal core: the
        rule plus the fewest requests that break it (no request: the declared config breaks it).
        Returns (assignment or None, cores, truncated).
        """
        solver = self._solver()
        requests = [i for i, r in enumerate(self.rules) if r.kind == REQUEST]
        rules = [i for i, r in enumerate(self.rules) if r.kind != REQUEST]
        if self.feasible(requests + rules, solver):
            return self._assignment(solver), [], False
        broken = sorted(self._broken(requests, rules, solver),
                        key=lambda i: (rank(self.rules[i]), i))
        cores = []
        for i in broken[:MAX_CORES]:
            if self.feasible(requests + [i], solver):
                raise AssertionError(f"rule {self.rules[i]} is not broken by the requests")
            cores.append([self.rules[j] for j in self._minimal_core(requests + [i], i, solver)])
        return None, cores, len(broken) > MAX_CORES

    def _broken(self, requests: list[int], rules: list[int], solver: cp_model.CpSolver) -> list[int]:
        """The rules the requested topology breaks: keep as many rule literals true as possible."""
        m = self.model
        m.clear_assumptions()
        m.add_assumptions([self.lits[i] for i in requests])
        m.maximize(sum(self.lits[i] for i in rules))
        try:
            status = solver.solve(m)
        finally:
            m.clear_objective()
        if status != cp_model.OPTIMAL:
            raise RuntimeError(f"CP-SAT could not evaluate the requested topology ({status})")
        return [i for i in rules if not solver.boolean_value(self.lits[i])]

    def _minimal_core(self, active: list[int], rule: int, solver: cp_model.CpSolver) -> list[int]:
        """Called right after `feasible(active)` returned False; `rule` is always in the core.

        The solver's core is sufficient at best (and not always right): it is re-verified, then
        shrunk by deletion until dropping any request makes the rule hold again."""
        core = sorted((set(self._last_core) & set(active)) | {rule})
        if self.feasible(core, solver):
            core = list(active)
        for i in [j for j in core if j != rule]:
            if i not in core:
                continue
            trial = [j for j in core if j != i]
            if not self.feasible(trial, solver):
                smaller = (set(self._last_core) & set(trial)) | {rule}
                core = sorted(smaller) if smaller != set(trial) and not self.feasible(
                    sorted(smaller), solver) else trial
        return core

    def _assignment(self, solver: cp_model.CpSolver) -> Assignment:
        process = {}
        for s, dom in self.domains.items():
            process[s] = next(proc for proc in dom if solver.boolean_value(self.x[s, proc]))
        fractions: dict[str, int | None] = {}
        for s, has in self.has.items():
            if has is True or (has is not False and solver.boolean_value(has)):
                fractions[s] = int(solver.value(self.frac[s])) if not isinstance(
                    self.frac[s], int) else self.frac[s]
            else:
                fractions[s] = None
        alone = {r.stage for r, lit in zip(self.rules, self.lits)
                 if r.kind == "alone" and solver.boolean_value(lit)}
        return Assignment(process=process, fraction_units=fractions, alone_kept=alone)

    # -- hints ----------------------------------------------------------------------------------
    def nearest(self, keep: frozenset[str] = frozenset()) -> Assignment | None:
        """The feasible placement closest to the request under the placement rules (fractions are
        fixed by YAML instead): fewest stages away from where they were asked to run, then fewest
        dropped isolations. Stages in `keep` must stay exactly where they were asked to run."""
        m, p = self.model, self.problem
        if not getattr(self, "_objective_set", False):
            cost = []
            hard = {k.kind for k in REGISTRY if k.placement_hard}
            for lit, rule in zip(self.lits, self.rules):
                if rule.kind in hard:
                    m.add_bool_or([lit])
                elif rule.kind == "alone":
                    cost.append(1 - lit)
            for s, target in p.target.items():
                xt = self.x.get((s, target))
                cost.append(2 * (1 - xt) if xt is not None else 2)
            m.minimize(sum(cost))
            self._objective_set = True
        m.clear_assumptions()
        m.add_assumptions([self.x[s, p.target[s]] for s in sorted(keep)])
        solver = self._solver()
        status = solver.solve(m)
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return None
        return self._assignment(solver)


class NearestPlacement:
    """Hint search over one wider-domain model, built on first use and reused per question."""

    def __init__(self, problem: Problem):
        self.problem = problem
        self._model: PlacementModel | None = None
        self._cache: dict[frozenset[str], Assignment | None] = {}

    def __call__(self, keep: frozenset[str] = frozenset()) -> Assignment | None:
        if keep not in self._cache:
            if self._model is None:
                self._model = PlacementModel(self.problem, hint_domains(self.problem))
            self._cache[keep] = self._model.nearest(keep)
        return self._cache[keep]
