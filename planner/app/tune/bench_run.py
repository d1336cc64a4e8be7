"""How `planner tune --verify` runs `planner bench`: a child process (so the bench's own isolation
and reporting apply), asked through bench's options (`BenchOptions.to_argv`, never a flag spelled
here), with each plan named by its flags so the bench's own report says which row is which."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from planner.app.bench.options import BenchOptions
from planner.flags import COPIES, ISOLATE, PIN, THREADS, command_line, flags
from planner.tune.errors import TuneError

if TYPE_CHECKING:
    from rich.console import Console

    from planner.app.tune.options import TuneOptions
    from planner.plan import ComputeRequest, Request
    from planner.tune.choose import Candidate


def bench_name(c: Candidate) -> str:
    """The candidate's flags as a bench placement name (letters, digits and `_.+:@-`): e.g.
    `isolate:vocoder` for `--isolate-stage vocoder`, `pre@p2` for `--stage-process pre=p2`,
    `threads:vocoder@2`, `copies:vocoder@2` and `cpus:vocoder@1` for `--stage-threads`,
    `--process-copies` and `--process-cpus` (a CPU list's `,` becomes `_`), several
    joined by `+`, so the bench's own report says which placement each row is."""
    parts = []
    for f in flags(c.requests):
        option, _, value = f.partition(" ")
        prefix = {ISOLATE: "isolate:", THREADS: "threads:", COPIES: "copies:",
                  PIN: "cpus:"}.get(option, "")
        parts.append(prefix + value.replace("=", "@"))
    name = re.sub(r"[^A-Za-z0-9_.+:@-]", "_", "+".join(parts)) or "declared"
    return name if name[0].isalnum() else f"p{name}"


def placements(named: dict[str, tuple[Request | ComputeRequest, ...]]) -> tuple[str, ...]:
    """Bench's NAME='FLAGS' for each plan by name. None at all: the declared topology alone, as
    bench given no placement would serve its default comparison (every single isolation)."""
    return tuple(f"{name}={command_line(requests)}" for name, requests in named.items()) \
        or ("declared=",)


def bench_options(tune: TuneOptions, requests: int, output: Path, **asked: Any) -> BenchOptions:
    """A bench run of the pipeline, device, seed and stand-ins `tune` was asked about: `requests`
    per plan and load, in tune's rounds (never more than requests: each round sends one), its
    results to `output`, and what else is `asked` (placements, the load, streaming)."""
    return BenchOptions(model=tune.model, requests=requests, rounds=min(tune.rounds, requests),
                        output=str(output), device=tune.device, seed=tune.seed,
                        stand_in_size=tune.stand_in_size, **asked)


def command(bench: BenchOptions) -> list[str]:
    """The `planner bench` child process that runs `bench`."""
    return [sys.executable, "-m", "planner", "bench", *bench.to_argv()]


def run_bench(cmd: list[str], output: Path, err: Console) -> Path:
    """Run `planner bench` as `cmd` (writing to `output`) and return its results.json."""
    err.print(f"tune: verifying with {shlex.join(['planner', *cmd[3:]])}")
    results = output / "results.json"
    results.unlink(missing_ok=True)  # an earlier run's results are not this one's
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0 and not results.exists():
        last = done.stderr.strip().splitlines()[-1:] or ["(no message)"]
        raise TuneError(f"verification could not run: planner bench exited with "
                        f"{done.returncode}: {last[0]}")
    return results
