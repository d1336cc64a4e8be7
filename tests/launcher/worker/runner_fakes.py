"""What a `StageRunner` test gives it in place of a worker's plumbing: an inbox its stage thread
can be told to leave, and a channel that keeps what it is sent."""

from __future__ import annotations

import queue
from typing import Any

STOP = object()  # put in an inbox: its stage thread ends (as when the supervisor is gone)


class StoppableQueue(queue.SimpleQueue):
    """An inbox whose thread can be ended: the stage loop ends on EOFError (supervisor gone)."""

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        item = super().get(block, timeout)
        if item is STOP:
            raise EOFError
        return item


class RecordingChannel:
    """A worker's channel to the supervisor: each frame it is sent, in order (`sent`)."""

    process, pid = "p", 1

    def __init__(self) -> None:
        self.sent: queue.SimpleQueue = queue.SimpleQueue()

    def to_supervisor(self, *messages: Any) -> None:
        self.sent.put(messages)
