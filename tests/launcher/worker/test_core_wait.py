"""A stage's wait for a CPU core, reported per stage: on a busy machine part of a stage's latency
is the machine's, not the stage's, and /metrics says how much."""

from __future__ import annotations


import pytest

import planner
from launcher import launch
from launcher.worker.core_wait import WaitClock

from tests.processes import cpu_hogs  # noqa: F401 - a fixture
from tests.waiting import wait_until

pytestmark = pytest.mark.slow
PURE_PYTHON = {"name": "busy", "stages": [
    {"name": "py", "process": "p", "terminal": True, "factory": "launcher.synthetic:stage",
     "args": {"gil_ms": 20, "audio_ms": 20}}]}


def _settled(deployment, stage: str, calls: int, timeout: float = 60.0):
    """The deployment's sample once every call of `stage` has been reported (workers report on
    an interval; on a loaded machine late)."""
    def sample():
        s = deployment.sample()
        return s if s.stage_latency[stage].n >= calls else None
    return wait_until(sample, timeout, fail=False) or deployment.sample()


@pytest.mark.skipif(not WaitClock().known,
                    reason="the kernel does not report a thread's wait for a core")
def test_a_stage_waiting_for_a_core_beside_cpu_hogs_is_reported_apart(cpu_hogs):
    with launch(planner.solve(config=PURE_PYTHON).plan, device="cpu") as d:
        for i in range(6):
            d.synthesize(f"request {i}.", timeout=120)
        sample = _settled(d, "py", 6)
        text = d.metrics_text()
    latency, waited = sample.stage_latency["py"].total, sample.stage_core_wait_s["py"]
    # More busy processes than cores: the stage lost its core for part of its calls, and that
    # part of its latency is told apart (never more than the latency it is part of).
    assert sample.stage_latency["py"].n == 6
    assert 0.01 < waited < latency
    assert 'stage_planner_stage_core_wait_seconds_total{stage="py"}' in text
