"""A tie settled by default: where the model predicts other plans within its tie band of the
pick, `planner tune` serves the pick and the next plan briefly (`CHECK_REQUESTS` each per load,
in `CHECK_ROUNDS` interleaved rounds, as `planner bench` does) and judges them as `--verify`
does, when the machine is quiet enough for a served figure to mean something. Otherwise the
answer says why it did not and gives the command that serves the two.

Quiet enough: while tune sleeps for a second, other work keeps at most `QUIET_BUSY` of the CPUs
busy (/proc/stat: every CPU's time not idle, stolen time included), and short bursts of work run
at full speed (`planner.app.cpu_steal.burst_speed`: the hypervisor's steal and the neighbours'
work both slow them). A check judges gaps of a few percent (`planner.tune.choose.TIE`), and on
this project's shared 2-vCPU machine the same placement measured 20-30% apart minutes later
while other jobs ran (docs/bench.md, "Rounds"), far more than such a gap.

It runs only where tune profiled this machine in this run: answered from a saved profile, tune
answers in seconds and serves nothing unless asked (`--verify K`)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from planner.app.cpu_steal import BurstSpeed, burst_speed, busy_ticks, share_of, ticks_between
from planner.app.tune.options import TuneOptions
from planner.tune.answer import TieCheck, rival
from planner.tune.verify import Measured

if TYPE_CHECKING:
    from rich.console import Console

    from planner.tune.choose import Choice

# A short check: per plan and load, and the rounds they are split into.
CHECK_REQUESTS = 24
CHECK_ROUNDS = 2
# Other work may keep at most this share of the machine's CPU time busy for a check to run.
QUIET_BUSY = 0.15
SAMPLE_S = 2.0  # other work on a shared machine comes in bursts: a second can miss one


@dataclass(frozen=True)
class Quiet:
    """How busy the machine was just now: the share of its CPUs' time other work used (None:
    /proc/stat does not say) and how fast short bursts of work ran."""

    busy: float | None
    bursts: BurstSpeed

    @property
    def ok(self) -> bool:
        return (self.busy is None or self.busy <= QUIET_BUSY) and not self.bursts.slow

    def why_not(self) -> str:
        parts = []
        if self.busy is not None and self.busy > QUIET_BUSY:
            parts.append(f"other work kept {self.busy:.0%} of its CPUs busy just now")
        if self.bursts.slow:
            parts.append(f"short bursts of work ran at {self.bursts.median:.0%} of full speed")
        return "the machine is not quiet (" + "; ".join(parts) + ")"


def machine_now(sample_s: float = SAMPLE_S) -> Quiet:
    """How busy the machine is, measured over `sample_s` of sleep and a burst test."""
    before = busy_ticks()
    time.sleep(sample_s)
    busy = share_of(ticks_between(before, busy_ticks()))
    return Quiet(busy, burst_speed())


def not_served(tune: TuneOptions, profiled_here: bool) -> str | None:
    """Why a tie is not checked whatever the machine (None: it may be)."""
    if tune.no_verify:
        return f"{TuneOptions.flag('no_verify')} was given"
    if not profiled_here:
        return "answered from a saved profile, tune serves nothing unless asked"
    if tune.cores:
        return f"predicted for another machine ({TuneOptions.flag('cores')} {tune.cores})"
    return None


def check_tie(tune: TuneOptions, choice: Choice, profiled_here: bool, output: Path,
              err: Console, quiet: Callable[[], Quiet] = machine_now
              ) -> tuple[TieCheck | None, Measured | None]:
    """Serve the pick against its rival if there is a tie and the machine allows (see the
    module); what was done, and what serving measured (None: nothing served)."""
    other = rival(choice)
    if other is None:
        return None, None
    skipped = not_served(tune, profiled_here)
    if skipped is None and not (now := quiet()).ok:
        skipped = now.why_not()
    if skipped is not None:
        return TieCheck(other, False, skipped), None
    from planner.app.tune.verify import serve_two

    requests = tune.requests or CHECK_REQUESTS
    err.print(f"tune: a tie: serving the pick and #{other + 1} to settle it ({requests} "
              f"requests each per load, {CHECK_ROUNDS} rounds)")
    brief = dataclasses.replace(tune, requests=requests, rounds=min(CHECK_ROUNDS, requests))
    measured = serve_two(brief, choice, (0, other), output / "check", err)
    return TieCheck(other, True, None, requests, brief.rounds), measured
