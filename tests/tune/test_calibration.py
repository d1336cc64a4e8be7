"""The calibration arithmetic of a profile, on its own: no torch, no processes."""

from __future__ import annotations

import subprocess
import sys

import pytest

import planner
from planner.tune.calibration import calibrate_to_served, request_scales
from planner.tune.profile import HandoffCost, StageProfile

FREE = HandoffCost(fixed_ms=0.0, copy_gbps=1e9, latency_ms=0.0)


def _stages():
    return [StageProfile("preprocessing", 1.0, 0.0, 0.0),
            StageProfile("tts_engine", 10.0, 30.0, 0.0),
            StageProfile("vocoder", 2.0, 6.0, 0.0)]


def test_request_scales_are_each_requests_total_over_the_mean_sorted():
    cost = {"a": [1.0, 3.0], "b": [1.0, 3.0]}
    assert request_scales(cost, ["a", "b"]) == (0.5, 1.5)


def test_a_stage_timed_served_is_scaled_by_its_own_factor_keeping_its_proportions():
    plan = planner.solve("qwen3-tts", requests=[planner.Isolate("vocoder")]).plan
    out = {s.name: s for s in calibrate_to_served(plan, _stages(), {"vocoder": 9.6}, FREE)}
    assert out["vocoder"].busy_ms == pytest.approx(9.6)  # 8 ms alone, 1.2x served
    assert out["vocoder"].gil_ms / out["vocoder"].native_ms == pytest.approx(2.0 / 6.0)


def test_unbelievable_factors_are_ignored_and_untimed_stages_get_the_common_factor():
    plan = planner.solve("qwen3-tts", requests=[planner.Isolate("vocoder")]).plan
    # The vocoder served 5x slower than alone: not believed (a cost that depends on the input).
    out = {s.name: s for s in calibrate_to_served(plan, _stages(), {"vocoder": 40.0}, FREE)}
    assert out["vocoder"].busy_ms == pytest.approx(8.0)
    # A believable factor on enough of the work carries over to the stages not timed.
    out = {s.name: s for s in calibrate_to_served(
        plan, _stages(), {"tts_engine": 44.0, "vocoder": 8.8}, FREE)}
    assert out["preprocessing"].busy_ms == pytest.approx(1.1)


def test_the_calibration_imports_no_torch():
    code = ("import sys, planner.tune.calibration; "
            "sys.exit(1 if 'torch' in sys.modules else 0)")
    assert subprocess.run([sys.executable, "-c", code], timeout=120).returncode == 0
