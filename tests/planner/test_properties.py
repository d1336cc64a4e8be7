"""Invariants over generated pipelines and requests (hypothesis):
the planner never crashes, agrees with the plain-Python oracle, every `ok` plan satisfies every rule,
and every reported core is minimal."""

import json

import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import planner
from planner.cards import load_pipeline
from planner.config import CARD_KEYS, PIPELINE_KEYS, PLACEMENT_KEYS, STAGE_KEYS
from planner.errors import ConfigError
from planner.problem import Problem
from planner.render.dicts import result_json
from planner.flags import from_options
from planner.requests import parse_requests
from planner.solver import PlacementModel, check_domains
from planner.topology import declared_baseline
from tests.lanes import examples
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


@settings(max_examples=examples(150, 50), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
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
    assert r.status == v.status, (planner.result_dict(r)["diagnostics"], v.violations)
    assert planner.result_dict(r)  # always serialisable
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


@settings(max_examples=examples(60, 20), deadline=None)
@given(data=st.data())
def test_cores_are_minimal(data):
    _, pl, isolate, assign = data.draw(valid_cases())
    base = declared_baseline(pl)
    parsed = parse_requests(pl, base, from_options(isolate, assign))
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


@settings(max_examples=examples(100, 35), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_applying_a_hint_removes_its_diagnostic(data):
    cfg, _, isolate, assign = data.draw(valid_cases())
    r = planner.solve(config=cfg, isolate_stages=isolate, stage_processes=assign)
    if r.status != "infeasible":
        return
    for d in r.diagnostics:
        for fix in d.fix.choices if d.fix is not None else ():
            again = planner.solve(config=_overlay(cfg, fix.config),
                                  requests=fix.applied(from_options(isolate, assign)))
            assert (d.code, d.subject) not in {(x.code, x.subject) for x in again.diagnostics}, (
                d, fix, again.diagnostics)


# -- any config document: a result or one `invalid-config` paragraph, never an exception ----------
SCHEMA_KEYS = sorted({*PIPELINE_KEYS, *CARD_KEYS, *STAGE_KEYS, *PLACEMENT_KEYS, "resources",
                      "total_gpu_memory_fraction", "edge", "fractions", "reason"})
ODD_STRINGS = ["", " ", 'a"b', "c\\d", "e\nf", "[/x]", "{", "- x", "1e-1", "0.1", "5",
               "2001-13-01", "~", "null", "yes", "é", "\x00", "\t", "=", "a=b", "qwen3-tts",
               "vocoder", "tts_engine", "preprocessing", "pipeline", "default", "nosuch"]
# Hand-written documents that stress the YAML reader itself (tags, anchors, dates, duplicates).
ODD_DOCUMENTS = [
    "a: 2001-13-01\n", "a: !!float abc\n", "a: !!timestamp x\n", "a: !!binary 123\n",
    "a: !!python/name:os.system\n", "&a [*a]\n", "model: qwen3-tts\nstages: &s [*s]\n",
    "name: x\nroles: &r {a: *r}\nstages: [{name: a, process: p}]\n", "a: 1\na: 2\n",
    "? [a]\n: 1\n", "model: qwen3-tts\nstages: [\n", "\t- x\n", "%YAML 9.9\n---\na: 1\n",
    "--- a\n--- b\n", "base: &b {process: p}\nname: x\nstages: [{<<: *b, name: a}]\n",
]

keys = st.sampled_from(SCHEMA_KEYS) | st.sampled_from(ODD_STRINGS) | st.text(max_size=6) \
    | st.integers(-3, 3) | st.none() | st.booleans() | st.floats(allow_nan=False)
scalars = st.none() | st.booleans() | st.integers(-2, 2) | st.integers() \
    | st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(ODD_STRINGS) \
    | st.text(max_size=10) | st.sampled_from([0.1, 0.5, 1.0, 1.5, 0, -1])
yaml_values = st.recursive(
    scalars, lambda kids: st.lists(kids, max_size=4) | st.dictionaries(keys, kids, max_size=4),
    max_leaves=20)
top_levels = st.dictionaries(st.sampled_from(sorted(PIPELINE_KEYS)) | keys, yaml_values, max_size=6)


def _assert_result_or_one_paragraph(r):
    assert r.status in ("ok", "infeasible", "error")
    assert json.loads(result_json(r))  # always serialisable
    if r.status == "error":
        assert [d.code for d in r.diagnostics] == ["invalid-config"], r.diagnostics
        message = r.diagnostics[0].message
        assert message and "\n" not in message and "\r" not in message, message


@settings(max_examples=examples(200, 60), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(doc=st.one_of(top_levels, yaml_values, st.binary(max_size=40),
                     st.sampled_from(ODD_DOCUMENTS)))
def test_any_config_document_gives_a_result_or_one_paragraph(tmp_path, doc):
    path = tmp_path / "cfg.yaml"
    if isinstance(doc, bytes):
        path.write_bytes(doc)
    elif isinstance(doc, str) and doc in ODD_DOCUMENTS:
        path.write_text(doc, encoding="utf-8")
    else:
        path.write_text(yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8")
        if isinstance(doc, dict):
            _assert_result_or_one_paragraph(planner.solve(config=doc))
    _assert_result_or_one_paragraph(planner.solve(config=path))


CARD_STAGES = ["preprocessing", "tts_engine", "vocoder"]
FRACTIONS = [0.05, 0.1, 0.85, 1.0, "0.1", "1e-1", 0, 2, None, float("nan"), True]
# For each real key: values near the valid ones (so some overlays are accepted) or anything at all.
STAGE_VALUES = {
    "process": st.sampled_from(["pipeline", "vocoder", "a=b", "", " p ", 'a"b', 5, None]),
    "gpu": st.sampled_from([None, 0, 1, [0], [0, 1], [1, 1], -1, True, "0"]),
    "tp_size": st.sampled_from([1, 2, 0, "2", 1.5]),
    "next": st.sampled_from(CARD_STAGES + [[], ["vocoder", "vocoder"], "zz", None]),
    "stream_to": st.sampled_from([["vocoder"], "tts_engine", [1], None]),
    "wait_for": st.sampled_from([["preprocessing"], ["vocoder"], "zz", None]),
    "terminal": st.sampled_from([True, False, "yes", None]),
    "factory": st.sampled_from(["launcher.standins:vocoder", "nocolon", None, 3]),
    "args": st.sampled_from([{}, {"a": 1}, {1: "a"}, {None: 1}, None, [1]]),
    "runtime": st.sampled_from(FRACTIONS).map(
        lambda f: {"resources": {"total_gpu_memory_fraction": f}}),
}
PIPELINE_VALUES = {
    "roles": st.sampled_from([{"v": "vocoder"}, {"v": ["a", "b"]}, {"v w": "vocoder"}, {1: "x"}]),
    "fused_stages": st.sampled_from([[["tts_engine", "vocoder"]], [["vocoder", "vocoder"]],
                                     [["vocoder"]], [["zz", "vocoder"]]]),
    "process_safe_edges": st.sampled_from([[["tts_engine", "vocoder"]], [["vocoder", "zz"]],
                                           [["tts_engine", "vocoder"]] * 2, [[1, 2]]]),
    "process_edge_resources": st.sampled_from(FRACTIONS).map(lambda f: [
        {"edge": ["tts_engine", "vocoder"], "fractions": {"vocoder": f}}]),
    "placement": st.sampled_from(FRACTIONS).map(
        lambda f: {"max_total_gpu_memory_fraction_per_gpu": f}),
    "variant": st.sampled_from(["default"] * 4 + ["nosuch", 5]),
}


def mostly(plausible, other=yaml_values):
    """Three draws in four from `plausible`, the rest from `other`."""
    return st.integers(0, 3).flatmap(lambda i: plausible if i else other)


stage_entries = st.fixed_dictionaries(
    {"name": mostly(st.sampled_from(CARD_STAGES), st.sampled_from(ODD_STRINGS) | keys)},
    optional={**{k: mostly(v) for k, v in STAGE_VALUES.items()}, "colour": yaml_values})
overlays = st.fixed_dictionaries(
    {"model": st.just("qwen3-tts"),
     "stages": mostly(st.lists(stage_entries, max_size=3, unique_by=lambda e: repr(e["name"])),
                      st.lists(stage_entries, max_size=3))},
    optional={k: mostly(v) for k, v in PIPELINE_VALUES.items()})


@settings(max_examples=examples(200, 60), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(cfg=overlays)
def test_any_overlay_on_a_card_gives_a_result_or_one_paragraph(cfg):
    _assert_result_or_one_paragraph(planner.solve(config=cfg))
