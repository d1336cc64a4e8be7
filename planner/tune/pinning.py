"""Which process group a plan pins to a CPU of its own, under a closed loop of several requests
at once (where pinning was measured; a rate question's plans stay unpinned).

Why pin: a process of several stages hands its interpreter lock between its threads by waking one.
With every CPU busy, Linux may place the woken thread on the CPU where another process's thread
runs, preempting it; the hander then sleeps, and its CPU idles until a scheduler tick moves the
preempted thread over (a thread that ran a moment ago is not taken at once). The model shares the
cores as one queue and never idles one beside a waiting thread; a pinned group's wake-ups stay on
its CPU, which is what makes the machine behave so (benchmarks/EVIDENCE.md, "Where the cores
idle"). The rule was measured before it was kept and judged after (benchmarks/EVIDENCE.md,
"Pins").

The rule: the group of at least two stages, run in one copy, none of them with more than one
thread, whose CPU work at the predicted rate needs the largest share of one CPU, if that share is
between MIN_SHARE and MAX_SHARE, goes on the last CPU this machine gives; one group only, so every
other CPU stays the OS's to share out. Pure: the caller says which predictions have several
requests in flight and which CPUs there are.

Copies: a group of several one-thread stages run in a copy per CPU has each copy pinned to a
CPU of its own (`copies_pin`, in place of the rule above): its stages then take turns on that CPU
rather than being cut short by each other (`launcher.worker.core_turns`), and the copies stop
trading CPUs; measured on both real voices, alone and beside other groups, before it was kept
(benchmarks/EVIDENCE.md, "Pins"). Not where the group waits off its CPUs (on a device) for more
than MAX_WAIT_SHARE of its CPU work: a pinned copy's CPU then idles through each wait, which an
unpinned copy would have used.
"""

from __future__ import annotations

from collections.abc import Sequence

from planner.plan import Pin, Plan, ProcessGroup
from planner.tune.profile import Profile
from planner.tune.workload import Prediction

# Below this share of a CPU a group's hand-overs are too few to cost much, and pinning it only
# takes a CPU's freedom away; above MAX_SHARE a group that needs a whole CPU would be held to one:
# a pinned group may use no other.
MIN_SHARE = 0.30
MAX_SHARE = 0.95
MAX_WAIT_SHARE = 0.10


def cpu_share(plan: Plan, group: str, profile: Profile, rate_rps: float) -> float:
    """The share of one CPU the group's stages' work (Python and native) takes at `rate_rps`."""
    stages = next(g.stages for g in plan.groups if g.name == group)
    return _work_ms(stages, profile) * rate_rps / 1000.0


def _work_ms(stages: Sequence[str], profile: Profile) -> float:
    """The stages' CPU work per request, Python and native."""
    return sum(profile.stage(s).gil_ms + profile.stage(s).native_ms for s in stages)


def _one_thread_stages(plan: Plan, group: ProcessGroup) -> bool:
    """Whether the group holds several stages, each of one thread: the kind both pins are for."""
    return len(group.stages) >= 2 and all(plan.stage(s).threads == 1 for s in group.stages)


def pin_for(plan: Plan, profile: Profile, busy: Sequence[Prediction],
            cpu_ids: Sequence[int]) -> Pin | None:
    """The pin this plan gets, or None. `busy`: its predictions at the workloads with several
    requests in flight (none: nothing runs beside anything, so nothing to keep apart)."""
    if not busy or len(cpu_ids) < 2 or any(g.cpus for g in plan.groups):
        return None
    if (each_copy := copies_pin(plan, profile, cpu_ids)) is not None:
        return each_copy
    best: tuple[float, str] | None = None
    for g in plan.groups:
        if g.copies != 1 or not _one_thread_stages(plan, g):
            continue
        need = max(cpu_share(plan, g.name, profile, p.throughput_rps) for p in busy)
        if MIN_SHARE <= need <= MAX_SHARE and (best is None or need > best[0]):
            best = (need, g.name)
    return None if best is None else Pin(best[1], (max(cpu_ids),))


def copies_pin(plan: Plan, profile: Profile, cpu_ids: Sequence[int]) -> Pin | None:
    """Every CPU to a copy of its own, for the group of several one-thread stages run in as many
    copies as there are CPUs and waiting off its CPUs for little of its work (of several such,
    the one with the most CPU work); else None."""
    best: tuple[float, str] | None = None
    for group in plan.groups:
        if group.copies != len(cpu_ids) or not _one_thread_stages(plan, group):
            continue
        work = _work_ms(group.stages, profile)
        waits = sum(profile.stage(s).device_ms for s in group.stages)
        if waits <= MAX_WAIT_SHARE * work and (best is None or work > best[0]):
            best = (work, group.name)
    return None if best is None else Pin(best[1], tuple(sorted(cpu_ids)))
