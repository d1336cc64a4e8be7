"""Chaos: two replicas served over real HTTP under load while, in turn, a worker of replica 0, the
fork server, and a worker of replica 1 are killed. Asserted throughout: no request hangs past its
timeout, no 500, every failure is a 429/503 with `Retry-After` or an aborted stream, /health never
calls a dead process ready (nor a dead fork server ok); afterwards the deployment is whole again.
Bounded: each phase waits at most `PHASE_S`."""

from __future__ import annotations

import multiprocessing.forkserver
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

import planner
from launcher.serving.http import create_app
from launcher.serving.replica_set import launch_replicas
from planner import Cluster, Node
from planner.api import solve_replicas

from tests.launcher.chaos_load import Load, served, speech_outcome
from tests.launcher.conftest import DEVICE
from tests.processes import gone
from tests.waiting import wait_until

pytestmark = pytest.mark.slow
PHASE_S = 30.0
REQUEST_TIMEOUT_S = 20.0
TEXT = "Chaos is a ladder, and this sentence climbs it."


@contextmanager
def posting(url: str, clients: int = 3) -> Iterator[Load]:
    """Client threads posting in a loop, odd ones streamed; each outcome is (started at, how it
    ended). A whole (unstreamed) request cut short would be "aborted-unstreamed"."""
    https = [httpx.Client(base_url=url, timeout=REQUEST_TIMEOUT_S) for _ in range(clients)]

    def one(i: int) -> tuple[float, str]:
        started, stream = time.monotonic(), bool(i % 2)
        outcome = speech_outcome(https[i], {"input": TEXT, "stream": stream})
        return started, outcome if stream or outcome != "aborted" else "aborted-unstreamed"

    try:
        with Load(one, clients, REQUEST_TIMEOUT_S + 5) as load:
            yield load
    finally:
        for c in https:
            c.close()


class HealthWatch:
    """Polls /health; keeps (asked at, report)."""

    def __init__(self, url: str) -> None:
        self.url, self.samples, self.stop = url, [], threading.Event()
        self.thread = threading.Thread(target=self._poll)

    def _poll(self) -> None:
        with httpx.Client(base_url=self.url, timeout=REQUEST_TIMEOUT_S) as c:
            while not self.stop.is_set():
                asked = time.monotonic()
                self.samples.append((asked, c.get("/health").json()))
                time.sleep(0.05)

    def latest(self) -> dict:
        return self.samples[-1][1] if self.samples else {}

    def __enter__(self) -> HealthWatch:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(REQUEST_TIMEOUT_S + 5)


def ready_pids(report: dict) -> set[int]:
    return {p["pid"] for r in report.get("replicas", []) for p in r["processes"]
            if p["state"] == "ready"}


def fork_servers_ok(report: dict) -> set[int]:
    return {r["helpers"]["fork_server"]["pid"] for r in report.get("replicas", [])
            if r.get("helpers", {}).get("fork_server", {}).get("state") == "ok"}


def test_chaos_killing_a_worker_the_fork_server_and_another_replicas_worker():
    pipeline = planner.load_pipeline(model_path="qwen3-tts")
    result = solve_replicas(pipeline, Cluster((Node("local", 0, 4),)), 2, gpus=False,
                            requests=planner.from_options(["vocoder"], []))
    assert result.ok, result.diagnostics
    started = time.monotonic()
    with launch_replicas(result.plan, result.packing, DEVICE,
                         factory_defaults={"size": "tiny"}) as replicas:
        app = create_app(replicas, planner.result_dict(result))
        with served(app, PHASE_S) as url:
            with HealthWatch(url) as health, posting(url) as load:
                wait_until(lambda: sum(o == "ok" for _, o in load.outcomes) >= 6,
                           PHASE_S, "warm-up")
                pids = [d.worker_pids() for d in replicas.replicas]
                dead: list[tuple[float, int]] = []  # (confirmed dead at, pid)

                def kill(pid: int) -> None:
                    os.kill(pid, signal.SIGKILL)
                    wait_until(lambda: gone(pid), PHASE_S, f"pid {pid} to die")
                    dead.append((time.monotonic(), pid))

                def whole() -> bool:
                    report = health.latest()
                    return report.get("status") == "ok" and all(
                        p["pid"] not in {d for _, d in dead}
                        for r in report["replicas"] for p in r["processes"])

                # 1. a worker of replica 0
                kill(pids[0]["vocoder"])
                wait_until(whole, PHASE_S, "replica 0 restarted")
                # 2. the fork server: live workers stay, a new one is started for later spawns
                fork_server = multiprocessing.forkserver._forkserver._forkserver_pid
                kill(fork_server)
                wait_until(lambda: whole() and fork_servers_ok(health.latest())
                           and fork_server not in fork_servers_ok(health.latest()), PHASE_S,
                           "a new fork server")
                assert [d.worker_pids()["pipeline"] for d in replicas.replicas] == \
                    [pids[0]["pipeline"], pids[1]["pipeline"]]  # nobody was taken for dead
                # 3. a worker of replica 1, spawned from the new fork server
                kill(pids[1]["pipeline"])
                wait_until(whole, PHASE_S, "replica 1 restarted")
                after = time.monotonic()
                wait_until(lambda: sum(s > after and o == "ok" for s, o in load.outcomes) >= 6,
                           PHASE_S, "load after the chaos")

        # /health told the truth: no dead worker called ready, no dead fork server called ok.
        for asked, report in health.samples:
            for confirmed, pid in dead:
                if asked > confirmed:
                    assert pid not in ready_pids(report), (pid, report)
                    assert pid not in fork_servers_ok(report), (pid, report)
        outcomes = [o for _, o in load.outcomes]
        print("chaos outcomes:", {o: outcomes.count(o) for o in set(outcomes)})
        assert set(outcomes) <= {"ok", "refused", "aborted"}, sorted(set(outcomes))
        assert outcomes.count("ok") > len(outcomes) // 2
        # Whole again: every process ready, restarts as many as kills, each replica serves.
        final = replicas.health()
        assert final["status"] == "ok"
        assert sorted(p["restarts"] for r in final["replicas"] for p in r["processes"]) == \
            [0, 0, 1, 1]
        for d in replicas.replicas:
            assert d.synthesize(TEXT, timeout=REQUEST_TIMEOUT_S).samples.numel() > 0
    assert time.monotonic() - started < 4 * PHASE_S
