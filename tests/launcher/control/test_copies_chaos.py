"""Chaos with copies, over HTTP: under load, one vocoder copy is killed. Only the requests bound
to it fail (a whole one answers 503 with `Retry-After`, a stream it was feeding is cut: the client
raises), the other copy serves on meanwhile, /health names the dead copy, and the copy comes back
and serves again. Every wait is bounded by `PHASE_S`.

A client cannot see which copy serves it, so the app is given the deployment through `Bound`,
which notes the copy each request was bound to by its text (every request speaks its own)."""

from __future__ import annotations

import itertools
from collections import Counter
import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from launcher import launch
from launcher.serving.http import create_app

from tests.launcher import plans
from tests.launcher.chaos_load import Load, served, speech_outcome
from tests.launcher.conftest import DEVICE, TINY
from tests.launcher.control.test_copies import with_copies
from tests.processes import gone
from tests.waiting import wait_until

pytestmark = pytest.mark.slow
PHASE_S = 30.0
# A vocoder that takes its time (asleep, as on a device) before each chunk: it is called for each
# of the generator's chunks, so a request is on it long enough (a second or so) for the kill to
# land mid-stream, and mid-way through a whole request.
SLOW_VOCODER = (("device_ms", 50.0), ("chunks", 2), ("audio_ms", 120.0))


def wait_for(predicate, what):
    return wait_until(predicate, PHASE_S, what)


class Bound:
    """The deployment as the app sees it, noting each request's handle by its text."""

    def __init__(self, deployment) -> None:
        self._d, self.handles = deployment, {}

    def __getattr__(self, name):
        return getattr(self._d, name)

    def submit(self, text, *args, **kwargs):
        handle = self._d.submit(text, *args, **kwargs)
        self.handles[text] = handle
        return handle

    def copy_of(self, text: str) -> str | None:
        handle = self.handles.get(text)
        return None if handle is None else handle.copies["vocoder"]

    def in_flight_on(self, copy: str) -> set[str]:
        return {t for t, h in list(self.handles.items())
                if not h.done and h.copies["vocoder"] == copy}


@contextmanager
def posting(url: str, clients: int = 4) -> Iterator[Load]:
    """Client threads posting in a loop, odd-numbered requests streamed, each a text of its own; each
    outcome is (started at, text, streamed, how it ended). `load.receiving` holds the texts of
    the streams whose 200 is in and whose body is not."""
    https = [httpx.Client(base_url=url, timeout=PHASE_S) for _ in range(clients)]
    numbers = itertools.count()
    receiving: set[str] = set()

    def one(i: int) -> tuple[float, str, bool, str]:
        # The kind goes by the request's number, not the client's: with a kind per client,
        # least-work routing settled into streams on one copy and whole requests on the other
        # (seen under load), and no copy ever held both.
        number = next(numbers)
        started, stream = time.monotonic(), bool(number % 2)
        text = f"Request {number} to two vocoder copies."

        def on_status(status: int) -> None:
            if stream and status == 200:
                receiving.add(text)

        outcome = speech_outcome(https[i], {"input": text, "stream": stream}, on_status)
        receiving.discard(text)
        return started, text, stream, outcome

    try:
        with Load(one, clients, PHASE_S + 5) as load:
            load.receiving = receiving
            yield load
    finally:
        for c in https:
            c.close()


def processes(url: str) -> tuple[int, dict, dict[str, dict]]:
    r = httpx.get(f"{url}/health", timeout=PHASE_S)
    report = r.json()
    return r.status_code, report, {p["name"]: p for p in report["processes"]}


def test_killing_one_copy_over_http_fails_only_its_requests_and_the_copy_comes_back():
    plan = with_copies(plans.qwen3("vocoder", vocoder_factory="launcher.synthetic:stage",
                                   vocoder_args=SLOW_VOCODER), "vocoder", 2)
    with launch(plan, device=DEVICE, factory_defaults=TINY) as d:
        bound = Bound(d)

        def ok_on(load, copy: str, after: float = 0.0) -> int:
            return sum(o == "ok" and s > after and bound.copy_of(t) == copy
                       for s, t, _, o in list(load.outcomes))

        def so_far(what: str):
            return lambda: (f"{what}; requests so far (streamed, copy, outcome): " + str(
                Counter((st, bound.copy_of(t), o) for _, t, st, o in list(load.outcomes))))

        with served(create_app(bound, plans.topology(plan)), PHASE_S) as url, \
                posting(url) as load:
            wait_for(lambda: ok_on(load, "vocoder.0") >= 2 and ok_on(load, "vocoder.1") >= 2,
                     "both copies serving")

            def victims() -> tuple[str, set[str], set[str]] | None:
                """A copy with a stream mid-body and a whole request both in flight on it now
                (least-work routing may keep the two kinds apart for a while, so either copy)."""
                for copy in ("vocoder.0", "vocoder.1"):
                    on = bound.in_flight_on(copy)
                    streams = on & set(load.receiving)
                    whole = {t for t in on if not bound.handles[t].stream}
                    if streams and whole:
                        return copy, streams, whole
                return None

            # The pids are read first so that nothing lies between seeing what a copy holds and
            # killing it: a whole request seen in flight must still be in flight at the kill (a
            # /health call between the two once let it finish, under load).
            pids = {name: p["pid"] for name, p in processes(url)[2].items()}
            victim, streams, whole = wait_for(victims, so_far(
                "a stream and a whole request on one copy"))
            dead = pids[victim]
            os.kill(dead, signal.SIGKILL)
            other = "vocoder.1" if victim == "vocoder.0" else "vocoder.0"
            wait_for(lambda: gone(dead), f"{victim} to die")
            killed_at = time.monotonic()

            # /health names the dead copy at once (a 503: degraded); the group is still served.
            status, report, health = processes(url)
            assert (status, report["status"]) == (503, "degraded")
            assert health[victim]["state"] != "ready"
            assert health[other]["state"] == "ready"
            died = wait_for(lambda: processes(url)[2][victim]["death"], "the death on /health")
            assert victim in died and "SIGKILL" in died

            # The copy comes back alone, and serves again.
            wait_for(lambda: processes(url)[0] == 200, "/health ok again")
            back = processes(url)[2]
            assert back[victim]["state"] == "ready" and back[victim]["pid"] != dead
            back_at = time.monotonic()
            wait_for(lambda: ok_on(load, victim, back_at) >= 1,
                     so_far(f"{victim} serving again"))
            restarts = {name: p["restarts"] for name, p in processes(url)[2].items()}

    outcomes = list(load.outcomes)
    print("copies chaos outcomes:", {o: sum(x[3] == o for x in outcomes)
                                     for o in {x[3] for x in outcomes}})
    failed = {t: (stream, o) for _, t, stream, o in outcomes if o != "ok"}
    # The whole request in flight on the killed copy answered 503 (with when to retry); the
    # stream it was feeding was cut, which the client sees as an error, not a short body.
    assert all(failed.get(t) == (False, "refused") for t in whole), (whole, failed)
    assert all(failed.get(t) == (True, "aborted") for t in streams), (streams, failed)
    # Nothing else failed: no request on the other copy, nothing long after the kill, no hang,
    # no 500. A stream bound to the dead copy before its 200 gets a 503 (refused) too.
    assert {bound.copy_of(t) for t in failed} == {victim}, failed
    assert {o for _, o in failed.values()} <= {"refused", "aborted"}, failed
    assert all(s < back_at for s, _, _, o in outcomes if o != "ok")
    assert ok_on(load, other, killed_at) >= 1
    assert restarts == {"pipeline": 0, victim: 1, other: 0}
