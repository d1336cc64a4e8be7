"""Invariants over generated pipelines and requests (hypothesis):
the planner never crashes, agrees with the plain-Python oracle, every `ok` plan satisfies every rule,
and every reported core is minimal."""

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import planner
from planner.cards import load_pipeline
from planner.errors import ConfigError
from planner.problem import Problem
from planner.requests import options_from_flags
from planner.requests import parse_requests
from planner.solver import PlacementModel, check_domains
from planner.topology import declared_baseline
from tests.planner.oracle import judge

PROCS = ["p", "q", "r"]
FRACS = [None, None, 0.1, 0.25, 0.4, 0.6]


@st.composite
def pipelines(draw):
    n = draw(st.integers(2, 6))
    names = [f"s{i}" for i in range(n)]
    stages = []
    for i, name in enumerate(names):
        tp = draw(st.sampled_from([1, 1, 1, 1, 2])) if i not in (0,) else 1
        stage = {"name": name}
        if tp > 1:
            stage.update(tp_size=2, gpu=draw(st.sampled_from([[0, 1], [1, 0]])))
            if draw(st.booleans()):
                stage["process"] = draw(st.sampled_from(PROCS + ["t"]))
        else:
            stage["process"] = draw(st.sampled_from(PROCS))
            stage["gpu"] = draw(st.sampled_from([None, 0, 0, 1]))
        frac = draw(st.sampled_from(FRACS))
        if frac is not None and stage.get("gpu") is not None:
            stage["runtime"] = {"resources": {"total_gpu_memory_fraction": frac}}
        if i + 1 < n:
            targets = [names[i + 1]] + [t for t in names[i + 2:] if draw(st.integers(0, 4)) == 0]
            stage["next"] = targets
            if draw(st.booleans()):
                stage["stream_to"] = [names[i + 1]]
        stages.append(stage)
    edges = [(s["name"], t) for s in stages for t in s.get("next", [])]
    safe = [list(e) for e in edges if draw(st.booleans())]
    recs = []
    for e in edges:
        if draw(st.integers(0, 2)) == 0:
            who = draw(st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True))
            recs.append({"edge": list(e), "fractions": {w: draw(st.sampled_from([0.1, 0.2, 0.3]))
                                                        for w in who}})
    cfg = {"name": "gen", "stages": stages, "process_safe_edges": safe,
           "process_edge_resources": recs,
           "placement": {"require_memory_fraction_for_colocation": draw(st.booleans())}}
    if draw(st.integers(0, 3)) == 0:
        a, b = draw(st.sampled_from(names)), draw(st.sampled_from(names))
        if a != b:
            cfg["fused_stages"] = [[a, b]]
    return cfg


@st.composite
def requests(draw, names):
    isolate = draw(st.lists(st.sampled_from(names + ["zz"]), max_size=2))
    assign = draw(st.lists(
        st.builds(lambda s, p: f"{s}={p}", st.sampled_from(names),
                  st.sampled_from(PROCS + ["new", "s1", "t_tp0", "p_tp1"])), max_size=3))
    return isolate, assign


@st.composite
def valid_cases(draw):
    """A pipeline the config layer accepts, and requests against it."""
    cfg = draw(pipelines())
    try:
        pl = load_pipeline(config=cfg)
    except ConfigError:
        assume(False)
    isolate, assign = draw(requests(list(pl.stage_names)))
    return cfg, pl, isolate, assign


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_generated_requests(data):
    cfg = data.draw(pipelines())
    try:
        pl = load_pipeline(config=cfg)
    except ConfigError:
        r = planner.solve(config=cfg)
        assert r.status == "error" and r.diagnostics[0].code == "invalid-config"
        return
    isolate, assign = data.draw(requests(list(pl.stage_names)))
    r = planner.solve(config=cfg, isolate_stages=isolate, stage_processes=assign)
    v = judge(pl, isolate, assign)
    assert r.status == v.status, (r.to_dict()["diagnostics"], v.violations)
    assert r.to_dict()  # always serialisable
    if r.ok:
        got = {s.name: s.process for s in r.plan.stages if not s.is_tp}
        assert got == v.process
        for s in r.plan.stages:
            if s.gpus:
                expect = v.fraction[s.name]
                assert (s.fraction is None) == (expect is None)
                if expect is not None:
                    assert abs(s.fraction - expect) < 1e-9
        for g in r.plan.gpus:
            assert g.total <= g.limit + 1e-9
            if len(g.processes) >= 2 and pl.placement.require_memory_fraction_for_colocation:
                assert not g.missing_fraction
    elif r.status == "infeasible":
        assert {d.code for d in r.diagnostics} == v.codes
        for d in r.diagnostics:
            assert d.message and d.hint


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_cores_are_minimal(data):
    _, pl, isolate, assign = data.draw(valid_cases())
    base = declared_baseline(pl)
    parsed = parse_requests(pl, base, tuple(isolate), tuple(assign))
    problem = Problem(pl, base, parsed.requests, parsed.any_option)
    model = PlacementModel(problem, check_domains(problem))
    _, cores, truncated = model.solve_all()
    assert not truncated
    index = {id(r): i for i, r in enumerate(model.rules)}
    for core in cores:
        ids = [index[id(r)] for r in core]
        assert not model.feasible(ids)
        for drop in ids:
            assert model.feasible([i for i in ids if i != drop]), (core, model.rules[drop])


def _overlay(cfg, extra):
    """A complete config with a hint's YAML overlay applied (stage entries merged by name)."""
    out = {**cfg, "stages": [dict(s) for s in cfg["stages"]]}
    for entry in (extra or {}).get("stages", []):
        stage = next(s for s in out["stages"] if s["name"] == entry["name"])
        for k, v in entry.items():
            stage[k] = v
    return out


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_applying_a_hint_removes_its_diagnostic(data):
    cfg, _, isolate, assign = data.draw(valid_cases())
    r = planner.solve(config=cfg, isolate_stages=isolate, stage_processes=assign)
    if r.status != "infeasible":
        return
    for d in r.diagnostics:
        if d.fix is None:
            continue
        i, a = options_from_flags(d.fix.flags) if d.fix.flags is not None else (isolate, assign)
        again = planner.solve(config=_overlay(cfg, d.fix.config), isolate_stages=i,
                              stage_processes=a)
        assert (d.code, d.subject) not in {(x.code, x.subject) for x in again.diagnostics}, (
            d, again.diagnostics)
