"""One placement served over HTTP in a child process, as `planner serve` would serve it.

The child re-solves the same requests (the solver is deterministic) and runs
`launcher.serving.serve.serve` on a free port; the ready file it writes then gives the URL. Run as
`python -m planner.app.bench.server SPEC_JSON READY_FILE`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass

import httpx

from planner.app.bench.exits import EXIT_RUN_FAILED, BenchError

STOP_TIMEOUT_S = 20.0


class ServerFailed(BenchError):
    """The placement could not be served, which stops the comparison (exit 3); `why` quotes the
    server's own error."""

    def __init__(self, why: str) -> None:
        super().__init__(f"a placement could not be served, so the comparison stopped: {why}",
                         EXIT_RUN_FAILED)


@dataclass(frozen=True)
class ServerSpec:
    model_path: str | None
    config: str | None
    variant: str | None
    requests: tuple[dict, ...]  # placement requests as `planner.request_dict` writes them
    device: str
    stand_in_size: str | None  # offered to stand-in factories as `size`; None = their default


@dataclass(frozen=True)
class Started:
    url: str
    pid: int
    startup_s: float  # spawn to ready line: interpreter, solve, workers built, port bound


class Server:
    """Context manager: start on enter, stop (SIGTERM, then SIGKILL) on exit, always."""

    def __init__(self, spec: ServerSpec, startup_timeout: float = 300.0) -> None:
        self.spec = spec
        self.startup_timeout = startup_timeout
        self._proc: subprocess.Popen[str] | None = None
        self._lifeline: int | None = None
        self._stderr = tempfile.TemporaryFile(mode="w+")
        self._dir = tempfile.TemporaryDirectory(prefix="planner-bench-")
        self._ready_file = os.path.join(self._dir.name, "ready.json")

    def start(self) -> Started:
        t0 = time.monotonic()
        # Its own session: a Ctrl-C in the bench's terminal reaches the bench, which stops the
        # server in order, rather than every process at once.
        # A lifeline: the child holds the read end, and end of file there (this process gone,
        # even by SIGKILL) stops it as SIGTERM would; in its own session, nothing else would.
        lifeline, self._lifeline = os.pipe()
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "planner.app.bench.server", json.dumps(asdict(self.spec)),
                 self._ready_file, str(lifeline)],
                stdout=subprocess.DEVNULL, stderr=self._stderr, text=True,
                start_new_session=True, pass_fds=(lifeline,), cwd=os.getcwd(),
                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        finally:
            os.close(lifeline)
        waiting = threading.Event()
        while not os.path.exists(self._ready_file):
            waiting.wait(0.05)
            if self._proc.poll() is not None:
                raise ServerFailed(self._failure_text())
            if time.monotonic() - t0 > self.startup_timeout:
                raise ServerFailed(f"not ready after {self.startup_timeout:g} s. "
                                   + self._failure_text())
        startup = time.monotonic() - t0
        with open(self._ready_file, encoding="utf-8") as f:
            url = json.load(f)["url"]
        health = httpx.get(f"{url}/health", timeout=10.0)
        if health.status_code != 200:
            raise ServerFailed(f"ready, but /health answered {health.status_code}: {health.text}")
        return Started(url=url, pid=self._proc.pid, startup_s=startup)

    def _failure_text(self) -> str:
        self._stderr.seek(0)
        lines = [ln for ln in self._stderr.read().splitlines() if ln.strip()]
        errors = [ln for ln in lines if ln.startswith("error:")]
        shown = errors or lines[-5:]
        code = self._proc.returncode if self._proc else None
        return (f"the server exited with code {code}: " if code is not None else "") + (
            " ".join(shown) or "it printed nothing")

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                # Workers exit on their own once the supervisor's control pipes close.
                proc.kill()
                proc.wait(5.0)
        if self._lifeline is not None:
            os.close(self._lifeline)
            self._lifeline = None
        self._stderr.close()
        self._dir.cleanup()

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _stop_when_gone(lifeline: int) -> None:
    """SIGTERM this process (serve's orderly stop) once the bench that started it is gone."""
    os.set_inheritable(lifeline, False)  # the workers must not hold the bench's lifeline

    def watch() -> None:
        while os.read(lifeline, 1):  # only end of file (the bench gone) ends the wait
            pass
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="bench-lifeline", daemon=True).start()


def _main(raw: str, ready_file: str, lifeline: int | None = None) -> int:
    if lifeline is not None:
        _stop_when_gone(lifeline)
    # The plan always runs on the local backend's fork server: its preload (torch, seconds) runs
    # while this process imports torch and solves, instead of after.
    from launcher.backends import forkserver

    forkserver.start_early()
    import planner
    from launcher.serving.serve import serve

    fields = json.loads(raw)
    spec = ServerSpec(**{**fields, "requests": tuple(fields["requests"])})
    result = planner.solve(model_path=spec.model_path, config=spec.config, variant=spec.variant,
                           requests=[planner.request_from_dict(r) for r in spec.requests])
    if not result.ok:
        first = result.diagnostics[0].message if result.diagnostics else result.status
        print(f"error: placement does not solve: {first}", file=sys.stderr, flush=True)
        return 2
    defaults = {"size": spec.stand_in_size} if spec.stand_in_size else {}
    return serve(result.plan, planner.result_dict(result), host="127.0.0.1", port=0,
                 device=spec.device, drain_timeout=5.0, factory_defaults=defaults,
                 ready_file=ready_file)


if __name__ == "__main__":
    from planner.app.quick_exit import exit_now

    exit_now(_main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else None))
