"""The saved judging sets under `benchmarks/tune_runs/`, one directory each: its rule, verdict and
summary as text in git (the `*.md` and `*.txt` files at its top), and the rest of what the run
saved (answers, profiles, measurements, configs, logs) in one compressed archive beside them,
`raw.tar.xz`, which the replays read once it is unpacked:

    python -m benchmarks.tune_eval.runs unpack benchmarks/tune_runs/2026-11-30   # in place
    python -m benchmarks.tune_eval.runs pack benchmarks/tune_runs/NEW-SET       # after a run

Unpacked in place, a set's files are where its commands name them (git ignores them there), so
a command written in a set's summary, or in ../EVIDENCE.md, runs as written. `pack` writes the
archive from what a run saved and leaves the files in place; the same files always give the same
archive, so packing again changes nothing in git.
"""

from __future__ import annotations

import argparse
import io
import sys
import tarfile
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "benchmarks" / "tune_runs"
ARCHIVE = "raw.tar.xz"
TEXT = (".md", ".txt")  # a set's rule, verdict and summary: kept as they are, in git


def kept(set_dir: Path, path: Path) -> bool:
    """Whether `path` stays readable in git as it is (rather than in the set's archive)."""
    return path.parent == set_dir and path.suffix in TEXT


def raw_files(set_dir: Path) -> list[Path]:
    """What the archive holds: every file of the set but its text and the archive itself."""
    return sorted(p for p in set_dir.rglob("*")
                  if p.is_file() and p.name != ARCHIVE and not kept(set_dir, p))


def pack(set_dir: Path) -> Path:
    """Write `set_dir/raw.tar.xz` from the set's raw files. Members are named from the set's
    directory, in order, with no owner or time, so the same files give the same bytes."""
    files = raw_files(set_dir)
    if not files:
        raise SystemExit(f"{set_dir}: nothing to pack (no files beside its *.md and *.txt)")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz", preset=9) as tar:
        for path in files:
            info = tarfile.TarInfo(path.relative_to(set_dir).as_posix())
            info.size = path.stat().st_size
            info.mode = 0o644
            with path.open("rb") as f:
                tar.addfile(info, f)
    archive = set_dir / ARCHIVE
    archive.write_bytes(buffer.getvalue())
    return archive


def unpack(set_dir: Path, root: Path | None = None) -> Path:
    """Extract a set's archive and return the directory that then holds the whole set. In place
    by default; with `root`, into the set's path under `root` (`root/benchmarks/tune_runs/SET`),
    its text files copied beside, so that the paths its files give from the repository's root
    resolve from `root` (a test unpacks into its own directory so)."""
    set_dir = set_dir.resolve()
    archive = set_dir / ARCHIVE
    if not archive.is_file():
        raise SystemExit(f"{set_dir}: no {ARCHIVE} (a set of text only, or not a judging set)")
    into = set_dir if root is None else root / set_dir.relative_to(ROOT)
    into.mkdir(parents=True, exist_ok=True)
    if into != set_dir:
        for text in set_dir.iterdir():
            if kept(set_dir, text):
                (into / text.name).write_bytes(text.read_bytes())
    with tarfile.open(archive, "r:xz") as tar:
        tar.extractall(into, filter="data")
    return into


def main(argv: Iterable[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.tune_eval.runs",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("action", choices=("pack", "unpack"))
    ap.add_argument("sets", nargs="+", type=Path, metavar="SET")
    args = ap.parse_args(list(argv) if argv is not None else None)
    for set_dir in args.sets:
        if args.action == "pack":
            archive = pack(set_dir)
            print(f"{archive}: {len(raw_files(set_dir))} files, {archive.stat().st_size} bytes")
        else:
            print(f"{set_dir}: unpacked into {unpack(set_dir)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
