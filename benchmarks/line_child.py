"""A helper program a benchmark runs as a child process and speaks to in JSON lines: one line
asked on its stdin, one answered on its stdout; its stderr is kept for the message when it fails.
peer_piper.py's in-process voice graph and peer_hibari.py's library processes are such
children."""

from __future__ import annotations

import json
import shlex
import subprocess
import tempfile
from pathlib import Path
from typing import Any


class BenchFailed(Exception):
    """What stops a benchmark's run, said for the user (exit 2): a server that will not serve, a
    venv pip cannot fill, a helper process that failed, a bench run that failed."""


class LineChild:
    def __init__(self, argv: list[str], what: str, cwd: Path, **popen: Any) -> None:
        self.argv, self.what = argv, what
        self.log = tempfile.TemporaryFile(mode="w+")
        # A session of its own: a Ctrl-C reaches the benchmark, which stops its children.
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log, text=True, cwd=cwd,
                                     start_new_session=True, **popen)

    def send(self, message: dict) -> None:
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def reply(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            self.log.seek(0)
            tail = " | ".join(self.log.read().splitlines()[-6:])
            raise BenchFailed(f"{self.what} ({shlex.join(self.argv)}) failed: "
                              f"{tail or 'it printed nothing'}")
        return json.loads(line)

    def stop(self) -> None:
        """Its stdin closed (it ends when its input does), then killed if it has not ended."""
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
