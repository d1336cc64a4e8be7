"""Waiting for messages on links: a link to one peer, a selector that one thread waits on, and a
stage's inbox (its links and the payloads this process puts there). Part of the local backend
(`links`)."""

from __future__ import annotations

import multiprocessing.connection as mpc
import os
import queue
import selectors
import threading
import time
from collections import deque
from typing import Any, Protocol

from launcher.wire.backend import unregister
from launcher.wire.protocol import Deliver, FrameReader, decode, encode, write_frame


class _Channel(Protocol):
    def lost(self, link: Link) -> None: ...

    def forward(self, message: Any) -> None: ...


class Link:
    __slots__ = ("conn", "dead", "lock", "outbound", "pid", "process", "reader", "stage")

    def __init__(self, conn: mpc.Connection, process: str, pid: int, stage: str,
                 outbound: bool) -> None:
        self.conn, self.process, self.pid, self.stage = conn, process, pid, stage
        self.outbound, self.lock, self.dead = outbound, threading.Lock(), False
        self.reader = FrameReader(conn.fileno())

    def read(self) -> list[Any]:
        """The messages that have arrived (after a selector said so); EOFError at the end."""
        return [decode(frame) for frame in self.reader.read()]

    def send(self, message: Any) -> None:
        data = encode(message)
        with self.lock:
            write_frame(self.conn, data)


class Watch:
    """A selector that one thread waits on; other threads hand it links to watch or to close
    (a link is unregistered and closed by the thread that waits on it, never under its feet)."""

    def __init__(self) -> None:
        self.selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        self.selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._lock = threading.Lock()
        self._adopt: list[Link] = []
        self._retire: list[Link] = []

    def wake(self) -> None:
        os.write(self._wake_w, b"x")

    def adopt(self, link: Link) -> None:
        with self._lock:
            self._adopt.append(link)
        self.wake()

    def retire(self, link: Link) -> None:
        with self._lock:
            self._retire.append(link)
        self.wake()

    def select(self, timeout: float | None = None) -> list[Any]:
        """What is ready to read (the data it was registered with); [] on a timeout or wake."""
        ready = []
        for key, _ in self.selector.select(timeout):
            if key.data is None:
                self._apply()
            else:
                ready.append(key.data)
        return ready

    def _apply(self) -> None:
        try:
            os.read(self._wake_r, 4096)
        except BlockingIOError:
            pass
        with self._lock:
            adopt, self._adopt = self._adopt, []
            retire, self._retire = self._retire, []
        for link in adopt:
            if not link.dead:
                self.selector.register(link.conn, selectors.EVENT_READ, link)
        for link in retire:
            unregister(self.selector, link.conn)  # (if it was ever registered)
            link.conn.close()


class StageInbox:
    """The payloads for one stage: links from peers, and puts from this process (`put`).
    `get` is called by the stage's thread only; it raises `queue.Empty` after `timeout`."""

    def __init__(self, channel: _Channel) -> None:
        self._channel = channel
        self._items: deque = deque()
        self.watch = Watch()

    def put(self, item: Any) -> None:
        self._items.append(item)
        self.watch.wake()

    def qsize(self) -> int:
        return len(self._items)

    def empty(self) -> bool:
        return not self._items

    def get(self, timeout: float | None = None) -> Any:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._items:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready = self.watch.select(wait)
            if not ready and deadline is not None and time.monotonic() >= deadline:
                raise queue.Empty
            for link in ready:
                self._read(link)
        return self._items.popleft()

    def _read(self, link: Link) -> None:
        try:
            messages = link.read()
        except (EOFError, OSError):
            self._channel.lost(link)
            return
        for message in messages:
            if isinstance(message, Deliver):
                self._items.append(message)
            else:
                self._channel.forward(message)  # anything else is for the control thread
