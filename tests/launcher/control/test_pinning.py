"""A plan's CPUs per process group, applied: every thread of each pinned worker runs only on its
planned CPUs, the others are left where the OS puts them, and a pin this machine cannot honour
is refused before any process starts."""

from __future__ import annotations

import os

import pytest

import planner
from launcher import LaunchError, launch
from launcher.control.preflight import SetupError, check
from planner.plan import Copies, Pin

needs_affinity = pytest.mark.skipif(not hasattr(os, "sched_getaffinity"),
                                    reason="CPU affinity is Linux's; this OS has none to test")

PIPELINE = {
    "name": "pinned-pair",
    "stages": [
        {"name": "a", "process": "one", "factory": "launcher.synthetic:stage",
         "args": {"gil_ms": 0.2}, "next": ["b"]},
        {"name": "b", "process": "two", "factory": "launcher.synthetic:stage",
         "args": {"gil_ms": 0.2, "audio_ms": 20.0}, "terminal": True},
    ],
    "process_safe_edges": [["a", "b"]],
}


def plan_pinning(cpus: tuple[int, ...], node: int | None = None, copies: int = 1):
    """A plan pinning process `two` (in `copies` copies) to `cpus`, made for this machine (or a
    node of `node` CPUs)."""
    pipeline = planner.load(config=PIPELINE)
    text = ",".join(str(c) for c in cpus)
    r = planner.solve_pipeline(pipeline, requests=[Pin.parse(f"two={text}"),
                                                   Copies("two", copies)], cpus=node)
    assert r.ok, r.diagnostics
    return r.plan


def allowed(pid: int) -> set[str]:
    """Each thread's CPU list as the kernel reports it (`Cpus_allowed_list`)."""
    out = set()
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status", encoding="utf-8") as f:
                out.add(f.read().split("Cpus_allowed_list:")[1].split()[0])
        except FileNotFoundError:
            continue  # a thread that ended since the listing: nothing of it to check
    return out


@needs_affinity
def test_a_pin_outside_the_cpus_this_program_may_use_is_refused_before_anything_starts():
    beyond = max(os.sched_getaffinity(0)) + 1
    plan = plan_pinning((beyond,), node=beyond + 1)  # made for a larger node than this one
    with pytest.raises(SetupError) as e:
        check(plan)
    message = str(e.value)
    assert f"pinned to CPU {beyond}," in message and "--process-cpus two=" in message
    with pytest.raises(LaunchError):
        launch(plan, device="cpu")


@needs_affinity
@pytest.mark.slow
def test_every_thread_of_a_pinned_worker_runs_on_its_cpus_only():
    """Where this program may use two CPUs or more, `two` runs two copies pinned to the first
    two: each copy on its own one; on one CPU, one copy on it."""
    everyone = sorted(os.sched_getaffinity(0))
    cpus = tuple(everyone[:2])
    plan = plan_pinning(cpus, copies=len(cpus))
    with launch(plan, device="cpu") as d:
        d.synthesize("pinned", timeout=60)  # the stages built, their threads started
        pids = d.worker_pids()
        if len(cpus) == 1:
            assert allowed(pids["two"]) == {str(cpus[0])}
        else:
            assert [allowed(pids[f"two.{i}"]) for i in range(2)] == [{str(c)} for c in cpus]
            # the unpinned worker keeps what this program may use
            assert allowed(pids["one"]) == allowed(os.getpid()) not in [{str(c)} for c in cpus]
