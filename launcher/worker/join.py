"""A stage's fan-in: its inputs for one request, once every predecessor has spoken.

Whole payloads from several predecessors are merged in pipeline order; a chunk stream (from at
most one predecessor) is then fed through chunk by chunk. One `Joiner` per stage thread.
"""

from __future__ import annotations

from collections.abc import Container, Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Envelope:
    request_id: int
    source: str
    chunk: int | None  # index in a chunk stream; None for a whole payload
    last: bool  # final message from `source` for this request
    data: dict[str, Any]


class JoinError(ValueError):
    """The inputs cannot be joined (two chunk streams for one stage)."""


@dataclass
class _Pending:
    wholes: dict[str, dict[str, Any]] = field(default_factory=dict)
    chunk_source: str | None = None
    backlog: list[Envelope] = field(default_factory=list)


class Joiner:
    def __init__(self, stage: str, predecessors: tuple[str, ...]) -> None:
        self.stage, self.predecessors = stage, predecessors
        self._pending: dict[int, _Pending] = {}

    def drop(self, cancelled: Container[int]) -> None:
        """Forget the partial inputs of cancelled requests."""
        for stale in [r for r in self._pending if r in cancelled]:
            del self._pending[stale]

    def add(self, env: Envelope) -> Iterator[tuple[dict[str, Any], int | None, bool]]:
        """(input, chunk index, last) for each invocation `env` completes; raises JoinError."""
        box = self._pending.setdefault(env.request_id, _Pending())
        if env.chunk is None:
            box.wholes[env.source] = env.data
        else:
            if box.chunk_source not in (None, env.source):
                self._pending.pop(env.request_id, None)
                raise JoinError(f"stage '{self.stage}' got chunk streams from both "
                                f"'{box.chunk_source}' and '{env.source}'")
            box.chunk_source = env.source
            box.backlog.append(env)
        heard = set(box.wholes) | ({box.chunk_source} if box.chunk_source else set())
        if not heard >= set(self.predecessors):
            return
        base: dict[str, Any] = {}
        for pred in self.predecessors:
            base.update(box.wholes.get(pred, {}))
        if box.chunk_source is None:
            self._pending.pop(env.request_id)
            yield base, None, True
            return
        backlog, box.backlog = box.backlog, []
        for item in backlog:
            if item.last:
                self._pending.pop(env.request_id, None)
            yield {**base, **item.data}, item.chunk, item.last
