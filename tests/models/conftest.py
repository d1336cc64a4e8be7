"""The real models' tests start workers as the launcher's tests do, so they share its fork server
and its leftover check. Built stages are kept for a whole module (a piper frontend owns an
espeak-ng child for its life), so the check lets those children be; everything else is checked
as in tests/launcher."""

from __future__ import annotations

from pathlib import Path

import pytest

from launcher.wire import ipc
from tests.launcher.conftest import leftovers, shared_fork_server  # noqa: F401 (a fixture)
from tests.waiting import wait_until


def _espeak(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip().startswith("espeak")
    except OSError:
        return False  # gone


def _left() -> tuple[set[int], list[str]]:
    procs, segments = leftovers()
    return {p for p in procs if not _espeak(p)}, segments


@pytest.fixture(autouse=True)
def nothing_left_behind():
    yield
    wait_until(lambda: _left() == (set(), []), 3.0, fail=False)
    procs, segments = _left()
    for name in segments:  # a leak fails the test that made it, not every test after it
        ipc.sweep(name)
    assert not procs, f"processes left running: {sorted(procs)}"
    assert not segments, f"shared-memory segments left: {segments}"
