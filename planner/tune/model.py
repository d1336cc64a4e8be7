"""Predict how a placement performs under a load, from a measured profile.

The model is a discrete-event simulation of how the launcher executes a plan, not of an abstract
queue: each stage a thread; each item's work a part that holds its process's interpreter lock and
a core, a native part that needs only a core (in calls, taking the lock back between them), and a
part that waits on a device; handoffs, the serving process and the load client charged as the
launcher spends them; the cores time-shared by the OS in slices. A simulation rather than a
mean-value analysis, because the choice is made on percentiles and the time to first audio too,
and it is cheap enough to run on every placement the planner accepts.

`simulator` is the machine (cores, locks, threads), `simulated_run` the plan's run on it,
`workload` the question and the answer. Assumptions, and the measurements behind each mechanism:
docs/tune.md, "The model".
"""

from __future__ import annotations

from planner.plan import Plan
from planner.tune.profile import Profile
from planner.tune.simulated_run import SimulatedRun
from planner.tune.simulator import os_slice_ms
from planner.tune.workload import Prediction, Workload

__all__ = ["Prediction", "Workload", "os_slice_ms", "predict"]


def predict(plan: Plan, profile: Profile, workload: Workload, cores: int | None = None
            ) -> Prediction:
    """Throughput, latency percentiles and time to first audio of `plan` under `workload`, on a
    machine with `cores` cores (default: the profiled machine's)."""
    return SimulatedRun(plan, profile, workload, cores or profile.cores).run()
