"""What `planner serve` tells its console about the workers while it serves: each death and each
restart, one line apiece (the HTTP clients learn of them as 503s; the operator reads it here).

It reads the deployment's `/health` snapshot (a replica set's too), so it needs nothing from the
supervisor beyond what it already reports, and compares it with the last one it saw."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any


def _processes(health: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(label, process) for every worker process, replicas' included."""
    for p in health.get("processes") or ():
        yield p["name"], p
    for r in health.get("replicas") or ():
        for label, p in _processes(r):
            yield f"replica {r['index']} {label}", p


class WorkerWatch:
    """Turns successive health snapshots into console lines: a death (with how it died, from the
    supervisor's own account) and the restart that follows it."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[int, str, int | None]] = {}  # label -> (restarts, state, pid)

    def lines(self, health: Mapping[str, Any]) -> list[str]:
        out = []
        for label, p in _processes(health):
            now = (p.get("restarts", 0), p.get("state", ""), p.get("pid"))
            before = self._seen.get(label)
            self._seen[label] = now
            if before is None:
                continue
            restarts, state, pid = now
            if restarts > before[0] or (state == "failed" and before[1] != "failed"):
                death = p.get("death") or f"worker {label} (pid {before[2]}) died"
                then = (f"restarting it (restart {restarts})" if state != "failed"
                        else "not restarted: the deployment is shutting down")
                out.append(f"worker died: {death}; {then}")
            if state == "ready" and (before[1] != "ready" or restarts > before[0]):
                out.append(f"worker restarted: {label} is ready again (pid {pid})")
        return out
