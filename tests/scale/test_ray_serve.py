"""`serve run FILE` on a local Ray cluster (one for this module) with the file `planner solve
--format ray-serve` writes for piper-joe: the file passes Ray Serve's own schema, the deployments
Ray runs are the plan's process groups with the replicas, CPUs and GPUs the file asks, and the
answers of /v1/audio/speech and /dev/captioned_speech (whole and streamed: the same audio, words
and times) and /v1/models are `planner serve`'s, bit for bit.
Everything it started is gone afterwards."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import yaml

ray = pytest.importorskip("ray", reason="the [ray] extra is not installed")
serve_schema = pytest.importorskip("ray.serve.schema", reason="ray[serve] is not installed")
from ray.cluster_utils import Cluster as RayCluster

import planner
from launcher import launch
from launcher.serving.http import create_app
from tests.cli import run_planner
from tests.launcher.conftest import descendants
from tests.models import needs
from tests.processes import gone
from tests.waiting import wait_until

with warnings.catch_warnings():
    warnings.simplefilter("ignore", UserWarning)  # Starlette's note about httpx2
    from starlette.testclient import TestClient

pytestmark = [pytest.mark.slow, pytest.mark.ray, needs.speech, needs.espeak]
ROOT = str(Path(__file__).resolve().parents[2])
# Two process groups with a streamed handoff between them, the second in two copies.
FLAGS = ("--isolate-stage", "vocoder", "--process-copies", "vocoder=2")
TEXT = "Placement must not change the audio. Nor must the engine that runs it."
CPUS = 3  # what the deployments ask: pipeline 1, two vocoder copies 1 each, the front door 0


# Ray Serve gives its HTTP proxy 5 s to say it is ready, three times, then kills it and
# `serve run` fails: on a machine busy with other work (this suite's other worker, or more) the
# proxy's start takes longer. Its processes read these from the environment the cluster starts in.
PATIENT_PROXY = {"RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S": "60",
                 "RAY_SERVE_PROXY_HEALTH_CHECK_TIMEOUT_S": "60"}


@pytest.fixture(scope="module")
def cluster():
    with pytest.MonkeyPatch.context() as env:
        for name, value in PATIENT_PROXY.items():
            env.setenv(name, value)
        c = RayCluster(initialize_head=True, head_node_args={"num_cpus": CPUS})
        c.wait_for_nodes()
        yield c
        c.shutdown()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _post(port: int, path: str, body: dict) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request("POST", path, json.dumps(body),
                     {"content-type": "application/json"})
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def _get(port: int, path: str) -> tuple[int, bytes] | None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, r.read()
    except OSError:
        return None
    finally:
        conn.close()


def _without_times(models: bytes) -> list[dict]:
    """The model list but `created` (when that server started)."""
    return [{k: v for k, v in m.items() if k != "created"} for m in json.loads(models)["data"]]


SPEECH, CAPTIONED = "/v1/audio/speech", "/dev/captioned_speech"
REQUESTS = [  # whole, streamed, one that fails validation, and captioned whole and streamed
    (SPEECH, {"model": "piper-joe", "input": TEXT, "voice": "joe"}),
    (SPEECH, {"input": TEXT, "voice": "joe", "response_format": "pcm", "stream": True}),
    (SPEECH, {"input": "?!", "voice": "joe"}),
    (CAPTIONED, {"input": TEXT, "voice": "joe", "stream": False}),
    (CAPTIONED, {"input": TEXT, "voice": "joe", "response_format": "pcm"}),
]


def _planner_serve(plan, topology) -> tuple[list[tuple[int, bytes]], bytes]:
    """What `planner serve`'s front door answers, over the local launcher."""
    with launch(plan, device="cpu", startup_timeout=300) as d:
        client = TestClient(create_app(d, topology))
        answers = [(r.status_code, r.content)
                   for r in (client.post(path, json=b) for path, b in REQUESTS)]
        return answers, client.get("/v1/models").content


@pytest.mark.timeout(900)
def test_serve_run_starts_the_planned_deployments_and_answers_as_planner_serve(
        cluster, tmp_path):
    written = run_planner("solve", "piper-joe", *FLAGS, "--format", "ray-serve")
    assert written.returncode == 0, written.stderr
    config = yaml.safe_load(written.stdout)
    serve_schema.ServeDeploySchema.model_validate(config)  # Ray Serve's own check
    port = _free_port()
    config["http_options"]["port"] = port
    path = tmp_path / "serve.yaml"
    path.write_text(yaml.safe_dump(config))
    (app,) = config["applications"]
    asked = {d["name"]: d for d in app["deployments"]}

    result = planner.solve("piper-joe", requests=planner.parse_flags(FLAGS))
    expected, models = _planner_serve(result.plan, planner.result_dict(result))
    assert [status for status, _ in expected] == [200, 200, 400, 200, 200]

    env = dict(os.environ, **PATIENT_PROXY, PYTHONPATH=os.pathsep.join(
        p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
    serve_cli = str(Path(sys.executable).with_name("serve"))
    proc = subprocess.Popen([serve_cli, "run", "--address", cluster.address, str(path)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    replicas: list[dict] = []
    try:
        # Ray starts, imports the application, builds every replica's stages: a minute or more
        # on a busy machine.
        wait_until(lambda: proc.poll() is not None or (_get(port, "/v1/models") or (0,))[0]
                   == 200, 600, "the application to answer GET /v1/models")
        assert proc.poll() is None, proc.stderr.read()
        status, listed = _get(port, "/v1/models")
        assert status == 200 and _without_times(listed) == _without_times(models)
        for (where, body), want in zip(REQUESTS, expected):
            assert _post(port, where, body) == want, (where, body)

        ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
        from ray import serve
        from ray.util.state import list_actors

        status = serve.status().applications[app["name"]]
        assert set(status.deployments) == set(asked) == {"front_door", "pipeline", "vocoder"}
        assert {n: d.replica_states for n, d in status.deployments.items()} == {
            n: {"RUNNING": d["num_replicas"]} for n, d in asked.items()}
        assert asked["vocoder"]["num_replicas"] == 2  # its copies
        replicas = [a for a in list_actors(filters=[("state", "=", "ALIVE")], detail=True)
                    if a.class_name.startswith(f"ServeReplica:{app['name']}:")]
        for actor in replicas:
            want = asked[actor.class_name.rsplit(":", 1)[1]]["ray_actor_options"]
            resources = {"CPU": want["num_cpus"], "GPU": want.get("num_gpus", 0)}
            assert actor.required_resources == {k: v for k, v in resources.items() if v}
        assert len(replicas) == sum(d["num_replicas"] for d in asked.values())
        pids = {a.pid for a in replicas}
        pids |= {c for p in pids for c in descendants(p)}  # the espeak-ng child among them
    finally:
        if ray.is_initialized():
            ray.shutdown()
        proc.send_signal(signal.SIGINT)  # `serve run` shuts the application down
        proc.wait(120)
    wait_until(lambda: all(gone(p) for p in pids), 120, "the replicas' processes to exit")
