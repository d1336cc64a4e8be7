"""Replaying saved tune_accuracy answers re-predicts them with the planner as it is and judges
its picks against what was measured then."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.tune_eval import replay as tune_replay
from benchmarks.tune_eval.replay import replay
from tests.cli import BOTH

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def runs(saved_set) -> Path:
    """The saved tune_eval/accuracy.py runs of 2026-11-30."""
    return saved_set("2026-11-30")


def run_replay(mode, capsys, monkeypatch, *paths):
    """`python -m benchmarks.tune_eval.replay PATH...`: its `main` in this process (fast lane) or
    the module as a subprocess (slow lane), as a CompletedProcess."""
    args = [str(p) for p in paths]
    if mode == "subprocess":
        return subprocess.run([sys.executable, "-m", "benchmarks.tune_eval.replay", *args],
                              capture_output=True, text=True, cwd=ROOT, timeout=120, check=False)
    monkeypatch.setattr(sys, "argv", ["replay.py", *args])
    capsys.readouterr()
    tune_replay.main()
    out = capsys.readouterr()
    return subprocess.CompletedProcess(args, 0, out.out, out.err)


def test_lock_bound_is_re_predicted_and_its_pick_is_the_best_measured(runs, tmp_path):
    answer = json.loads((runs / "3-default" / "lock-bound.json").read_text())
    errors, picks = replay(answer, "lock-bound", tmp_path)
    assert len(errors) == 10  # five placements at two loads, each measured
    assert max(abs(e) for e in errors) < 0.25
    by_load = {p.load: p for p in picks}
    # At C=8 isolating the engine measured best (104.7 req/s, the three-process split 90.3)
    assert by_load[8].placement == "--isolate-stage engine" and by_load[8].of_best == 1.0
    assert by_load[1].of_best > 0.95


def test_a_placement_not_measured_is_left_out(runs, tmp_path):
    answer = json.loads((runs / "3-default" / "lock-bound.json").read_text())
    for c in answer["candidates"]:
        if c["flags"] == ["--isolate-stage engine"]:
            c["measured_by_workload"] = None
    errors, picks = replay(answer, "lock-bound", tmp_path)
    assert len(errors) == 8
    # tune still picks it at C=8, but what it would measure is unknown: no verdict there
    assert [p.load for p in picks] == [1]


@pytest.mark.parametrize("mode", BOTH)
def test_the_command_summarises_every_answer_given(runs, mode, capsys, monkeypatch):
    out = run_replay(mode, capsys, monkeypatch, runs / "5-one-core")
    assert out.returncode == 0, out.stderr
    assert "5-one-core/qwen3-tts" in out.stdout
    assert "over 4 measurements" in out.stdout and "picks within 5%" in out.stdout


def test_a_pipeline_of_ones_own_is_read_from_the_config_saved_beside_its_answer(runs, tmp_path):
    # tune_accuracy.py --config FILE --save DIR keeps DIR/NAME.yaml; the name is no built-in card
    saved = runs / "13-time-weighted-probe" / "device-heavy.json"
    assert saved.with_suffix(".yaml").is_file()
    errors, picks = replay(json.loads(saved.read_text()), "device-heavy", tmp_path, saved)
    assert len(errors) == 4 and [p.load for p in picks] == [1, 8]
    # one process measured best at both loads: its encoder's pure Python is no native company
    assert all(p.placement == "declared" and p.of_best == 1.0 for p in picks)


@pytest.mark.parametrize("mode", BOTH)
def test_bare_profiles_beside_the_answers_are_passed_over(runs, tmp_path, mode, capsys,
                                                          monkeypatch):
    # 2026-11-30/14-card-profiles holds profiles for tune_eval/latency.py, not answers
    answer = runs / "5-one-core" / "qwen3-tts.json"
    (tmp_path / "qwen3-tts.json").write_text(answer.read_text())
    (tmp_path / "profile.json").write_text(json.dumps(json.loads(answer.read_text())["profile"]))
    out = run_replay(mode, capsys, monkeypatch, tmp_path)
    assert out.returncode == 0, out.stderr
    assert "over 4 measurements" in out.stdout
