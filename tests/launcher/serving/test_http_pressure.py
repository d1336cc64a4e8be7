"""The HTTP front door under pressure, served for real (uvicorn, httpx): a stream cut by a worker's
death is aborted, not completed; partial requests are closed within the read timeouts."""

from __future__ import annotations

import os
import signal

import httpx
import pytest

from tests.launcher.serving.test_http import _start_server

pytestmark = pytest.mark.slow
LONG = "This sentence goes on for a while, so that the stream lasts long enough. " * 5


def test_a_stream_cut_by_a_worker_death_is_aborted_so_the_client_raises():
    proc, url = _start_server("vocoder", "paced")
    try:
        health = httpx.get(f"{url}/health").json()
        engine = next(p["pid"] for p in health["processes"] if p["name"] == "pipeline")
        received = 0
        with pytest.raises(httpx.RemoteProtocolError), httpx.stream(
                "POST", f"{url}/v1/audio/speech", json={"input": LONG, "stream": True},
                timeout=30) as r:
            assert r.status_code == 200
            for part in r.iter_raw():
                if not received:
                    os.kill(engine, signal.SIGKILL)
                received += len(part)
        assert received > 44  # the header and some audio came before the cut
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        finally:
            if proc.poll() is None:
                proc.kill()
