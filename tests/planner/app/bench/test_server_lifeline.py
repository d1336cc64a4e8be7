"""A bench that is killed leaves no server running: `kill` (SIGTERM) unwinds it, stopping its
server in order; SIGKILL gives it no chance, and the server stops by itself when its bench's
lifeline closes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from tests.waiting import running, wait_until

pytestmark = pytest.mark.slow
MODEL = "Qwen/Qwen3-TTS-12Hz-0.6B-Base"

STARTS_A_SERVER = f"""
import json, sys
from planner.app.bench.server import Server, ServerSpec
server = Server(ServerSpec({MODEL!r}, None, None, (), "cpu", "tiny"))
started = server.start()
print(json.dumps({{"pid": started.pid}}), flush=True)
sys.stdin.read()  # until the test kills this process
"""


def _server_children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parent = int(f.read().rsplit(")", 1)[1].split()[1])
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    cmdline = f.read()
            except OSError:
                continue
            if parent == pid and b"planner.app.bench.server" in cmdline:
                found.append(int(entry))
    return found


def test_a_server_whose_bench_was_killed_stops_by_itself():
    bench = subprocess.Popen([sys.executable, "-c", STARTS_A_SERVER], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        line = bench.stdout.readline()
        assert line, "the server never started"
        server = json.loads(line)["pid"]
        assert running(server)
        bench.kill()
        bench.wait(60)
        wait_until(lambda: not running(server), 60, "the orphaned server to stop")
    finally:
        if bench.poll() is None:
            bench.kill()


def test_sigterm_stops_bench_and_the_server_it_started(tmp_path):
    bench = subprocess.Popen(
        [sys.executable, "-m", "planner", "bench", MODEL, "--stand-in-size", "tiny",
         "--device", "cpu", "--duration", "600", "--concurrency", "1",
         "--output", str(tmp_path / "out")],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        servers = wait_until(lambda: _server_children(bench.pid), 180, "bench's first server")
        bench.send_signal(signal.SIGTERM)
        assert bench.wait(120) == 128 + signal.SIGTERM
        wait_until(lambda: not any(map(running, servers)), 60, "bench's server to stop")
        assert "Traceback" not in bench.stderr.read()
    finally:
        if bench.poll() is None:
            bench.kill()
