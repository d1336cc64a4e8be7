"""Failures are visible where they happen, on `planner serve`'s stderr: a stage that raises is
logged by its worker with the traceback, and by the supervisor naming the stage, the request and
the process, and counted on /metrics; a stream its client abandons logs no error."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading

import httpx
import pytest

from launcher.control.metric_names import STAGE_FAILURES, total

from tests.launcher.serving.test_http import stop_server
from tests.waiting import wait_until

pytestmark = pytest.mark.slow
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SPEECH = "/v1/audio/speech"
# A stream of 30 chunks, 0.1 s apart, from process `pipeline` to a stage of process `speaker`
# that raises on any text with "fail" in it.
CONFIG = """\
name: failing
stages:
  - {name: gen, process: pipeline, next: out, stream_to: [out],
     factory: "launcher.synthetic:stage", args: {device_ms: 3000, chunks: 30}}
  - {name: out, process: speaker, terminal: true,
     factory: "tests.launcher.factories:failing_audio"}
process_safe_edges: [[gen, out]]
"""
RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (?P<level>[A-Z]+) (?P<rest>.*)$")


def _records(stderr: str) -> list[tuple[str, str]]:
    """(level, text) of each log record on stderr, a traceback with the record it follows."""
    out: list[tuple[str, str]] = []
    for line in stderr.splitlines():
        if (m := RECORD.match(line)) is not None:
            out.append((m["level"], m["rest"]))
        elif out and not line.startswith(("ready:", "worker ", "SIGTERM", "note:")):
            out[-1] = (out[-1][0], out[-1][1] + "\n" + line)
    return out


def test_a_stage_failure_is_logged_where_it_happens_and_an_abandoned_stream_is_not(tmp_path):
    config = tmp_path / "failing.yaml"
    config.write_text(CONFIG)
    proc = subprocess.Popen(
        [sys.executable, "-m", "planner", "serve", "--config", str(config), "--port", "0",
         "--log-level", "warning"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env={**os.environ, "PYTHONUNBUFFERED": "1",
                        "PYTHONPATH": os.pathsep.join(filter(None, [
                            ROOT, os.environ.get("PYTHONPATH")]))})
    err: list[str] = []
    reader = threading.Thread(target=lambda: err.extend(proc.stderr), daemon=True)
    reader.start()
    try:
        url = None
        for line in proc.stdout:  # the plan's table, then the ready line
            if (m := re.search(r"^ready: .* on (http://[\d.]+:\d+)", line)) is not None:
                url = m[1]
                break
        assert url is not None, "".join(err)
        pids = httpx.get(f"{url}/health", timeout=30).json()["processes"]
        speaker = next(p["pid"] for p in pids if p["name"] == "speaker")

        # A client that reads the first audio of its stream, then goes away.
        with httpx.stream("POST", url + SPEECH, timeout=60, json={
                "input": "keep talking", "stream": True, "response_format": "pcm"}) as r:
            assert r.status_code == 200
            next(r.iter_raw())
        wait_until(lambda: httpx.get(f"{url}/health", timeout=30).json()["in_flight"] == 0, 60,
                   "the abandoned stream to be dropped")

        r = httpx.post(url + SPEECH, json={"input": "please fail"}, timeout=60)
        assert r.status_code == 500
        assert "stage 'out' in process 'speaker' failed: RuntimeError" in r.json()["error"][
            "message"]
        assert "Traceback" not in r.text  # for the operator, not for clients
        exposed = httpx.get(f"{url}/metrics", timeout=30).text
        assert f'{total(STAGE_FAILURES)}{{process="speaker",stage="out"}} 1.0' in exposed
    finally:
        stop_server(proc)
        reader.join(30)

    records = _records("".join(err))
    assert any(text.startswith("launcher.serving.http: client disconnected during POST")
               for level, text in records if level == "WARNING"), err
    errors = [text for level, text in records if level in ("ERROR", "CRITICAL")]
    assert len(errors) == 2, "".join(err)  # the failure, once where it happened, once named
    worker, supervisor = sorted(errors, key=lambda text: not text.startswith("worker"))
    request = re.search(r"failed request (\d+)", supervisor)[1]
    # The worker's record, with its traceback down to the line that raised.
    assert worker.startswith(f"worker speaker (pid {speaker}) launcher.worker.stages: stage "
                             f"'out' failed request {request}\nTraceback (most recent call last)")
    assert "tests/launcher/factories.py" in worker and "in run" in worker
    assert worker.endswith("RuntimeError: cannot say 'fail': the voice file went missing")
    # The supervisor's: stage, request and process named.
    assert supervisor.startswith(
        f"launcher.control.supervisor: stage 'out' in process 'speaker' (pid {speaker}) failed "
        f"request {request}: RuntimeError: cannot say 'fail'")
