"""The load-generator benchmark runs end to end in its quick mode and prints every rate."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_quick_mode_prints_a_row_per_rate():
    out = subprocess.run([sys.executable, "-m", "benchmarks.loadgen_lag", "--quick"],
                         capture_output=True, text=True, cwd=ROOT, timeout=300, check=False)
    assert out.returncode == 0, out.stderr
    assert "## schedule lag and measured timings" in out.stdout
    rows = [line.split() for line in out.stdout.splitlines() if line[:6].strip() in ("20", "50")]
    assert [r[0] for r in rows] == ["20", "50"] and all(len(r) == 14 for r in rows), out.stdout
