"""The launcher-overhead benchmark runs end to end in its quick mode and prints every figure."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CAN_PIN = hasattr(os, "sched_setaffinity")  # CPU affinity is Linux-only


@pytest.fixture(scope="module")
def quick_runs():
    """Both quick runs at once (each is mostly imports and worker start-up, ~12 s alone); the
    tests read only what they print, never how fast."""
    argvs = {"all cores": ["--quick"]}
    if CAN_PIN:
        argvs["one core"] = ["--quick", "--cores", "1", "--json"]
    procs = {name: subprocess.Popen(
        [sys.executable, str(ROOT / "benchmarks" / "launcher_overhead.py"), *argv],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
        for name, argv in argvs.items()}
    try:
        outputs = {name: p.communicate(timeout=300) for name, p in procs.items()}
        return {name: subprocess.CompletedProcess(p.args, p.returncode, *outputs[name])
                for name, p in procs.items()}
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()


@pytest.mark.slow
def test_quick_mode_prints_every_figure(quick_runs):
    out = quick_runs["all cores"]
    assert out.returncode == 0, out.stderr
    for figure in ("C=1 latency, 1 KiB", "C=16 throughput, 1 KiB", "C=1 latency, 64 MiB",
                   "64 MiB crossing"):
        assert figure in out.stdout
    assert out.stdout.count("goal") == 3
    if sys.platform.startswith("linux"):  # read from /proc
        assert "CPU per request at C=16" in out.stdout and "relay" in out.stdout


@pytest.mark.slow
@pytest.mark.skipif(not CAN_PIN, reason="CPU affinity is Linux-only")
def test_cores_option_confines_the_workers_too(quick_runs):
    """`--cores 1` must reach the worker processes, or the ratio it prints is not one core's."""
    out = quick_runs["one core"]
    assert out.returncode == 0, out.stderr
    header, _, raw = out.stdout.partition("\n{")
    assert "1 cores" in header or "1 of " in header
    assert json.loads("{" + raw)["worker_cpus"] == [1]
