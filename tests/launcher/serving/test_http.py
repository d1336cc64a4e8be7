"""The HTTP front door, in process (Starlette's test client) and as a served subprocess."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import wave

import warnings

import httpx
import pytest

with warnings.catch_warnings():
    # Starlette 1.x suggests httpx2 for its test client; httpx is what the serve extra installs.
    warnings.simplefilter("ignore", UserWarning)
    from starlette.testclient import TestClient

from launcher import launch, standins
from launcher.serving.http import MAX_INPUT_CHARS, create_app
from launcher.control.metric_names import REQUESTS, REQUESTS_IN_FLIGHT, total

from tests.launcher import plans
from tests.launcher.conftest import DEVICE, TINY, pid_alive
from tests.processes import interrupt
from tests.waiting import wait_until

pytestmark = pytest.mark.slow
TEXT = "Hello from the speech endpoint."
# The repository root (tests/launcher/serving/ is three levels down): subprocesses run there.
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def wav_samples(body: bytes) -> tuple[int, bytes]:
    with wave.open(io.BytesIO(body)) as w:
        assert (w.getnchannels(), w.getsampwidth()) == (1, 2)
        return w.getframerate(), w.readframes(w.getnframes())


@pytest.fixture
def client_for():
    opened = []

    def make(plan):
        d = launch(plan, device=DEVICE, factory_defaults=TINY)
        opened.append(d)
        return TestClient(create_app(d, plans.topology(plan)))

    yield make
    for d in opened:
        d.close()


def test_speech_is_the_same_wav_for_declared_and_split_topologies(client_for):
    bodies = []
    for plan in (plans.qwen3(), plans.qwen3("vocoder")):
        client = client_for(plan)
        r = client.post("/v1/audio/speech", json={"model": "tts-1", "input": TEXT,
                                                   "voice": "alice"})
        assert r.status_code == 200 and r.headers["content-type"] == "audio/wav"
        rate, frames = wav_samples(r.content)
        assert rate == 24_000 and len(frames) == 2 * standins.expected_samples(TEXT)
        bodies.append(r.content)
        pcm = client.post("/v1/audio/speech", json={"input": TEXT, "voice": "alice",
                                                    "response_format": "pcm"})
        assert pcm.status_code == 200 and pcm.content == frames
        with client.stream("POST", "/v1/audio/speech",
                           json={"input": TEXT, "voice": "alice", "stream": True}) as s:
            assert s.status_code == 200
            streamed = b"".join(s.iter_bytes())
        assert streamed[44:] == frames and streamed[:4] == b"RIFF"
    assert bodies[0] == bodies[1]


def test_health_topology_and_metrics(client_for):
    plan = plans.qwen3("vocoder")
    client = client_for(plan)
    health = client.get("/health")
    assert health.status_code == 200 and health.json()["status"] == "ok"
    assert {p["name"] for p in health.json()["processes"]} == {"pipeline", "vocoder"}
    assert client.get("/v1/topology").json() == json.loads(json.dumps(plans.topology(plan)))
    client.post("/v1/audio/speech", json={"input": TEXT})
    metrics = client.get("/metrics")
    assert metrics.status_code == 200 and metrics.headers["content-type"].startswith("text/plain")
    assert "# TYPE stage_planner_stage_latency_seconds histogram" in metrics.text
    assert 'stage_planner_process_rss_bytes{process="pipeline"}' in metrics.text


BAD = [
    ({}, 400, "missing_input"),
    ({"input": ""}, 400, "missing_input"),
    ({"input": "   "}, 400, "missing_input"),
    ({"input": 42}, 400, "missing_input"),
    ({"input": "x" * (MAX_INPUT_CHARS + 1)}, 400, "input_too_long"),
    ({"input": "hi", "response_format": "opus"}, 400, "unsupported_response_format"),
    ({"input": "hi", "voice": 3}, 400, "invalid_voice"),
    ({"input": "hi", "stream": "yes"}, 400, "invalid_stream"),
    ([1, 2], 400, "invalid_json"),
]


def test_bad_requests_get_4xx_and_leave_workers_usable(client_for):
    client = client_for(plans.qwen3())
    for body, status, code in BAD:
        r = client.post("/v1/audio/speech", json=body)
        assert (r.status_code, r.json()["error"]["code"]) == (status, code), body
    r = client.post("/v1/audio/speech", content=b"{not json",
                    headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_json"
    r = client.post("/v1/audio/speech", content=b"\xff\xfe", headers={})
    assert r.status_code == 400
    assert client.get("/v1/audio/speech").status_code == 405
    assert client.get("/nope").status_code == 404
    assert client.post("/v1/audio/speech", json={"input": "still fine"}).status_code == 200


def test_stage_error_is_reported_not_hidden(client_for):
    client = client_for(plans.qwen3("preprocessing"))
    r = client.post("/v1/audio/speech", json={"input": TEXT})
    assert r.status_code == 500
    assert "process-local handoff broken" in r.json()["error"]["message"]


def _start_server(*args: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.launcher.serve_main", *args], cwd=ROOT,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    line = proc.stdout.readline()
    match = re.search(r"http://[\d.]+:\d+", line)
    if not match:
        proc.kill()
        raise AssertionError(f"no ready line: {line!r} {proc.stderr.read()}")
    return proc, match.group()


def stop_server(proc: subprocess.Popen, within: float = 60) -> None:
    """Stop a served subprocess as an operator does (SIGTERM: drain, then stop); kill it if it
    has not exited `within` seconds later."""
    interrupt(proc, within, signal.SIGTERM)


def _all_exit(pids, within: float) -> bool:
    return wait_until(lambda: not any(pid_alive(p) for p in pids), within, fail=False)


def _arrived(url: str) -> float:
    """Requests the server has taken in: those in flight plus those finished, from its /metrics."""
    text = httpx.get(f"{url}/metrics", timeout=10).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith((REQUESTS_IN_FLIGHT + " ", REQUESTS_IN_FLIGHT + "{",
                                   total(REQUESTS) + " ", total(REQUESTS) + "{")))


def _wait_arrived(url: str, n: int, within: float = 60) -> None:
    # Wait for the event (the server took the requests in), not for a guess of how long that
    # takes: on a loaded machine the clients can take seconds to connect.
    wait_until(lambda: _arrived(url) >= n, within, f"the server to take in {n} requests")


def test_serve_drains_on_sigterm_and_leaves_nothing_running():
    proc, url = _start_server("vocoder", "paced")
    try:
        workers = [p["pid"] for p in httpx.get(f"{url}/health").json()["processes"]]
        results = []

        def call():
            try:
                r = httpx.post(f"{url}/v1/audio/speech", json={"input": TEXT}, timeout=30)
                results.append(r.status_code)
            except httpx.HTTPError as exc:
                results.append(type(exc).__name__)

        threads = [threading.Thread(target=call) for _ in range(3)]
        for t in threads:
            t.start()
        _wait_arrived(url, len(threads))  # all in the pipeline (each takes ~0.5 s paced)
        proc.send_signal(signal.SIGTERM)
        for t in threads:
            t.join(30)
        assert proc.wait(20) == 0
        assert results == [200, 200, 200]
        assert "SIGTERM: draining" in proc.stderr.read()
        assert _all_exit(workers, within=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_worker_death_and_its_restart_are_printed_on_the_server_console():
    proc, url = _start_server("vocoder")
    try:
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)
        reader.start()
        vocoder = next(p["pid"] for p in httpx.get(f"{url}/health").json()["processes"]
                       if p["name"] == "vocoder")
        os.kill(vocoder, signal.SIGKILL)
        wait_until(lambda: any("worker restarted: vocoder" in line for line in lines), 120,
                   lambda: f"the vocoder's restart in the log: {lines}")
        died = next(line for line in lines if line.startswith("worker died:"))
        assert f"'vocoder' (pid {vocoder}" in died
        assert "was killed by SIGKILL; restarting it (restart 1)" in died
        assert httpx.post(f"{url}/v1/audio/speech", json={"input": TEXT},
                          timeout=60).status_code == 200
    finally:
        stop_server(proc)


def test_serve_reports_a_build_failure_and_exits_non_zero():
    proc = subprocess.run(
        [sys.executable, "-m", "tests.launcher.serve_main", "vocoder", "broken"], cwd=ROOT,
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 3
    assert "could not start" in proc.stderr and "stage 'vocoder'" in proc.stderr
    assert "ready" not in proc.stdout


def test_workers_exit_when_the_server_process_is_killed():
    proc, url = _start_server("vocoder")
    try:
        workers = [p["pid"] for p in httpx.get(f"{url}/health").json()["processes"]]
        assert all(pid_alive(p) for p in workers)
        proc.kill()
        proc.wait(10)
        # The workers notice their parent's death at once; the bound only has to be generous
        # enough for a loaded machine to schedule them (the wait ends as soon as they are gone).
        assert _all_exit(workers, within=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_serve_on_a_taken_port_exits_2_before_starting_workers():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        start = time.monotonic()
        out = subprocess.run([sys.executable, "-m", "planner", "serve", "qwen3-tts", "--port",
                              str(port)], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in out.stderr and "nothing was started" in out.stderr
    assert "ready:" not in out.stdout and "Traceback" not in out.stderr
    assert time.monotonic() - start < 20  # no worker was started and waited for
