"""`planner tune --format sglang-omni|vllm-omni|ray-serve`: the pick as an engine's config file,
the same file `planner solve --format` writes for the pick's flags, on stdout and beside tune.json,
with the answer and what the file cannot express on stderr."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli import run_planner

PIPER_WHOLE = Path(__file__).resolve().parents[2] / "tune" / "data" / "piper-joe-whole.profile.json"


@pytest.mark.parametrize("fmt", ["sglang-omni", "vllm-omni", "ray-serve"])
def test_the_pick_is_written_as_solve_writes_its_flags(fmt, tmp_path):
    out = tmp_path / "tune"
    tuned = run_planner("tune", "piper-joe", "--concurrency", "4", "--profile", str(PIPER_WHOLE),
                        "--format", fmt, "--output", str(out))
    assert tuned.returncode == 0, tuned.stderr
    answer = json.loads((out / "tune.json").read_text())
    serve = answer["answer"]["commands"]["serve"]  # planner serve MODEL FLAGS: the pick's flags
    assert serve[:2] == ["serve", "piper-joe"] and len(serve) > 2
    solved = run_planner("solve", *serve[1:], "--format", fmt)
    assert solved.returncode == 0, solved.stderr
    assert tuned.stdout == solved.stdout == (out / f"pick.{fmt}.yaml").read_text()
    # stdout is the file alone; the answer, the notes and where the file went are on stderr
    assert "run it:" in tuned.stderr and f"pick.{fmt}.yaml" in tuned.stderr
    for line in solved.stderr.splitlines():
        assert line in tuned.stderr
