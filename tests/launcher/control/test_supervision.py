"""Supervision that survives its own helpers: the fork server's death takes no live worker for
dead, is reported on /health and healed; a supervisor thread that dies fails the deployment."""

from __future__ import annotations

import multiprocessing.forkserver
import os
import signal

import pytest

from launcher import launch

from tests.launcher import plans
from tests.launcher.conftest import DEVICE, TINY, pid_alive
from tests.waiting import wait_until

pytestmark = pytest.mark.slow
TEXT = "The fork server died, and nobody noticed."


def test_killing_the_fork_server_leaves_live_workers_serving_and_is_healed():
    with launch(plans.qwen3("vocoder"), device=DEVICE, factory_defaults=TINY) as d:
        before = d.worker_pids()
        fork_server = multiprocessing.forkserver._forkserver._forkserver_pid
        assert d.health()["helpers"]["fork_server"] == {
            "pid": fork_server, "state": "ok", "restarts": 0}
        os.kill(fork_server, signal.SIGKILL)
        helper = wait_until(lambda: (h := d.health()["helpers"]["fork_server"])["restarts"] == 1
                          and h["state"] == "ok" and h, what="the fork server's restart")
        assert helper["pid"] not in (None, fork_server)
        # The workers were never taken for dead: same processes, still serving.
        assert d.synthesize(TEXT, timeout=60).samples.numel() > 0
        assert d.worker_pids() == before and d.health()["status"] == "ok"
        assert all(p["restarts"] == 0 for p in d.health()["processes"])
        # A worker that dies now is restarted from the new fork server.
        os.kill(before["vocoder"], signal.SIGKILL)
        wait_until(lambda: d.health()["status"] == "ok" and d.worker_pids().get("vocoder")
                 not in (None, before["vocoder"]), what="the vocoder's restart")
        assert d.synthesize(TEXT, timeout=60).samples.numel() > 0
    # Stopped means stopped, though the first workers outlived the fork server that forked them.
    wait_until(lambda: not any(pid_alive(p) for p in before.values()), 10, "the old workers' exit")


def test_a_supervisor_thread_that_dies_fails_the_deployment_and_says_why():
    with launch(plans.qwen3(), device=DEVICE, factory_defaults=TINY) as d:
        sup = d._supervisor

        def broken(timeout):
            raise RuntimeError("a bug in the event loop")

        sup.backend.events = broken
        assert d.failed.wait(10)
        health = d.health()
        assert health["status"] == "failed"
        assert "supervisor thread died: RuntimeError: a bug in the event loop" in health["error"]
        with pytest.raises(Exception) as refused:
            d.submit(TEXT)
        assert getattr(refused.value, "status", None) == 503
