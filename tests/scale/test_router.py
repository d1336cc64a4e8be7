"""The replica front door avoids the sick: a replica whose process died or is restarting gets no
new request while another is healthy, so killing a worker of one replica under load fails only
the requests that replica held."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

import planner
from launcher.errors import RequestFailed
from launcher.serving.replica_set import launch_replicas
from planner import Cluster, Node
from planner.api import solve_replicas
from tests.processes import gone
from tests.waiting import wait_until

TINY = {"size": "tiny"}
TEXT = "one replica is sick, the other one is fine"


def assert_no_new_request_fails(replicas, kill, restart_s: float = 60) -> None:
    """Under load from three clients, `kill()` a worker of replica 0 (returning once it is dead):
    every request submitted after that succeeds, until the replica is back and after."""
    outcomes: list[tuple[float, str]] = []  # (submitted at, "ok" or the error)
    stop = threading.Event()

    def client() -> None:
        while not stop.is_set():
            submitted = time.monotonic()
            try:
                replicas.submit(TEXT).result(60)
                outcomes.append((submitted, "ok"))
            except RequestFailed as exc:
                outcomes.append((submitted, f"{exc.status}: {exc}"))

    threads = [threading.Thread(target=client) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        wait_until(lambda: len(outcomes) >= 6, 60, "requests to flow")
        kill()
        dead_at = time.monotonic()
        wait_until(lambda: replicas.health()["status"] == "degraded", 10, "degraded")
        wait_until(lambda: replicas.health()["status"] == "ok", restart_s, "the restart")
        back_at = time.monotonic()
        wait_until(lambda: sum(s > back_at for s, _ in outcomes) >= 3, 60, "more requests")
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    after = [(s, o) for s, o in outcomes if s > dead_at]
    assert after and all(o == "ok" for _, o in after), [o for _, o in after if o != "ok"]
    assert sum(p["restarts"] for p in replicas.replicas[0].health()["processes"]) == 1
    failed = [o for _, o in outcomes if o != "ok"]
    assert all(o.startswith("503") for o in failed), failed  # those replica 0 held


@pytest.mark.slow
def test_a_killed_worker_of_one_replica_fails_no_new_request_while_the_other_is_healthy():
    pipeline = planner.load_pipeline(model_path="qwen3-tts")
    result = solve_replicas(pipeline, Cluster((Node("local", 0, 4),)), 2, gpus=False)
    assert result.ok
    with launch_replicas(result.plan, result.packing, "cpu", factory_defaults=TINY) as replicas:
        victim = replicas.replicas[0].worker_pids()["pipeline"]

        def kill() -> None:
            os.kill(victim, signal.SIGKILL)
            wait_until(lambda: gone(victim), 10, "the worker's death")

        assert_no_new_request_fails(replicas, kill)
