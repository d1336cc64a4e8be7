"""The repository holds no file that its own .gitignore calls generated (a profiler's output, a
run's raw data): such a file only gets in by being forced, and this says which."""

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="not a git checkout")
def test_no_tracked_file_is_one_gitignore_calls_generated():
    out = subprocess.run(["git", "ls-files", "--cached", "--ignored", "--exclude-standard"],
                         cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.split() == []
