"""The calibration arithmetic of a profile, on its own: no torch, no processes (the scaling to
served timings is tested in test_served.py)."""

from __future__ import annotations

import subprocess
import sys

from planner.tune.calibration import request_scales


def test_request_scales_are_each_requests_total_over_the_mean_sorted():
    cost = {"a": [1.0, 3.0], "b": [1.0, 3.0]}
    assert request_scales(cost, ["a", "b"]) == (0.5, 1.5)


def test_the_calibration_imports_no_torch():
    code = ("import sys, planner.tune.calibration; "
            "sys.exit(1 if 'torch' in sys.modules else 0)")
    assert subprocess.run([sys.executable, "-c", code], timeout=120).returncode == 0
