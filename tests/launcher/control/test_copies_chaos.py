"""Chaos with copies: under load, one vocoder copy is killed. Only the requests bound to it fail
(503, mid-stream for one it was streaming), the other copy serves on meanwhile, /health names the
dead copy, and the copy comes back and serves again. Every wait is bounded by `PHASE_S`.

The requests go through `Deployment.submit`: the HTTP layer's mapping of a 503 and of a failed
stream (an aborted response) is the same for any `WorkerDied` and is tested in `test_chaos`."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from launcher import launch
from launcher.errors import RequestFailed

from tests.launcher import plans
from tests.launcher.conftest import DEVICE, TINY
from tests.launcher.control.test_copies import with_copies
from tests.processes import gone
from tests.waiting import wait_until

pytestmark = pytest.mark.slow
PHASE_S = 30.0
TEXT = "One of two vocoder copies dies."
# A vocoder that takes its time (asleep, as on a device) between its chunks: a request it
# streams is held there long enough for the kill to land mid-stream.
SLOW_VOCODER = (("device_ms", 50.0), ("chunks", 2), ("audio_ms", 120.0))


def wait_for(predicate, what: str):
    return wait_until(predicate, PHASE_S, what)


class Load:
    """Client threads streaming requests in a loop; each outcome is (submitted at, the copy it
    was bound to, "ok" | "failed-<status>" | "refused-<status>"). `streaming_on(copy)` arms an
    event set once a request bound to `copy` has had its first chunk, and not its last."""

    def __init__(self, deployment, clients: int = 4) -> None:
        self.d, self.outcomes, self.stop = deployment, [], threading.Event()
        self.armed: tuple[str, threading.Event, list] | None = None
        self.threads = [threading.Thread(target=self._client) for _ in range(clients)]

    def streaming_on(self, copy: str) -> tuple[threading.Event, list]:
        event, which = threading.Event(), []
        self.armed = (copy, event, which)
        return event, which

    def _client(self) -> None:
        while not self.stop.is_set():
            started = time.monotonic()
            try:
                handle = self.d.submit(TEXT, stream=True)
            except RequestFailed as exc:
                self.outcomes.append((started, None, f"refused-{exc.status}", None))
                self.stop.wait(0.05)
                continue
            copy = handle.copies["vocoder"]
            try:
                for n, _ in enumerate(handle.chunks(PHASE_S)):
                    armed = self.armed
                    if n == 0 and armed is not None and armed[0] == copy and \
                            not armed[1].is_set():
                        armed[2].append(handle.id)
                        armed[1].set()
                outcome = "ok"
            except RequestFailed as exc:
                outcome = f"failed-{exc.status}"
            self.outcomes.append((started, copy, outcome, handle.id))

    def ok_on(self, copy: str, after: float = 0.0) -> int:
        return sum(c == copy and o == "ok" and s > after for s, c, o, _ in list(self.outcomes))

    def __enter__(self) -> Load:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(PHASE_S + 5)


def test_killing_one_copy_fails_only_its_requests_and_the_copy_comes_back():
    plan = with_copies(plans.qwen3("vocoder", vocoder_factory="launcher.synthetic:stage",
                                   vocoder_args=SLOW_VOCODER), "vocoder", 2)
    with launch(plan, device=DEVICE, factory_defaults=TINY) as d, Load(d) as load:
        wait_for(lambda: load.ok_on("vocoder.0") >= 2 and load.ok_on("vocoder.1") >= 2,
                 "both copies serving")
        event, victim = load.streaming_on("vocoder.0")
        wait_for(event.is_set, "a request streaming from vocoder.0")
        dead = d.worker_pids()["vocoder.0"]
        os.kill(dead, signal.SIGKILL)
        wait_for(lambda: gone(dead), "vocoder.0 to die")
        killed_at = time.monotonic()

        # /health names the dead copy at once; the group is still served.
        health = {p["name"]: p for p in d.health()["processes"]}
        assert d.health()["status"] == "degraded"
        assert health["vocoder.0"]["state"] != "ready" and health["vocoder.1"]["state"] == "ready"
        # A request now goes to the live copy and is served while the dead one is away.
        during = d.submit(TEXT, stream=True)
        assert during.copies == {"vocoder": "vocoder.1"}
        assert during.result(PHASE_S).samples.numel() > 0
        died = wait_for(lambda: {p["name"]: p for p in d.health()["processes"]}["vocoder.0"]
                        ["death"], "the death on /health")
        assert "vocoder.0" in died and "SIGKILL" in died

        # The copy comes back alone, and serves again.
        wait_for(lambda: d.health()["status"] == "ok"
                 and d.worker_pids().get("vocoder.0") not in (None, dead), "vocoder.0 back")
        back_at = time.monotonic()
        wait_for(lambda: load.ok_on("vocoder.0", back_at) >= 2, "vocoder.0 serving again")
        restarts = {p["name"]: p["restarts"] for p in d.health()["processes"]}

    outcomes = list(load.outcomes)
    print("copies chaos outcomes:", {o: sum(x[2] == o for x in outcomes)
                                     for o in {x[2] for x in outcomes}})
    assert {o for _, _, o, _ in outcomes} <= {"ok", "failed-503"}  # no refusal, no hang, no 500
    failed = [(c, rid) for _, c, o, rid in outcomes if o != "ok"]
    assert failed and all(c == "vocoder.0" for c, _ in failed), failed
    assert victim[0] in {rid for _, rid in failed}  # the one it was streaming, mid-stream
    # Nothing failed long after the kill: only requests bound to the copy while it was down.
    assert all(s < back_at for s, _, o, _ in outcomes if o != "ok")
    assert load.ok_on("vocoder.1", killed_at) >= 1
    assert restarts == {"pipeline": 0, "vocoder.0": 1, "vocoder.1": 0}
