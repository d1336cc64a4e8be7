"""Replicas on this machine (`--backend local`): one front door spreads requests by the fewest in
flight, reports every replica, and stops them all; what does not fit is explained before anything
starts."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import planner
from launcher.serving.replica_set import launch_replicas
from planner import Cluster, Node
from planner.api import solve_replicas
from tests.cli import BOTH, run_planner
from tests.launcher.conftest import pid_alive

ROOT = Path(__file__).resolve().parents[2]
TINY = {"size": "tiny"}
TEXT = "replicas share the load"


@pytest.mark.slow
def test_requests_go_to_the_least_busy_replica_and_every_replica_is_reported():
    pipeline = planner.load_pipeline(model_path="qwen3-tts")
    cluster = Cluster((Node("local", 0, 4),))
    result = solve_replicas(pipeline, cluster, 2, gpus=False)
    assert result.ok
    with launch_replicas(result.plan, result.packing, "cpu", factory_defaults=TINY) as replicas:
        # one request held open on each replica: the busy one is never chosen twice in a row
        first = replicas.submit(TEXT, stream=True)
        second = replicas.submit(TEXT, stream=True)
        assert [d.in_flight for d in replicas.replicas] == [1, 1]
        audio = [torch.cat(list(r.chunks(timeout=60))) for r in (first, second)]
        assert torch.equal(audio[0], audio[1])  # the same audio whichever replica answers
        for _ in range(4):  # idle replicas take turns
            replicas.synthesize(TEXT, timeout=60)
        health = replicas.health()
        assert health["status"] == "ok" and health["backend"] == "local"
        assert [r["index"] for r in health["replicas"]] == [0, 1]
        pids = [p["pid"] for r in health["replicas"] for p in r["processes"]]
        assert len(set(pids)) == 2
        text = replicas.metrics_text()
        for i in (0, 1):
            assert f'stage_planner_requests_total{{outcome="ok",replica="{i}"}} 3.0' in text
    assert not [p for p in pids if pid_alive(p)]


@pytest.mark.parametrize("mode", BOTH)
def test_too_many_replicas_for_this_machine_is_explained_and_nothing_starts(mode):
    run = run_planner("serve", "qwen3-tts", "--replicas", "100000", "--port", "0", cwd=str(ROOT),
                      in_process=mode == "in-process", timeout=60)
    assert run.returncode == 1, run.stderr
    assert "error[insufficient-capacity]" in run.stderr
    assert "CPU" in run.stderr  # this machine has no GPUs here: only CPUs count
    assert "ready:" not in run.stdout


@pytest.mark.parametrize("mode", BOTH)
def test_a_ray_address_without_the_ray_backend_is_a_usage_error(mode):
    run = run_planner("serve", "qwen3-tts", "--ray-address", "auto", cwd=str(ROOT),
                      in_process=mode == "in-process", timeout=60)
    assert run.returncode == 2
    assert "--backend ray" in run.stderr and "Traceback" not in run.stderr
