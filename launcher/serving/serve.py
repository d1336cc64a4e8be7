"""`serve(plan, ...)`: launch a plan, put the HTTP front door on it, run until a signal.

Exit codes: 0 after a clean stop (SIGINT/SIGTERM), `EXIT_BAD_ADDRESS` (2) when host:port cannot be
listened on (a host that does not resolve, a port outside 0-65535 or taken; checked before any
worker starts) or when a stage needs something not installed (`preflight`: e.g. the espeak-ng
program; nothing started), `EXIT_LAUNCH_FAILED` (3) when the workers could not start, `EXIT_RUNTIME_FAILED`
(4) when the deployment gave up (restart limit). (1 and 2 are also `planner solve`'s infeasible and
invalid results.)

Logging: with `log_level`, this process and its workers log at that level to stderr
(`launcher.logs`), uvicorn's own records too; without it, logging is left as the caller set it.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any, TextIO

import uvicorn

from launcher import logs
from launcher.serving.console import WorkerWatch
from launcher.deployment import launch
from launcher.errors import LaunchError
from launcher.facade import DeploymentFacade
from launcher.serving.http import create_app
from launcher.serving.http_timeouts import KEEP_ALIVE_S, guarded
from launcher.control.preflight import SetupError, check

EXIT_OK = 0
EXIT_BAD_ADDRESS = 2
EXIT_MISSING_SETUP = 2  # a stage needs something not installed (`preflight`)
EXIT_LAUNCH_FAILED = 3
EXIT_RUNTIME_FAILED = 4
DRAIN_TIMEOUT_S = 30.0
# How often the console looks at the workers, and the server at its stop flag. Each look is a
# wake-up of the event loop, and `health` costs some tenths of a millisecond: looking every 0.05 s
# took 4 ms of CPU a second from the front door, busy or idle (docs/performance.md).
WATCH_S = 0.25


class _Server(uvicorn.Server):
    """uvicorn re-raises a captured SIGTERM/SIGINT after shutting down, which would kill this
    process before the deployment is closed; here a signal only starts the drain, a second
    Ctrl-C ends it at once (in-flight requests get a 503), and a third stops waiting for their
    connections too."""

    stop_signal: str | None = None
    abort = False

    @contextlib.contextmanager
    def capture_signals(self):
        def handle(sig, frame):
            if self.should_exit and sig == signal.SIGINT:
                if self.abort:
                    self.force_exit = True
                self.abort = True
            self.should_exit = True
            self.stop_signal = self.stop_signal or signal.Signals(sig).name

        previous = {s: signal.signal(s, handle) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for s, h in previous.items():
                signal.signal(s, h)


def _listen(host: str, port: int) -> socket.socket:
    """Bind the front door first, so a bad address fails before any worker starts."""
    if not _is_port(port):
        raise ValueError(f"{port!r} is not a TCP port")  # getaddrinfo wraps 99999 to 34463
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    return sock


def _write_ready(path: str, url: str, pids: Mapping[str, int]) -> None:
    """The machine-readable ready signal: written whole (a reader never sees half of it)."""
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"url": url, "pids": dict(pids)}, f)
    os.replace(tmp, path)


def _is_port(port: object) -> bool:
    return isinstance(port, int) and not isinstance(port, bool) and 0 <= port <= 65535


def _cannot_listen(host: str, port: int, exc: Exception) -> str:
    """One paragraph: why host:port cannot be listened on, and what to give instead."""
    where = f"cannot listen on {host}:{port}"
    if not _is_port(port):
        return (f"{where}: {port!r} is not a TCP port; nothing was started. Give --port a number "
                "from 0 to 65535 (0 picks any free port).")
    # gaierror: the name does not resolve; ValueError/UnicodeError: not even a name (NUL, "a..b")
    unresolved = isinstance(exc, socket.gaierror) or not isinstance(exc, OSError)
    if unresolved or exc.errno == errno.EADDRNOTAVAIL:
        why = "could not be resolved" if unresolved else "is not an address of this machine"
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        return (f"{where}: host {host!r} {why} ({detail}); nothing was started. Give --host an "
                "address of this machine, e.g. 127.0.0.1 (local clients only) or 0.0.0.0 (all "
                "interfaces).")
    return (f"{where} ({exc.strerror or exc}); nothing was started. Choose a free port with "
            "--port N (or --port 0 for any free port).")


def serve(plan, topology_json: Mapping[str, Any], host: str = "127.0.0.1", port: int = 8000,
          device: str = "auto", *, drain_timeout: float = DRAIN_TIMEOUT_S,
          out: TextIO | None = None, err: TextIO | None = None,
          start: Callable[[], DeploymentFacade] | None = None, ready_file: str | None = None,
          log_level: str | None = None, **launch_kwargs: Any) -> int:
    """Serve `plan` on http://host:port until SIGINT/SIGTERM; returns the process exit code.

    `port=0` picks a free port (the ready line says which, and `ready_file`, when given, is
    written once ready: JSON with the `url` and the worker `pids`, for programs, which should not
    parse the human line). `launch_kwargs` go to `launch`;
    `start` replaces it (e.g. `replica_set.launch_replicas`: any `DeploymentFacade`), and is
    called only once the address is known to be free. `log_level` (debug, info, warning, error):
    what this process and its workers log to stderr.
    """
    out, err = out or sys.stdout, err or sys.stderr
    if log_level is not None:
        logs.configure(log_level)
    try:
        check(plan)
    except SetupError as exc:
        print(f"error: {exc}", file=err, flush=True)
        return EXIT_MISSING_SETUP
    try:
        sock = _listen(host, port)
    except (OSError, ValueError) as exc:
        print(f"error: {_cannot_listen(host, port, exc)}", file=err, flush=True)
        return EXIT_BAD_ADDRESS
    # This process's own tensor work is small (the results of torch stages). A second intra-op
    # thread gains nothing there, and after each op it spin-waits (OpenMP's default) for the
    # next one: on 2 cores that took 5-8 ms of CPU per request away from the workers under load.
    # Torch is here only where the plan's factory modules loaded it (`check` imported them).
    if (torch := sys.modules.get("torch")) is not None:
        torch.set_num_threads(1)
    try:
        deployment = start() if start is not None else launch(plan, device, **launch_kwargs)
    except LaunchError as exc:
        sock.close()
        print(f"error: could not start {plan.model}: {exc}", file=err, flush=True)
        return EXIT_LAUNCH_FAILED
    if deployment.note:
        print(f"note: {deployment.note}", file=err, flush=True)
    app = create_app(deployment, topology_json)
    # uvicorn's own grace period is only a backstop: the drain below ends first.
    config = uvicorn.Config(app, host=host, port=port, lifespan="off",
                            log_level=log_level or logs.DEFAULT_LEVEL,
                            timeout_graceful_shutdown=drain_timeout + 5.0, http=guarded(),
                            timeout_keep_alive=KEEP_ALIVE_S)
    server = _Server(config)
    code = EXIT_OK

    async def supervise() -> None:
        while not server.started:
            if server.should_exit:
                break
            await asyncio.sleep(0.02)
        else:
            bound = sock.getsockname()[1]
            procs = ", ".join(deployment.worker_pids())
            captions = ", /dev/captioned_speech" if plan.word_timestamps else ""
            print(f"ready: {plan.model} on http://{host}:{bound} "
                  f"({deployment.summary()}: {procs}; device {deployment.device}); "
                  f"POST /v1/audio/speech{captions}; Ctrl-C to stop", file=out, flush=True)
            if ready_file is not None:
                _write_ready(ready_file, f"http://{host}:{bound}", deployment.worker_pids())
        watch = WorkerWatch()
        while not server.should_exit:  # a restart takes seconds: a look each WATCH_S sees it
            for line in watch.lines(deployment.health()):
                print(line, file=err, flush=True)
            if deployment.failed.is_set():
                print(f"error: {deployment.health()['error']}", file=err, flush=True)
                server.should_exit = True
            await asyncio.sleep(WATCH_S)
        # One drain window: uvicorn takes no new connection; in-flight requests may finish.
        if server.stop_signal:
            print(f"{server.stop_signal}: draining {deployment.in_flight} in-flight request(s) "
                  f"for up to {drain_timeout:g} s, then stopping (Ctrl-C again: stop now)",
                  file=err, flush=True)
        deadline = time.monotonic() + drain_timeout
        while deployment.in_flight and time.monotonic() < deadline and not server.abort:
            await asyncio.sleep(0.05)
        # What is still in flight gets a 503 now, and every process stops.
        await asyncio.to_thread(deployment.close)

    async def run() -> None:
        watcher = asyncio.create_task(supervise())
        try:
            await server.serve(sockets=[sock])
        finally:
            if not watcher.done():
                watcher.cancel()

    try:
        with asyncio.Runner(loop_factory=_loop_factory()) as runner:
            runner.run(run())
    except SystemExit:  # uvicorn exits this way when it cannot bind
        code = EXIT_RUNTIME_FAILED
    finally:
        deployment.close()  # returns once the watcher's close (if any) is done
        sock.close()
    if deployment.failed.is_set() or not server.started:
        code = EXIT_RUNTIME_FAILED
    return code


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop where it is installed (the serve extra has it; the front door took
    6% less CPU per request on it than on asyncio's own, docs/performance.md); else asyncio's."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop
