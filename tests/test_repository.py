"""The repository holds no file that its own .gitignore calls generated (a profiler's output, a
run's raw data): such a file only gets in by being forced, and this says which."""

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="not a git checkout")
def test_no_tracked_file_is_one_gitignore_calls_generated():
    out = subprocess.run(["git", "ls-files", "--cached", "--ignored", "--exclude-standard"],
                         cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.split() == []


# A directory of the machine a file was written on: root's home, the work tree's parent, a
# user's home, spelled from the file system's root (`~/` is fine; so is a URL's path).
MACHINE_PATH = re.compile(r"(?:^|[^\w.~/:-])/(?:root|work|home/[a-z_][\w-]*)/")


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="not a git checkout")
def test_no_tracked_text_names_a_path_of_the_machine_it_was_written_on():
    names = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    found = []
    for name in names:
        try:
            text = (ROOT / name).read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError):
            continue  # an archive or an image; a file deleted in the working tree
        found += [f"{name}:{n}" for n, line in enumerate(text.splitlines(), 1)
                  if MACHINE_PATH.search(line)]
    assert found == [], "write such paths relative to the repository, or as ~/..."
