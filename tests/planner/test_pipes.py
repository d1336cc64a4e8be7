"""`planner ... --format json | head`: a reader that closes the pipe early ends the command
quietly (exit 141, as a shell reports SIGPIPE), never with a BrokenPipeError traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("argv", [["solve", "qwen3-tts", "--format", "json"],
                                  ["models", "--format", "json"]])
def test_a_reader_that_goes_away_ends_the_command_quietly(argv):
    proc = subprocess.Popen([sys.executable, "-m", "planner", *argv], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout.read(1)  # `head -c 1`
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(60) in (0, 141)
    assert "Traceback" not in err and "BrokenPipeError" not in err
