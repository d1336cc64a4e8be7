"""Replicas on a local multi-node Ray cluster (`ray.cluster_utils.Cluster`, started once for this
module): nodes declare GPUs by count, so placement is exercised without real GPUs, and the
stages run on CPU as they do on any machine without CUDA."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
import torch

ray = pytest.importorskip("ray", reason="the [ray] extra is not installed")
from ray.cluster_utils import Cluster as RayCluster
from ray.util import placement_group_table

import planner
from launcher import launch
from launcher.backends.ray_backend import RaySession
from launcher.serving.replica_set import launch_replicas
from planner.api import solve_replicas
from tests.launcher.conftest import pid_alive
from tests.models import needs
from tests.scale.test_router import assert_no_new_request_fails
from tests.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.ray]
TINY = {"size": "tiny"}
TEXTS = ["hello from a replica", "a second, longer sentence for the other one"]


@pytest.fixture(scope="module")
def cluster():
    """A head without resources and two worker nodes with 2 GPUs and 4 CPUs each."""
    c = RayCluster(initialize_head=True, head_node_args={"num_cpus": 0})
    for _ in range(2):
        c.add_node(num_cpus=4, num_gpus=2)
    c.wait_for_nodes()
    ray.init(address=c.address, logging_level="ERROR", log_to_driver=False)
    yield c
    ray.shutdown()
    c.shutdown()


def _pg_states() -> dict[str, str]:
    return {k: v["state"] for k, v in placement_group_table().items()}


def _stage_planner_actors() -> list[str]:
    return [a["name"] for a in ray.util.list_named_actors(all_namespaces=True)
            if a["name"].startswith("stage-planner-")]


# Its own bound, over the suite's 300 s: beside two busy loops a Ray actor's restart alone took
# minutes (the wait for it, below, is bounded by 240 s).
@pytest.mark.timeout(600)
def test_replicas_run_where_planned_share_gpus_as_planned_survive_a_killed_actor_and_stop_clean(
        cluster):
    session = RaySession(cluster.address)
    nodes = session.cluster()
    result = solve_replicas(planner.load_pipeline(model_path="higgs-tts"), nodes, 2, "spread")
    assert result.ok
    planned = {r.index: r.node for r in result.packing.replicas}
    assert len(set(planned.values())) == 2  # spread: one per worker node
    ray_id = {n.name: n.ray_id for n in nodes.nodes}
    before = set(_pg_states())

    replicas = launch_replicas(result.plan, result.packing, "cpu", backend="ray",
                               session=session, cluster=nodes, factory_defaults=TINY)
    try:
        health = replicas.health()
        assert health["status"] == "ok" and health["backend"] == "ray"
        used: dict[tuple[str, str], float] = {}
        for report in health["replicas"]:
            procs = report["processes"]
            # on the node the planner chose
            assert {p["node"] for p in procs} == {ray_id[planned[report["index"]]]}
            # the three processes of logical GPU 0 were given one and the same GPU by Ray
            (gpu_ids,) = {tuple(p["ray_gpu_ids"]) for p in procs}
            assert len(gpu_ids) == 1
            key = (procs[0]["node"], gpu_ids[0])
            used[key] = used.get(key, 0.0) + result.plan.gpus[0].total
        assert all(total <= result.plan.gpus[0].limit for total in used.values()), used

        # every replica answers, with the audio the local backend gives
        with launch(result.plan, device="cpu", factory_defaults=TINY) as local:
            expected = [local.synthesize(t, timeout=60).samples for t in TEXTS]
        for d in replicas.replicas:
            for text, want in zip(TEXTS, expected):
                assert torch.equal(d.synthesize(text, timeout=60).samples, want)

        # A killed actor is restarted like a dead local worker: under load from three clients,
        # no request sent after the kill fails (the other replica takes them), and the replica
        # comes back as a new actor with a new process and serves the same audio again.
        victim = replicas.replicas[0]
        old = victim.health()["processes"][1]

        def kill() -> None:
            ray.kill(ray.get_actor(old["ray_actor_name"]))
            wait_until(lambda: not pid_alive(old["pid"]), 60, "the actor's death")

        # Generous: a new actor imports torch and builds its stages; with other work on the two
        # cores that took over 60 s once.
        assert_no_new_request_fails(replicas, kill, restart_s=240)
        now = victim.health()["processes"][1]
        assert now["state"] == "ready" and now["restarts"] == 1
        assert now["pid"] != old["pid"] and now["ray_actor_id"] != old["ray_actor_id"]
        assert torch.equal(victim.synthesize(TEXTS[0], timeout=60).samples, expected[0])
        pids = [p["pid"] for r in replicas.health()["replicas"] for p in r["processes"]]
    finally:
        replicas.close()
    assert not _stage_planner_actors()
    assert all(state == "REMOVED" for pg, state in _pg_states().items() if pg not in before)
    # Ray reaps a killed actor's process on its own time: on a busy machine seconds later.
    wait_until(lambda: not [p for p in pids if pid_alive(p)], 60, fail=False)
    assert not [p for p in pids if pid_alive(p)]


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _planner(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "planner", *args], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"}, **kw)


def test_more_replicas_than_the_ray_cluster_holds_are_explained_before_ray_is_asked(cluster):
    before = _pg_states()
    proc = _planner("serve", "higgs-tts", "--replicas", "5", "--backend", "ray",
                    "--ray-address", cluster.address, "--port", "0")
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    # 4 CPUs a node and 3 processes a replica: the CPUs run out first, at one replica a node
    assert "error[insufficient-capacity]" in err and "at most 2 do" in err, err
    assert "--replicas 2" in err
    assert _pg_states() == before and not _stage_planner_actors()


def test_planner_serve_on_ray_answers_over_http_and_ctrl_c_removes_everything(cluster):
    import re
    import signal

    import httpx

    before = set(_pg_states())
    proc = _planner("serve", "qwen3-tts", "--replicas", "2", "--backend", "ray",
                    "--ray-address", cluster.address, "--port", "0")
    try:
        for line in proc.stdout:
            if line.startswith("ready:"):
                break
        url = re.search(r"http://[\d.]+:\d+", line).group()
        assert "2 replicas on ray" in line
        r = httpx.post(f"{url}/v1/audio/speech", json={"input": TEXTS[0]}, timeout=60)
        assert r.status_code == 200 and r.content[:4] == b"RIFF"
        health = httpx.get(f"{url}/health").json()
        assert [rep["status"] for rep in health["replicas"]] == ["ok", "ok"]
        assert all(p["ray_actor_id"] for rep in health["replicas"] for p in rep["processes"])
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not _stage_planner_actors()
    assert all(state == "REMOVED" for pg, state in _pg_states().items() if pg not in before)


@needs.speech
@needs.espeak
def test_the_real_voice_on_ray_answers_the_bytes_it_answers_locally(cluster):
    """piper-joe (onnxruntime, an espeak-ng child) in Ray actors: the same WAV bytes as the local
    backend gives for the same request (the module's cluster: no Ray of its own to start)."""
    import re

    import httpx
    from starlette.testclient import TestClient

    from launcher.serving.http import create_app
    from tests.models.piper.sentences import SENTENCES

    body = {"model": "piper-joe", "input": SENTENCES[2], "voice": "joe"}
    plan = planner.solve("piper-joe").plan
    with launch(plan, device="cpu", startup_timeout=300) as local:
        want = TestClient(create_app(local, {"model": plan.model})).post(
            "/v1/audio/speech", json=body)
    assert want.status_code == 200, want.text
    proc = _planner("serve", "piper-joe", "--backend", "ray", "--ray-address", cluster.address,
                    "--isolate-stage", "vocoder", "--port", "0")
    try:
        line = ""
        for line in proc.stdout:
            if line.startswith("ready:"):
                break
        assert line.startswith("ready:"), proc.stderr.read()
        url = re.search(r"http://[\d.]+:\d+", line).group()
        r = httpx.post(f"{url}/v1/audio/speech", json=body, timeout=120)
        assert r.status_code == 200, r.text
        assert r.content == want.content
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not _stage_planner_actors()
