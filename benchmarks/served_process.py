"""A server a benchmark starts beside its load: started in a session of its own, awaited until
it answers, stopped in order; and a `planner serve` child stopped the way an operator does."""

from __future__ import annotations

import http.client
import shlex
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.line_child import BenchFailed

ROOT = Path(__file__).resolve().parents[1]
STOP_S = 60.0  # serve's drain and its workers' exit; past it the benchmark must not hang


def stop(proc: subprocess.Popen, timeout: float = STOP_S) -> None:
    """Ctrl-C (serve drains, then stops its workers), and a kill only if it has not exited
    within the bound."""
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    name: str
    argv: list[str]
    ready_path: str  # GET here answers 200 once it serves
    env: dict[str, str]
    port: int = field(default_factory=free_port)
    cwd: Path = ROOT  # where it starts (`python -m` imports from there first)
    proc: subprocess.Popen | None = None
    log: object = None

    def start(self, timeout_s: float) -> None:
        self.log = tempfile.TemporaryFile(mode="w+")
        # A session of its own: Ctrl-C reaches this script, which stops the servers in order.
        self.proc = subprocess.Popen(self.argv, stdout=self.log, stderr=subprocess.STDOUT,
                                     env=self.env, cwd=self.cwd, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BenchFailed(f"{self.name} exited with code {self.proc.returncode} before "
                                  f"serving ({shlex.join(self.argv)}); check its flags. Its "
                                  f"output: {self.tail()}")
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                conn.request("GET", self.ready_path)
                if conn.getresponse().status == 200:
                    conn.close()
                    return
                conn.close()
            except OSError:
                pass
            time.sleep(0.2)
        raise BenchFailed(f"{self.name} did not serve within {timeout_s:g} s; raise "
                          f"--startup-timeout. Its output: {self.tail()}")

    def tail(self) -> str:
        self.log.seek(0)
        lines = [ln for ln in self.log.read().splitlines() if ln.strip()]
        return " | ".join(lines[-6:]) or "nothing"

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
