"""Which declared layouts are checked (specification, "Which edges are checked").

An overlay on a built-in card or a variant is a request against the card's declared topology: when it
splits a handoff the card does not declare process-safe it is `unsupported-handoff`, naming the YAML
line that did it, and its fix really removes it. A complete pipeline (`name:`) declares its own
topology, which is the baseline: its own splits are never errors, only a `declared-split` warning."""


import pytest
import yaml

import planner
from planner.cards import all_cards
from tests.cli import BOTH, run_planner
from tests.planner.test_solve import codes, groups, with_fix

QWEN_MOVE = {"model": "qwen3-tts", "stages": [{"name": "preprocessing", "process": "pre"}]}


@pytest.mark.parametrize("card,variant", [(c.name, v) for c in all_cards() for v in c.variants])
def test_every_built_in_declared_topology_is_valid(card, variant):
    r = planner.solve(card, variant=variant)
    assert r.ok, [d.message for d in r.diagnostics]


def test_an_overlay_moving_a_stage_is_checked_like_the_flag():
    r = planner.solve(config=QWEN_MOVE)
    flag = planner.solve("qwen3-tts", stage_processes=["preprocessing=pre"])
    assert codes(r) == codes(flag) == ["unsupported-handoff"]
    d = r.diagnostics[0]
    assert d.edge == ("preprocessing", "tts_engine")
    assert "`stages[0].process: pre` in <config>" in d.because[0]
    assert "_PREPARED_REQUESTS" in d.because[-1]
    assert groups(planner.solve(config=with_fix(QWEN_MOVE, d.fix))) == [
        ("pipeline", ["preprocessing", "tts_engine", "vocoder"])]


def test_a_flag_that_joins_the_split_stages_again_is_accepted():
    r = planner.solve(config=QWEN_MOVE, stage_processes=["tts_engine=pre", "vocoder=pre"])
    assert r.ok and groups(r) == [("pre", ["preprocessing", "tts_engine", "vocoder"])]


MINE = {"name": "mine", "stages": [
    {"name": "front", "process": "a", "next": "engine"},
    {"name": "engine", "process": "b", "next": "out"},
    {"name": "out", "process": "b", "terminal": True}],
    "process_safe_edges": [["engine", "out"]],
    "unsupported_edges": [{"edge": ["front", "engine"], "reason": "a local cache"}]}


def test_a_complete_pipeline_that_splits_its_own_unlisted_handoff_is_its_baseline():
    r = planner.solve(config=MINE)
    assert r.ok and r.diagnostics == ()
    assert groups(r) == [("a", ["front"]), ("b", ["engine", "out"])]
    (w,) = r.warnings
    assert w.code == "declared-split" and w.edge == ("front", "engine")
    assert "front -> engine" in w.message and "a local cache" in w.message


def test_a_request_on_a_complete_pipeline_is_still_checked_against_its_baseline():
    # engine -> out is joined in the baseline: splitting it is a request, checked as ever.
    cfg = {**MINE, "process_safe_edges": []}
    assert codes(planner.solve(config=cfg, isolate_stages=["out"])) == ["unsupported-handoff"]
    # Joining the declared split again is fine and leaves no warning.
    r = planner.solve(config=MINE, stage_processes=["front=b"])
    assert r.ok and r.warnings == ()


# The reference's Ming TP2 example as a complete config: preprocessing runs in a process of its own
# while only tts_engine -> audio_decode is listed process-safe (specification, models.md).
MING_TP2_EXAMPLE = {
    "name": "ming-omni-tts",
    "stages": [
        {"name": "preprocessing", "process": "preprocessing", "next": "reference_encode"},
        {"name": "reference_encode", "process": "ming_tts_aux", "gpu": 0, "next": "tts_engine",
         "runtime": {"resources": {"total_gpu_memory_fraction": 0.08}}},
        {"name": "tts_engine", "process": "tts_engine", "gpu": [0, 1], "tp_size": 2,
         "next": "audio_decode", "runtime": {"resources": {"total_gpu_memory_fraction": 0.72}}},
        {"name": "audio_decode", "process": "ming_tts_aux", "gpu": 0, "terminal": True,
         "runtime": {"resources": {"total_gpu_memory_fraction": 0.12}}}],
    "process_safe_edges": [["tts_engine", "audio_decode"]],
    "unsupported_edges": [
        {"edge": ["preprocessing", "reference_encode"], "reason": "process-local prepared audio"},
        {"edge": ["reference_encode", "tts_engine"], "reason": "process-local speaker embedding"}],
    "process_edge_resources": [{"edge": ["tts_engine", "audio_decode"], "fractions": {
        "reference_encode": 0.08, "tts_engine": 0.72, "audio_decode": 0.12}}]}


def test_the_reference_ming_tp2_example_yaml_is_ok(tmp_path):
    path = tmp_path / "ming-tp2.yaml"
    path.write_text(yaml.safe_dump(MING_TP2_EXAMPLE))
    r = planner.solve(config=str(path))
    assert r.ok, [d.message for d in r.diagnostics]
    assert groups(r) == [("preprocessing", ["preprocessing"]),
                         ("ming_tts_aux", ["reference_encode", "audio_decode"])]
    assert [g.total for g in r.plan.gpus] == pytest.approx([0.92, 0.72])
    assert [w.edge for w in r.warnings] == [("preprocessing", "reference_encode")]


@pytest.mark.parametrize("change,code", [
    # One group holding stages on GPUs 0 and 1.
    ({"engine": {"gpu": 0}, "out": {"gpu": 1}}, "spans-gpus"),
    # Two processes on GPU 0, one stage with no fraction.
    ({"front": {"gpu": 0}, "engine": {"gpu": 0, "runtime": {"resources": {
        "total_gpu_memory_fraction": 0.5}}}}, "missing-fraction"),
    # Two processes on GPU 0 whose fractions add up to more than 1.
    ({"front": {"gpu": 0, "runtime": {"resources": {"total_gpu_memory_fraction": 0.6}}},
      "engine": {"gpu": 0, "runtime": {"resources": {"total_gpu_memory_fraction": 0.6}}}},
     "over-limit"),
])
def test_a_declared_split_no_longer_hides_the_diagnostics_behind_it(change, code):
    cfg = {**MINE, "stages": [{**st, **change.get(st["name"], {})} for st in MINE["stages"]]}
    assert codes(planner.solve(config=cfg)) == [code]


def test_a_variant_layout_is_blamed_on_the_variant():
    # Ming's tp2 layout without the safe edge it declares for that layout: the variant's own lines
    # are named, not the user's file (which only selected the variant).
    cfg = {"model": "ming-omni-tts", "variant": "tp2",
           "process_safe_edges": [["tts_engine", "audio_decode"]]}
    r = planner.solve(config=cfg)
    assert codes(r) == ["unsupported-handoff"]
    d = r.diagnostics[0]
    assert d.edge == ("preprocessing", "reference_encode")
    assert d.message.startswith("variant tp2 of card ming-omni-tts splits")
    assert d.because[0] == ("`stages[0].process: preprocessing` in variant tp2 of card "
                            "ming-omni-tts puts preprocessing in process preprocessing")


@pytest.mark.parametrize("mode", BOTH)
def test_cli_names_the_file_and_exits_1(tmp_path, mode):
    path = tmp_path / "move.yaml"
    path.write_text("model: qwen3-tts\nstages:\n  - {name: preprocessing, process: pre}\n")
    out = run_planner("solve", "--config", str(path), in_process=mode == "in-process")
    assert out.returncode == 1
    assert "error[unsupported-handoff] preprocessing -> tts_engine" in out.stdout
    assert f"`stages[0].process: pre` in {path}" in " ".join(out.stdout.split())
    assert "Traceback" not in out.stderr


def test_ming_tp2_serves_its_documented_layout():
    r = planner.solve("ming-omni-tts", variant="tp2")
    assert groups(r) == [("preprocessing", ["preprocessing"]),
                         ("ming_tts_aux", ["reference_encode", "audio_decode"])]
    assert [g.total for g in r.plan.gpus] == pytest.approx([0.92, 0.72])
    # In that layout the prepared request travels in the payload, so no stage keeps it locally.
    assert all(dict(s.args).get("prepared_requests") == "payload"
               for s in r.plan.stages if s.name != "audio_decode")
