"""A judging set keeps its rule, verdict and summary as text and the rest in one archive, which
unpacks to exactly what the run saved; git holds nothing else of it."""

import shutil
import subprocess
from pathlib import Path

import pytest

from benchmarks.tune_eval import runs

ROOT = Path(__file__).resolve().parents[3]


def a_saved_run(root: Path) -> Path:
    """A set as `tune_eval/generated.py --save` leaves it, with a rule and a verdict beside."""
    set_dir = root / "benchmarks" / "tune_runs" / "2099-01-01-example"
    (set_dir / "judge-seed-1" / "generated-1").mkdir(parents=True)
    (set_dir / "decided-before.txt").write_text("seeds 1, decided before the run\n")
    (set_dir / "verdict.md").write_text("# 1 of 1\n")
    (set_dir / "clock.log").write_text("10:00 seed 1\n")
    (set_dir / "judge-seed-1" / "summary.json").write_text('{"per_seed": []}\n')
    (set_dir / "judge-seed-1" / "generated-1" / "notes.txt").write_text("a text file below\n")
    return set_dir


def test_pack_keeps_the_top_texts_out_and_unpacks_to_the_same_files(tmp_path, monkeypatch):
    monkeypatch.setattr(runs, "ROOT", tmp_path / "repo")
    set_dir = a_saved_run(tmp_path / "repo")
    archive = runs.pack(set_dir)
    first = archive.read_bytes()
    assert runs.pack(set_dir).read_bytes() == first  # the same files give the same bytes
    assert [p.relative_to(set_dir).as_posix() for p in runs.raw_files(set_dir)] == [
        "clock.log", "judge-seed-1/generated-1/notes.txt", "judge-seed-1/summary.json"]

    into = runs.unpack(set_dir, tmp_path / "elsewhere")
    assert into == tmp_path / "elsewhere" / "benchmarks" / "tune_runs" / set_dir.name
    for path in set_dir.rglob("*"):
        if path.is_file() and path.name != runs.ARCHIVE:
            assert (into / path.relative_to(set_dir)).read_bytes() == path.read_bytes()

    raw = set_dir / "judge-seed-1"
    shutil.rmtree(raw)
    (set_dir / "clock.log").unlink()  # as a fresh checkout has it: text and archive only
    runs.unpack(set_dir)
    assert (raw / "summary.json").read_text() == '{"per_seed": []}\n'


def test_a_set_without_an_archive_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(runs, "ROOT", tmp_path)
    (tmp_path / "text-only").mkdir()
    with pytest.raises(SystemExit, match="no raw.tar.xz"):
        runs.unpack(tmp_path / "text-only")
    with pytest.raises(SystemExit, match="nothing to pack"):
        runs.pack(tmp_path / "text-only")


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="not a git checkout")
def test_git_holds_only_each_sets_texts_and_archive():
    tracked = [ROOT / p for p in _git("ls-files", "benchmarks/tune_runs").stdout.split()]
    assert tracked
    for path in tracked:
        set_dir = runs.RUNS / path.relative_to(runs.RUNS).parts[0]
        assert runs.kept(set_dir, path) or path.name == runs.ARCHIVE, path
    # what `unpack` writes in place is ignored, so it cannot be committed by accident
    raw = "benchmarks/tune_runs/2026-11-30/3-default/lock-bound.json"
    assert _git("check-ignore", "-q", raw).returncode == 0
