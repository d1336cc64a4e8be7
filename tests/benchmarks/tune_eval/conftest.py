"""The saved judging sets, unpacked once per session into a directory of the tests' own (never
into the repository), at their repository paths under it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from benchmarks.tune_eval.runs import RUNS, unpack


@pytest.fixture(scope="session")
def saved_root(tmp_path_factory) -> Path:
    """The root the sets are unpacked under: a repository path given from the root (as the
    rate cases name their profiles) resolves from here."""
    return tmp_path_factory.mktemp("saved")


@pytest.fixture(scope="session")
def saved_set(saved_root) -> Callable[[str], Path]:
    """`saved_set("2026-11-30")`: that set's directory, unpacked (once)."""
    done: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in done:
            done[name] = unpack(RUNS / name, saved_root)
        return done[name]

    return get
