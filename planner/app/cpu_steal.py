"""How much of the machine's CPU time its hypervisor gave to other guests (steal), from
/proc/stat. A thread running while its virtual CPU is stolen is charged neither CPU time nor a
wait for a core (schedstat), so a profile would read that time as device time; the profile says
how much there was instead (`Profile.core_wait_share` counts it).

On a shared host the steal depends on how the guest uses its CPUs, not only on the neighbours:
work in short bursts with pauses between loses far more of its running time than threads busy
without a pause, in the same minutes (benchmarks/EVIDENCE.md, "The CPU the host takes"). So
`burst_speed` measures the kind of use a pipeline serving a light load makes, and
`stolen_of_running` reports a run's own share."""

from __future__ import annotations

import hashlib
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

Ticks = tuple[int, int]  # (stolen, all) jiffies of every CPU since boot
STAT = Path("/proc/stat")
# Short bursts of work running slower than this (CPU over wall time, the median burst) make
# `planner tune` say so: the model's CPUs run at full speed.
SLOW_BURSTS = 0.85


def _cpu_fields(stat: Path) -> list[int] | None:
    """user nice system idle iowait irq softirq steal (guest time is inside user already)."""
    try:
        with stat.open() as f:
            fields = f.readline().split()
    except OSError:
        return None
    if len(fields) < 9 or fields[0] != "cpu":
        return None
    return [int(v) for v in fields[1:9]]


def steal_ticks(stat: Path = STAT) -> Ticks | None:
    """Stolen and total jiffies so far; None where the kernel does not say (not Linux, or a
    kernel without the steal column)."""
    values = _cpu_fields(stat)
    return None if values is None else (values[7], sum(values))


def stolen_share(before: Ticks | None, after: Ticks | None) -> float:
    """The share of the machine's CPU time stolen between two `steal_ticks` readings (0 where
    unknown)."""
    return share_of(ticks_between(before, after)) or 0.0


def running_ticks(stat: Path = STAT) -> Ticks | None:
    """Stolen jiffies and the jiffies the CPUs ran or were stolen (not idle) so far."""
    values = _cpu_fields(stat)
    return None if values is None else (values[7], sum(values) - values[3] - values[4])


def busy_ticks(stat: Path = STAT) -> Ticks | None:
    """Jiffies the CPUs ran or were stolen (not idle) so far, and all jiffies: over a moment this
    process sleeps through, how busy other work kept the machine."""
    values = _cpu_fields(stat)
    return None if values is None else (sum(values) - values[3] - values[4], sum(values))


def ticks_between(before: Ticks | None, after: Ticks | None) -> Ticks | None:
    """What two readings of the same kind counted in between (None where either is unknown)."""
    if before is None or after is None or after[1] < before[1]:
        return None
    return after[0] - before[0], after[1] - before[1]


def stolen_of_running(before: Ticks | None, after: Ticks | None) -> float | None:
    """Of the time the CPUs were not idle between two `running_ticks` readings, the share the
    hypervisor gave to other guests (None where unknown or nothing ran)."""
    return share_of(ticks_between(before, after))


def share_of(counted: Ticks | None) -> float | None:
    """The first count over the second (None where unknown or the second is 0)."""
    if counted is None or counted[1] <= 0:
        return None
    return max(0.0, counted[0] / counted[1])


@dataclass(frozen=True)
class BurstSpeed:
    """How fast short bursts of CPU work ran after pauses: CPU time over wall time per burst
    (1.0: at full speed), the median burst's and the slowest tenth's, and the share of the
    CPUs' running time stolen meanwhile (None where /proc/stat does not say)."""

    median: float
    slow_tenth: float
    stolen_of_running: float | None

    @property
    def slow(self) -> bool:
        return self.median < SLOW_BURSTS

    def note(self) -> str:
        stolen = ("" if self.stolen_of_running is None else
                  f", {self.stolen_of_running:.0%} of the CPUs' running time stolen")
        return (f"short bursts of CPU work run at {self.median:.0%} of full speed on this machine "
                f"just now (the slowest tenth at {self.slow_tenth:.0%}{stolen}: its hypervisor "
                "gives the CPUs to other guests). The predictions are for CPUs that run at full "
                "speed, as the profile measured them, so at a light load served latencies will "
                "run longer than predicted, most in the tail; ask again when the machine is "
                f"quiet, or add `--cpu-speed {max(self.median, 0.05):.2f}` to predict for the "
                "machine as it runs now")

    def as_dict(self) -> dict[str, float | None]:
        return {"burst_speed_median": round(self.median, 3),
                "burst_speed_slow_tenth": round(self.slow_tenth, 3),
                "stolen_of_running": (round(self.stolen_of_running, 3)
                                      if self.stolen_of_running is not None else None)}


def burst_speed(bursts: int = 12, work_ms: float = 10.0, pause_ms: float = 30.0) -> BurstSpeed:
    """Run `bursts` bursts of `work_ms` of CPU work (hashing), `pause_ms` apart, as a stage of a
    lightly loaded pipeline works (about half a second with the defaults)."""
    block = bytes(65536)
    speeds = []
    before = running_ticks()
    for _ in range(bursts):
        time.sleep(pause_ms / 1000.0)
        wall0, cpu0 = time.perf_counter(), time.thread_time()
        while (time.thread_time() - cpu0) * 1000.0 < work_ms:
            hashlib.sha256(block).digest()
        wall = time.perf_counter() - wall0
        speeds.append(min(1.0, (time.thread_time() - cpu0) / wall) if wall > 0 else 1.0)
    speeds.sort()
    return BurstSpeed(statistics.median(speeds), speeds[len(speeds) // 10],
                      stolen_of_running(before, running_ticks()))
