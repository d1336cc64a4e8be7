"""A stand-in stage that, like piper-joe's acoustic stage, does the work the response kind asks:
a streamed request's output in CHUNKS chunks, each computed as it goes, a whole one in one piece
(factory `tests.planner.tune.kind_stand_in:stage`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import torch

from launcher.synthetic import spin_python

CHUNKS = 4


class KindAware:
    def __init__(self, gil_ms: float) -> None:
        self.gil_ms = gil_ms

    def _piece(self, share: float) -> dict[str, Any]:
        spin_python(self.gil_ms * share)
        return {"payload": torch.ones(64, dtype=torch.uint8)}

    def __call__(self, payload: Mapping[str, Any]) -> dict[str, Any] | Iterator[dict[str, Any]]:
        if payload.get("stream"):
            return (self._piece(1.0 / CHUNKS) for _ in range(CHUNKS))
        return self._piece(1.0)


def stage(*, gil_ms: float = 4.0) -> KindAware:
    return KindAware(gil_ms)
