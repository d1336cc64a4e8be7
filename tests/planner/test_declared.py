"""A declared topology is checked like a request: a config, a variant or a complete pipeline that
splits a handoff the model does not declare process-safe is `unsupported-handoff`, naming the YAML
line that did it, and its fix really removes it."""

import subprocess
import sys

import pytest

import planner
from planner.cards import all_cards
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


def test_a_complete_pipeline_that_splits_its_own_unsafe_handoff():
    cfg = {"name": "mine", "stages": [
        {"name": "front", "process": "a", "next": "engine"},
        {"name": "engine", "process": "b", "next": "out"},
        {"name": "out", "process": "b", "terminal": True}],
        "process_safe_edges": [["engine", "out"]],
        "unsupported_edges": [{"edge": ["front", "engine"], "reason": "a local cache"}]}
    r = planner.solve(config=cfg)
    assert codes(r) == ["unsupported-handoff"]
    d = r.diagnostics[0]
    assert d.because[:2] == ("`stages[0].process: a` in <config> puts front in process a",
                             "`stages[1].process: b` in <config> puts engine in process b")
    assert "a local cache" in d.because[-1]
    fixed = planner.solve(config=with_fix(cfg, d.fix))
    assert fixed.ok and len(fixed.plan.groups) == 1


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


def test_cli_names_the_file_and_exits_1(tmp_path):
    path = tmp_path / "move.yaml"
    path.write_text("model: qwen3-tts\nstages:\n  - {name: preprocessing, process: pre}\n")
    out = subprocess.run([sys.executable, "-m", "planner", "solve", "--config", str(path)],
                         capture_output=True, text=True)
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
