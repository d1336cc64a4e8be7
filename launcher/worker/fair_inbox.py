"""A stage's waiting work, given out fairly across the requests it serves: `FairInbox` is a stage's
inbox together with its `FairQueue` (the order, `planner.fair_queue`, which tune's simulator
predicts with too); its depth counts both.
"""

from __future__ import annotations

from launcher.wire.backend import Inbox
from planner import FairQueue

__all__ = ["FairInbox", "FairQueue"]


class FairInbox:
    """A stage's inbox (`raw`: what arrives, in arrival order) and its work taken from it
    (`work`: given out fairly). Other threads only `put` and read the depth."""

    def __init__(self, raw: Inbox) -> None:
        self.raw = raw
        self.work: FairQueue = FairQueue()

    def put(self, item: object) -> None:
        self.raw.put(item)

    def qsize(self) -> int:
        return self.raw.qsize() + len(self.work)

    def empty(self) -> bool:
        return not self.qsize()
