"""`planner.solve` on the built-in cards: the specification's worked examples, every single-stage
request on every card, and hints that really remove their diagnostic."""

import pytest

import planner
from planner.cards import all_cards, load_pipeline
from planner.flags import from_options
from tests.planner.oracle import judge


def apply_fix(fix, isolate=(), assign=()):
    """The requests of a command (`isolate`, `assign`) with a hint's fix applied, as
    `planner.solve` takes them."""
    return {"requests": fix.applied(from_options(isolate, assign))}


def groups(r):
    return [(g.name, list(g.stages)) for g in r.plan.groups]


def fractions(r):
    return {s.name: (s.fraction, s.fraction_source) for s in r.plan.stages if s.gpus}


def codes(r):
    return [d.code for d in r.diagnostics]


def with_fix(cfg, fix):
    """An overlay config with a hint's YAML applied: one entry per stage, the fix's fields win."""
    entries = {e["name"]: dict(e) for e in cfg["stages"]}
    for e in fix.config["stages"]:
        entries.setdefault(e["name"], {}).update(e)
    return {**cfg, "stages": list(entries.values())}


# -- the specification's worked examples ---------------------------------------------------------
def test_no_option_returns_the_declared_topology_unchanged():
    r = planner.solve("bosonai/higgs-tts-3-4b")
    assert r.status == "ok" and r.changed is False
    assert groups(r) == [("tts_frontend", ["preprocessing", "audio_encoder"]),
                         ("pipeline", ["tts_engine"]), ("vocoder", ["vocoder"])]
    assert r.plan.gpus[0].total == pytest.approx(0.98) and r.plan.gpus[0].limit == 1.0


def test_higgs_explicit_frontend_grouping_is_a_noop():
    r = planner.solve("bosonai/higgs-tts-3-4b",
                      stage_processes=["preprocessing=tts_frontend", "audio_encoder=tts_frontend"])
    assert r.status == "ok" and r.changed is False
    assert groups(r) == groups(planner.solve("higgs-tts"))
    assert fractions(r) == fractions(planner.solve("higgs-tts"))


def test_higgs_isolate_audio_encoder_separates_the_frontend():
    r = planner.solve("higgs-tts", isolate_stages=["audio_encoder"])
    assert r.status == "ok" and r.changed
    assert groups(r) == [("tts_frontend", ["preprocessing"]), ("audio_encoder", ["audio_encoder"]),
                         ("pipeline", ["tts_engine"]), ("vocoder", ["vocoder"])]
    assert r.plan.gpus[0].total == pytest.approx(0.98)


def test_higgs_isolate_vocoder_is_a_noop():
    r = planner.solve("higgs-tts", isolate_stages=["vocoder"])
    assert r.ok and not r.changed and groups(r) == groups(planner.solve("higgs-tts"))


def test_moss_local_isolate_vocoder_is_a_noop_at_exactly_the_limit():
    r = planner.solve("moss-tts-local", isolate_stages=["vocoder"])
    assert r.ok and not r.changed
    assert groups(r) == [("pipeline", ["preprocessing", "tts_engine"]), ("vocoder", ["vocoder"])]
    assert r.plan.gpus[0].total == pytest.approx(1.0)
    assert all(src == "declared" for _, src in fractions(r).values())


def test_stage_process_x_eq_x_on_a_lone_stage_renames_only():
    r = planner.solve("moss-tts-local", stage_processes=["vocoder=vocoder"])
    assert r.ok and not r.changed
    r = planner.solve("higgs-tts", stage_processes=["vocoder=decoder"])
    assert r.ok and r.changed
    assert groups(r)[-1] == ("decoder", ["vocoder"])
    assert fractions(r) == fractions(planner.solve("higgs-tts"))  # no new crossing, no new fraction


def test_ming_isolate_vocoder_role_applies_recommended_fractions():
    r = planner.solve("ming-omni-tts", isolate_stages=["vocoder"])
    assert r.ok and r.changed
    assert groups(r) == [("pipeline", ["preprocessing", "reference_encode", "tts_engine"]),
                         ("audio_decode", ["audio_decode"])]
    assert fractions(r) == {"reference_encode": (0.08, "recommended"),
                            "tts_engine": (0.72, "recommended"),
                            "audio_decode": (0.12, "recommended")}
    assert r.plan.gpus[0].total == pytest.approx(0.92)


def test_literal_stage_name_wins_over_role():
    # A role alias that shadows a stage name never redirects that stage.
    cfg = {"model": "ming-omni-tts", "roles": {"vocoder": "audio_decode", "tts_engine": "audio_decode"}}
    r = planner.solve(config=cfg, isolate_stages=["tts_engine"])
    assert r.status == "infeasible"
    assert {d.edge for d in r.diagnostics if d.code == "unsupported-handoff"} == {
        ("reference_encode", "tts_engine")}


def test_ming_tp2_declared_layout():
    r = planner.solve("ming-omni-tts", variant="tp2")
    assert r.ok
    assert groups(r) == [("preprocessing", ["preprocessing"]),
                         ("ming_tts_aux", ["reference_encode", "audio_decode"])]
    assert planner.result_dict(r)["tp_processes"] == {"tts_engine": ["tts_engine_tp0",
                                                                      "tts_engine_tp1"]}
    totals = {g.id: g.total for g in r.plan.gpus}
    assert totals == pytest.approx({0: 0.92, 1: 0.72})


def test_ming_tp2_isolating_audio_decode_is_not_checked_against_tp_edges():
    r = planner.solve("ming-omni-tts", variant="tp2", isolate_stages=["vocoder"])
    assert r.ok and ("audio_decode", ["audio_decode"]) in groups(r)


@pytest.mark.parametrize("card,variant,stage", [
    ("audar-tts", "default", "vocoder"), ("audar-tts", "default", "tts_engine"),
    ("audar-tts", "default", "reference_encoder"), ("zonos2", "default", "vocoder"),
    ("zonos2", "default", "preprocessing"), ("zonos2", "multi-gpu", "vocoder"),
])
def test_audar_and_zonos_gpu_splits_need_fractions(card, variant, stage):
    r = planner.solve(card, variant=variant, isolate_stages=[stage])
    assert r.status == "infeasible" and codes(r) == ["missing-fraction"]
    fix = r.diagnostics[0].fix
    fixed = planner.solve(card, variant=variant, config=fix.config, isolate_stages=[stage])
    assert fixed.ok, fixed.diagnostics


def test_audar_missing_list_and_cpu_split_needs_none():
    r = planner.solve("audar-tts", isolate_stages=["vocoder"])
    assert r.diagnostics[0].stages == ("reference_encoder", "tts_engine", "vocoder")
    assert planner.solve("audar-tts", isolate_stages=["preprocessing"]).ok
    z = planner.solve("zonos2", isolate_stages=["vocoder"])
    assert z.diagnostics[0].stages == ("preprocessing", "speaker_encode", "tts_engine", "vocoder")


def test_zonos_multi_gpu_pulling_a_gpu1_stage_into_pipeline_spans_gpus():
    r = planner.solve("zonos2", variant="multi-gpu", stage_processes=["vocoder=pipeline"])
    assert "spans-gpus" in codes(r)
    d = next(d for d in r.diagnostics if d.code == "spans-gpus")
    assert "pipeline" in d.message


@pytest.mark.parametrize("stage", ["preprocessing", "tts_engine", "vocoder"])
def test_moss_local_split_rejects_every_split(stage):
    r = planner.solve("moss-tts-local", variant="split", isolate_stages=[stage])
    assert r.status == "infeasible" and codes(r)[0] == "unsupported-handoff"


def test_unsupported_handoff_is_reported_before_missing_fraction():
    r = planner.solve("moss-tts-local", variant="split", isolate_stages=["vocoder"])
    assert codes(r) == ["unsupported-handoff", "missing-fraction"]


def test_declared_value_below_recommendation_warns_and_is_kept():
    cfg = {"model": "qwen3-tts", "stages": [
        {"name": "vocoder", "runtime": {"resources": {"total_gpu_memory_fraction": 0.05}}}]}
    r = planner.solve(config=cfg, isolate_stages=["vocoder"])
    assert r.ok
    assert fractions(r)["vocoder"] == (0.05, "declared")
    assert fractions(r)["tts_engine"] == (0.85, "recommended")
    [w] = r.warnings
    assert w.code == "fraction-below-recommendation"
    assert "vocoder" in w.message and "0.05" in w.message and "0.1" in w.message


def test_recommendations_only_with_a_placement_option():
    cfg = {"model": "qwen3-tts", "stages": [
        {"name": "vocoder", "process": "vocoder"}]}  # split in YAML, no option: nothing applied
    r = planner.solve(config=cfg)
    assert r.status == "infeasible" and codes(r) == ["missing-fraction"]


def test_conflicting_recommendations():
    cfg = {"name": "x", "stages": [
        {"name": "a", "process": "p", "gpu": 0, "next": "b"},
        {"name": "b", "process": "p", "gpu": 0, "next": "c"},
        {"name": "c", "process": "p", "gpu": 0}],
        "process_safe_edges": [["a", "b"], ["b", "c"]],
        "process_edge_resources": [
            {"edge": ["a", "b"], "fractions": {"a": 0.2, "b": 0.3}},
            {"edge": ["b", "c"], "fractions": {"b": 0.4, "c": 0.3}}]}
    r = planner.solve(config=cfg, isolate_stages=["b"])
    assert codes(r) == ["conflicting-recommendation"]
    assert r.diagnostics[0].stages == ("b",)
    assert planner.solve(config=cfg, **apply_fix(r.diagnostics[0].fix, ["b"])).ok


def test_over_limit_reports_total_and_limit_with_three_decimals():
    cfg = {"model": "higgs-tts", "stages": [
        {"name": "tts_engine", "runtime": {"resources": {"total_gpu_memory_fraction": 0.9}}}]}
    r = planner.solve(config=cfg)
    assert codes(r) == ["over-limit"]
    d = r.diagnostics[0]
    assert "over its memory limit by 0.030" in d.message
    assert any(b.endswith("together 1.030") for b in d.because)
    assert "placement.max_total_gpu_memory_fraction_per_gpu is 1.000" in d.because
    fixed = planner.solve(config=with_fix(cfg, r.diagnostics[0].fix))
    assert fixed.ok


def test_moss_delay_isolated_vocoder_lands_exactly_on_the_limit():
    r = planner.solve("moss-tts-delay", isolate_stages=["vocoder"])
    assert r.ok and r.plan.gpus[0].total == pytest.approx(1.0)


def test_isolation_conflict_and_its_hint():
    r = planner.solve("higgs-tts", isolate_stages=["vocoder"], stage_processes=["tts_engine=vocoder"])
    assert codes(r) == ["isolation-conflict"]
    d = r.diagnostics[0]
    assert "tts_engine" in d.message
    fixed = planner.solve("higgs-tts", **apply_fix(d.fix, ["vocoder"], ["tts_engine=vocoder"]))
    assert "isolation-conflict" not in codes(fixed)


def test_fused_stages_share_a_process_and_cannot_be_split():
    cfg = {"model": "qwen3-tts", "fused_stages": [["tts_engine", "vocoder"]],
           "stages": [{"name": "vocoder", "process": "decoder"}]}
    r = planner.solve(config=cfg)
    # Fusion takes tts_engine away from preprocessing: the config splits an unsafe handoff.
    assert codes(r) == ["unsupported-handoff"]
    assert r.diagnostics[0].edge == ("preprocessing", "tts_engine")
    assert any("fused_stages puts tts_engine" in b for b in r.diagnostics[0].because)
    fixed = planner.solve(config=with_fix(cfg, r.diagnostics[0].fix))
    assert groups(fixed) == [("fused_tts_engine_vocoder",
                              ["preprocessing", "tts_engine", "vocoder"])]
    cfg2 = {"model": "higgs-tts", "fused_stages": [["tts_engine", "vocoder"]],
            "stages": [{"name": "vocoder", "process": "pipeline"}]}
    r2 = planner.solve(config=cfg2, isolate_stages=["vocoder"])
    assert codes(r2) == ["isolation-conflict"]
    r3 = planner.solve(config=cfg2, stage_processes=["vocoder=elsewhere"])
    assert codes(r3) == ["process-name-conflict"]
    assert planner.solve(config=cfg2, **apply_fix(r3.diagnostics[0].fix, (),
                                                  ["vocoder=elsewhere"])).ok


def test_tp_stage_requests_and_rank_name_conflicts():
    r = planner.solve("ming-omni-tts", variant="tp2", isolate_stages=["tts_engine"])
    assert r.status == "error" and codes(r) == ["tp-stage"]
    r = planner.solve("ming-omni-tts", variant="tp2", stage_processes=["audio_decode=tts_engine_tp1"])
    assert codes(r)[0] == "process-name-conflict"


def test_a_group_given_a_tp_ranks_name_is_that_names_conflict_not_a_gpu_shared_with_it():
    """Processes are counted by name: `s0=t_tp0` puts s0 beside rank 0 of `s2` on GPU 1 under the
    rank's own name, one conflict; not also two processes sharing GPU 1 without fractions."""
    cfg = {"name": "gen", "stages": [
        {"name": "s0", "process": "p", "gpu": 1, "next": ["s1", "s2"]},
        {"name": "s1", "process": "p", "next": ["s2"]},
        {"name": "s2", "tp_size": 2, "gpu": [1, 0], "process": "t", "next": ["s3"]},
        {"name": "s3", "process": "p"}],
        "process_edge_resources": [{"edge": ["s0", "s1"], "fractions": {"s0": 0.1}}],
        "placement": {"require_memory_fraction_for_colocation": True}}
    r = planner.solve(config=cfg, stage_processes=["s0=t_tp0"])
    assert r.status == "infeasible"
    assert sorted(codes(r)) == ["process-name-conflict", "unsupported-handoff"]


def test_request_errors_in_order_with_exit_code_2():
    r = planner.solve("qwen3-tts", isolate_stages=["nope", "vocoder"],
                      stage_processes=["vocoder=x", "broken", "=x", "tts_engine="])
    assert r.exit_code == 2
    assert codes(r) == ["invalid-assignment"] * 3 + ["unknown-stage", "duplicate-assignment"]
    unknown = r.diagnostics[3]
    assert "'nope'" in unknown.message and "preprocessing, tts_engine, vocoder" in unknown.because[0]


def test_duplicate_through_role_and_literal():
    r = planner.solve("ming-omni-tts", isolate_stages=["vocoder"], stage_processes=["audio_decode=x"])
    assert codes(r) == ["duplicate-assignment"] and r.diagnostics[0].stages == ("audio_decode",)


def test_process_may_contain_equals():
    r = planner.solve("qwen3-tts", stage_processes=[" vocoder = a=b "])
    assert r.ok and groups(r)[-1] == ("a=b", ["vocoder"])


def test_invalid_config_is_a_diagnostic_not_an_exception():
    r = planner.solve(config={"name": "x", "stages": [{"name": "a"}]})
    assert r.status == "error" and codes(r) == ["invalid-config"] and r.exit_code == 2


def test_joining_stages_and_splitting_unconnected_stages_need_no_declaration():
    # Higgs: moving vocoder into pipeline joins; no recommendation, no check.
    r = planner.solve("higgs-tts", stage_processes=["vocoder=pipeline"])
    assert r.ok and groups(r)[-1] == ("pipeline", ["tts_engine", "vocoder"])


# -- every card, every single-stage request --------------------------------------------------------
def sweep():
    for card in all_cards():
        for variant in card.variants:
            p = load_pipeline(card.name, variant=variant)
            names = list(p.stage_names)
            for s in names:
                yield card.name, variant, (s,), ()
                yield card.name, variant, (), (f"{s}=solo",)
            for a, b in zip(names, names[1:]):
                yield card.name, variant, (), (f"{a}=grouped", f"{b}=grouped")
            yield card.name, variant, tuple(n for n in names if not p.stage(n).is_tp), ()
            for alias, _ in p.roles:
                yield card.name, variant, (alias,), ()


SWEEP = list(sweep())


@pytest.mark.parametrize("card,variant,isolate,assign", SWEEP)
def test_solver_agrees_with_the_oracle_and_hints_fix(card, variant, isolate, assign):
    pl = load_pipeline(card, variant=variant)
    r = planner.solve(card, variant=variant, isolate_stages=isolate, stage_processes=assign)
    v = judge(pl, isolate, assign)
    assert r.status == v.status, (planner.result_dict(r)["diagnostics"], v.violations)
    if r.ok:
        assert {s: p for s, p in v.process.items()} == {
            s.name: s.process for s in r.plan.stages if not s.is_tp}
        assert {s.name: s.fraction for s in r.plan.stages if s.gpus} == pytest.approx(v.fraction)
        return
    if r.status == "infeasible":
        assert set(codes(r)) == v.codes
    for d in r.diagnostics:
        assert d.hint, d
        for fix in d.fix.choices if d.fix is not None else ():
            again = planner.solve(card, variant=variant, config=fix.config,
                                  requests=fix.applied(from_options(isolate, assign)))
            assert (d.code, d.subject) not in {(x.code, x.subject) for x in again.diagnostics}, \
                (d, fix, again.diagnostics)


def test_generated_fused_name_avoids_taken_names():
    cfg = {"name": "x", "stages": [
        {"name": "a", "process": "p", "next": "b"},
        {"name": "b", "process": "q", "next": "c"},
        {"name": "c", "process": "fused_a_b"}],
        "process_safe_edges": [["a", "b"], ["b", "c"]], "fused_stages": [["a", "b"]]}
    r = planner.solve(config=cfg)
    assert r.ok and groups(r) == [("fused_a_b_2", ["a", "b"]), ("fused_a_b", ["c"])]


def test_fused_members_declaring_one_name_keep_it():
    cfg = {"model": "qwen3-tts", "fused_stages": [["tts_engine", "vocoder"]]}
    r = planner.solve(config=cfg)
    assert r.ok and groups(r) == [("pipeline", ["preprocessing", "tts_engine", "vocoder"])]


def test_two_tp_stages_with_the_same_rank_names():
    cfg = {"name": "x", "stages": [
        {"name": "a", "process": "eng", "gpu": [0, 1], "tp_size": 2, "next": "b",
         "runtime": {"resources": {"total_gpu_memory_fraction": 0.4}}},
        {"name": "b", "process": "eng", "gpu": [0, 1], "tp_size": 2,
         "runtime": {"resources": {"total_gpu_memory_fraction": 0.4}}}]}
    r = planner.solve(config=cfg)
    assert codes(r) == ["process-name-conflict", "process-name-conflict"]
    fixed = planner.solve(config={**cfg, "stages": [cfg["stages"][0], {**cfg["stages"][1],
                                                                        "process": "b"}]})
    assert fixed.ok and planner.result_dict(fixed)["tp_processes"] == {"a": ["eng_tp0", "eng_tp1"],
                                                             "b": ["b_tp0", "b_tp1"]}


def test_tp_ranks_count_as_processes_sharing_a_gpu():
    # Ming tp2 without fractions: GPU 1 holds only rank 1, GPU 0 holds rank 0 and ming_tts_aux.
    cfg = {"model": "ming-omni-tts", "variant": "tp2", "stages": [
        {"name": "reference_encode", "runtime": {"resources": {"total_gpu_memory_fraction": None}}}]}
    r = planner.solve(config=cfg)
    assert codes(r) == ["missing-fraction"] and r.diagnostics[0].gpu == 0
    assert r.diagnostics[0].stages == ("reference_encode",)


def test_request_errors_do_not_hide_placement_conflicts_of_valid_requests():
    r = planner.solve("qwen3-tts", isolate_stages=["nope", "preprocessing"])
    assert r.status == "error" and r.exit_code == 2
    assert codes(r) == ["unknown-stage", "unsupported-handoff"]
