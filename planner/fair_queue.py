"""The order in which a stage thread takes the work of the requests it serves: the launcher's
stage threads run it (`launcher.worker.fair_inbox`), and tune's simulator predicts with it.

A stage thread serving several requests takes one item at a time (an input to run, or the next
chunk of a stream it is producing) from a `FairQueue`:

- a request's first item goes before any request's later items, so a new request's first chunk
  (its first audio) does not wait behind the chunks of requests already streaming;
- after that, requests take turns one item each (round robin): none waits longer than one item
  per other request in flight, so a stream already playing keeps being fed;
- one request's items come out in the order they went in (`put_front` puts an item back at the
  head of its request: a stream that resumes after others had their turn).

A request is remembered as served until `finish` (its last item is done, or it is cancelled):
an item arriving later is one more turn, not a first item.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class FairQueue(Generic[T]):
    """Items of several requests; one thread uses it (no lock)."""

    def __init__(self) -> None:
        self._items: dict[int, deque[T]] = {}
        self._fresh: deque[int] = deque()  # never served, with items: in order of arrival
        self._turns: deque[int] = deque()  # served before, with items: whose turn is next
        self._served: set[int] = set()
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def put(self, request_id: int, item: T) -> None:
        self._queue(request_id).append(item)
        self._count += 1

    def put_front(self, request_id: int, item: T) -> None:
        self._queue(request_id).appendleft(item)
        self._count += 1

    def take(self) -> tuple[int, T]:
        """The next item by the policy above; IndexError when there is none."""
        order = self._fresh if self._fresh else self._turns
        request_id = order.popleft()
        items = self._items[request_id]
        item = items.popleft()
        self._count -= 1
        self._served.add(request_id)
        if items:
            self._turns.append(request_id)
        else:
            del self._items[request_id]
        return request_id, item

    def requests(self) -> Iterator[int]:
        """Every request known here: with items waiting, or served and not finished."""
        yield from list(self._served | self._items.keys())

    def finish(self, request_id: int) -> list[T]:
        """Forget the request; its items still waiting, for the caller to discard."""
        self._served.discard(request_id)
        items = self._items.pop(request_id, None)
        if items is None:
            return []
        for order in (self._fresh, self._turns):
            if request_id in order:
                order.remove(request_id)
        self._count -= len(items)
        return list(items)

    def _queue(self, request_id: int) -> deque[T]:
        items = self._items.get(request_id)
        if items is None:
            items = self._items[request_id] = deque()
            (self._turns if request_id in self._served else self._fresh).append(request_id)
        return items
