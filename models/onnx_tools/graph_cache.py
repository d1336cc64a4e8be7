"""Rewritten ONNX graphs, built once per source file and kept under the user's cache directory.

A stage that rewrites a model's graph (a cut, a 2-D convolution layout, an extra output) pays
for `onnx` (about 1.5 s of CPU to import) and the rewrite once: the result is cached under a path
that names the source file's SHA-256 and the rewrite's version, written atomically, and later
builds read it without importing `onnx`.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

_HASHES: dict[tuple[str, int, int], str] = {}


def cache_dir() -> Path:
    """$STAGE_PLANNER_CACHE, else $XDG_CACHE_HOME/stage-planner, else ~/.cache/stage-planner."""
    if os.environ.get("STAGE_PLANNER_CACHE"):
        return Path(os.environ["STAGE_PLANNER_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "stage-planner"


def file_sha256(path: Path) -> str:
    """The file's SHA-256, computed once per (path, size, modification time) in a process."""
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _HASHES:
        digest = hashlib.sha256()
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        _HASHES[key] = digest.hexdigest()
    return _HASHES[key]


def cached(path: Path, build: Callable[[], bytes]) -> bytes:
    """The bytes at `path`, or `build()`'s, written there for the next caller."""
    try:
        return path.read_bytes()
    except OSError:
        pass
    data = build()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Atomic: a concurrent builder (another worker process) reads a whole file or none.
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}-", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only cache only costs the next build another rewrite
    return data
