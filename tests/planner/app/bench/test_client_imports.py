"""The bench process is only an HTTP client: importing it must not import torch or starlette
(seconds of start-up and hundreds of MiB it would then carry next to the server it measures)."""

from __future__ import annotations

import os
from pathlib import Path
import subprocess
import sys

ROOT = str(Path(__file__).resolve().parents[4])  # the repository

PROBE = """
import importlib, pkgutil, sys
import planner.app.bench
names = [m.name for m in pkgutil.iter_modules(planner.app.bench.__path__, "planner.app.bench.")]
for name in names:
    importlib.import_module(name)
import launcher.control.metric_names, launcher.serving.limits
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "starlette", "uvicorn"))
print(len(names), " ".join(heavy))
"""


def test_importing_every_bench_module_imports_neither_torch_nor_starlette():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    count, _, heavy = out.stdout.strip().partition(" ")
    assert int(count) >= 10  # every module of the bench was imported
    assert heavy == ""
