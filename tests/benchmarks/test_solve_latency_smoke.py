"""The solve-latency benchmark runs end to end in its quick mode and prints every section."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_quick_mode_prints_all_sections():
    out = subprocess.run([sys.executable, "-m", "benchmarks.solve_latency", "--quick"],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    for section in ("## in-process planner.solve per card", "## CLI cold start",
                    "## synthetic pipelines"):
        assert section in out.stdout
    assert "100 stages,  4 GPUs, 10 requests: ok" in out.stdout
    assert "half the edges unsafe: infeasible" in out.stdout
