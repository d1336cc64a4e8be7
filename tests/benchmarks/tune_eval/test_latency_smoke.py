"""The tune-latency benchmark times the command on a saved profile and the floor under it."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.slow
def test_one_run_on_one_card_prints_its_time_and_the_floor(saved_set):
    profiles = saved_set("2026-11-30") / "14-card-profiles"
    out = subprocess.run([sys.executable, "-m", "benchmarks.tune_eval.latency",
                          str(profiles / "qwen3-tts.json"), "--repeat", "1"],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert any(line.startswith("qwen3-tts") and "2 placements  median" in line for line in lines)
    assert any(line.startswith("(floor: import the planner)") for line in lines)
    assert any(line.startswith("qwen3-tts") and "serial" in line and "forked" in line
               for line in lines)
