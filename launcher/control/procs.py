"""The supervisor's view of one worker process, and how to say what happened to it."""

from __future__ import annotations

import signal
from dataclasses import dataclass, field

from launcher.control.states import ProcessState
from launcher.wire.ipc import PoolUsage
from launcher.wire.protocol import BuildError
from launcher.wire.specs import WorkerSpec

# A worker that exits before its own code runs died in multiprocessing's bootstrap, where the
# forkserver/spawn child re-imports the launching script: an unguarded launch() there fails.
NO_MAIN_GUARD = (
    "before it started building its stages. Likely cause: the script that called "
    "launcher.launch() has no `if __name__ == \"__main__\":` guard. Each worker process "
    "re-imports that script (the forkserver and spawn start methods do), so its top-level code "
    "runs launch() again inside the worker, which cannot start processes while it is starting "
    "itself and exits. Put the script's entry point under `if __name__ == \"__main__\":`.")


@dataclass
class Proc:
    spec: WorkerSpec
    unit: str
    state: ProcessState = ProcessState.STOPPED
    pid: int | None = None
    started: bool = False  # the worker's own code runs (multiprocessing's bootstrap is over)
    building: str | None = None
    build_error: BuildError | None = None
    death: str | None = None  # how its last incarnation ended
    depths: dict[str, int] = field(default_factory=dict)
    cuda_allocated: int | None = None
    shm: PoolUsage = field(default_factory=PoolUsage)
    restarts: int = 0
    # Timing reports (`Stats`) received from its incarnations, one every STATS_INTERVAL_S: a
    # reader of /metrics that sees this go up by two has every stage timing recorded before it
    # first looked (the first may have been taken just before).
    reports: int = 0

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def running(self) -> bool:
        return self.state.running

    def describe(self) -> str:
        return self.spec.describe(self.pid)


def startup_failure(proc: Proc, exitcode: int | None, how: str) -> str:
    """Why the launch failed, naming the process, and the stage and factory when it was one."""
    if proc.build_error is not None:
        e = proc.build_error
        factory = next(s.factory for s in proc.spec.stages if s.name == e.stage)
        return (f"stage '{e.stage}' (factory {factory}) in process '{proc.name}' failed to "
                f"build: {e.summary}\n\n{e.traceback}")
    if not proc.started and exitcode is not None and exitcode >= 0:
        return f"{proc.describe()} {how} {NO_MAIN_GUARD}"
    return f"{proc.describe()} {how} while building {proc.building or 'its stages'}"


def exit_text(code: int | None) -> str:
    if code is None:
        return "stopped answering"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"
