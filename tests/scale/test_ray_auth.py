"""`--cluster ray` / `--ray-address` against a Ray cluster with token authentication: one paragraph
that says so, at once, exit 2 (not "no running Ray cluster" after 20 s of Ray's warnings)."""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="the [ray] extra is not installed")
from ray.exceptions import AuthenticationError

import planner
from launcher.backends.ray_cluster import cluster_from_ray, ray_auth_problem
from tests.waiting import running, wait_until

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def listening_head():
    """Something listening where the head would be, so the check asks Ray's client."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        yield f"127.0.0.1:{s.getsockname()[1]}"


def test_a_token_refusal_is_explained_as_such(listening_head, monkeypatch):
    import ray._raylet

    def refuse(*args, **kwargs):
        raise AuthenticationError("RPC error: InvalidAuthToken: Authentication token is missing "
                                  "or incorrect. Note: ...")

    monkeypatch.setattr(ray._raylet, "GcsClient", refuse)
    monkeypatch.setattr("ray._private.services.canonicalize_bootstrap_address",
                        lambda addr, temp_dir=None: addr)
    problem = ray_auth_problem(listening_head)
    assert problem is not None
    assert "requires token authentication" in problem and "RAY_AUTH_TOKEN" in problem
    assert "InvalidAuthToken: Authentication token is missing or incorrect" in problem
    with pytest.raises(planner.ConfigError, match="requires token authentication"):
        cluster_from_ray(listening_head)


def test_no_cluster_listening_is_not_called_an_authentication_problem(monkeypatch):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        free = f"127.0.0.1:{s.getsockname()[1]}"
    monkeypatch.setattr("ray._private.services.canonicalize_bootstrap_address",
                        lambda addr, temp_dir=None: addr)
    assert ray_auth_problem(free) is None


@pytest.mark.slow
@pytest.mark.ray
def test_solve_and_serve_against_a_real_token_auth_cluster(tmp_path):
    """A real head started with RAY_AUTH_MODE=token (its own token file, its own temp dir)."""
    token = tmp_path / "token"
    token.write_text(secrets.token_hex(32))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    head_env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token)}
    ray_cli = str(Path(sys.executable).with_name("ray"))
    # A short temp dir of its own: Ray's socket paths must fit in 107 bytes.
    temp_dir = Path(tempfile.mkdtemp(prefix="rayauth-"))
    try:
        started = subprocess.run(
            [ray_cli, "start", "--head", f"--port={port}", "--node-ip-address=127.0.0.1",
             f"--temp-dir={temp_dir}", "--num-cpus=1", "--include-dashboard=false",
             "--disable-usage-stats"], env=head_env, capture_output=True, text=True,
            timeout=180, check=False)
        assert started.returncode == 0, started.stderr
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
        env["RAY_ADDRESS"] = f"127.0.0.1:{port}"
        # Both commands at once against the one head (each spends its seconds importing and
        # then asking the head; neither changes it), each checked on its own.
        t0 = time.monotonic()
        procs = [subprocess.Popen([sys.executable, "-m", "planner", *args], cwd=ROOT, env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for args in (["solve", "qwen3-tts", "--cluster", "ray", "--replicas", "1"],
                              ["serve", "qwen3-tts", "--backend", "ray", "--ray-address",
                               f"127.0.0.1:{port}", "--replicas", "1", "--port", "0"])]
        try:
            outs = [(p.communicate(timeout=120), p.returncode) for p in procs]
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        for (stdout, stderr), code in outs:
            assert code == 2, stdout + stderr
            text = " ".join((stdout + stderr).split())
            assert "requires token authentication" in text and "no running Ray" not in text
            assert "Traceback" not in stderr
        assert time.monotonic() - t0 < 60  # at once, not after Ray's retries
    finally:
        _stop_head(temp_dir)
        shutil.rmtree(temp_dir, ignore_errors=True)


def _stop_head(temp_dir: Path) -> None:
    """Stop this test's head only (`ray stop` would stop every Ray process on the machine): the
    processes whose command line names its temp dir; its workers follow their raylet."""
    import signal

    ours = {}
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if entry.isdigit() and str(temp_dir).encode() in cmdline:
            ours[int(entry)] = cmdline
    # In this order each exits on SIGTERM at once: the autoscaler's monitor while the GCS is
    # still there to tell (after it, it hung past 15 s), then the raylet, then the GCS (SIGTERM
    # to all at once left these two running for over 15 s too), then the rest.
    first = (b"autoscaler/_private/monitor.py", b"raylet/raylet", b"gcs_server")

    def rank(pid: int) -> int:
        return next((i for i, name in enumerate(first) if name in ours[pid]), len(first))

    for pid in sorted(ours, key=rank):
        _signal_and_wait([pid], signal.SIGTERM)
    _signal_and_wait([p for p in ours if running(p)], signal.SIGKILL)  # any SIGTERM left


def _signal_and_wait(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
    wait_until(lambda: not any(running(p) for p in pids), 15, fail=False)
