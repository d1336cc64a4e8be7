"""How much of the machine's CPU time its hypervisor gave to other guests (steal), from
/proc/stat. A thread running while its virtual CPU is stolen is charged neither CPU time nor a
wait for a core (schedstat), so a profile would read that time as device time; the profile says
how much there was instead (`Profile.core_wait_share` counts it)."""

from __future__ import annotations

from pathlib import Path

Ticks = tuple[int, int]  # (stolen, all) jiffies of every CPU since boot


def steal_ticks(stat: Path = Path("/proc/stat")) -> Ticks | None:
    """Stolen and total jiffies so far; None where the kernel does not say (not Linux, or a
    kernel without the steal column)."""
    try:
        with stat.open() as f:
            fields = f.readline().split()
    except OSError:
        return None
    if len(fields) < 9 or fields[0] != "cpu":
        return None
    # user nice system idle iowait irq softirq steal (guest time is inside user already)
    values = [int(v) for v in fields[1:9]]
    return values[7], sum(values)


def stolen_share(before: Ticks | None, after: Ticks | None) -> float:
    """The share of the machine's CPU time stolen between two readings (0 where unknown)."""
    if before is None or after is None or after[1] <= before[1]:
        return 0.0
    return max(0.0, (after[0] - before[0]) / (after[1] - before[1]))
