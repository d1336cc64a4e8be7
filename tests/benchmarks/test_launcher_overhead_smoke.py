"""The launcher-overhead benchmark runs end to end in its quick mode and prints every figure."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_quick_mode_prints_every_figure():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "launcher_overhead.py"),
                          "--quick"], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    for figure in ("C=1 latency, 1 KiB", "C=16 throughput, 1 KiB", "C=1 latency, 64 MiB",
                   "64 MiB crossing"):
        assert figure in out.stdout
    assert out.stdout.count("goal") == 3
    if sys.platform.startswith("linux"):  # read from /proc
        assert "CPU per request at C=16" in out.stdout and "relay" in out.stdout
