"""Host memory of each stage of a real card (piper-joe, hibari-heart): a worker-like process with
only that stage, against one with none (what `runtime.resources.host_memory_mib` in its
models/*.yaml declares).

Each measurement is a fresh interpreter that imports what the fork server preloads for the card
(`launcher.worker.main`, the factory module), builds the listed stages as a worker does, runs
one request through them, and reads its own proportional set size (plus its espeak-ng child's,
for the frontend) from /proc (Linux). A stage's figure is (that process) - (the empty one). Two
stages in one process share their libraries (onnxruntime), so their sum overstates that process
somewhat; the "all" row shows by how much.

    python -m benchmarks.stage_memory                 # piper-joe
    python -m benchmarks.stage_memory hibari-heart
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

TEXT = "The quick brown fox jumps over the lazy dog. It was a bright cold day in April."

INPUTS = r"""
import importlib, pickle, sys
stages = [importlib.import_module(m).__dict__[f]() for m, f in
          (factory.split(":") for factory in sys.argv[3].split(","))]
frontend, acoustic = stages[0], stages[1]
ids = frontend({"text": sys.argv[2]})
chunks = list(acoustic(ids))
with open(sys.argv[1], "wb") as f:
    pickle.dump({"frontend": {"text": sys.argv[2]}, "acoustic": ids, "vocoder": chunks}, f)
"""

CHILD = r"""
import importlib, json, os, pickle, sys
import launcher.worker.main as main
from launcher.wire.specs import StageSpec

importlib.import_module(sys.argv[3])  # what the fork server preloads for the card
names = sys.argv[1].split(",") if sys.argv[1] else []
with open(sys.argv[2], "rb") as f:
    inputs = pickle.load(f)
for name in names:
    spec = StageSpec(name=name, factory=f"{sys.argv[3]}:{name}", kwargs=(), defaults=(),
                     predecessors=(), successors=(), device="cpu", threads=1)
    stage = main.build_stage(spec, {"threads": 1, "device": "cpu"})
    for payload in inputs[name] if name == "vocoder" else [inputs[name]]:
        out = stage(payload)
        if not isinstance(out, dict):
            list(out)
    globals()[name] = stage  # kept alive, as in a worker

def pss(pid):
    with open(f"/proc/{pid}/smaps_rollup") as f:
        return sum(int(l.split()[1]) for l in f if l.startswith("Pss:"))
me = os.getpid()
kids = [int(p) for p in open(f"/proc/{me}/task/{me}/children").read().split()]
print(json.dumps({"pss_kib": pss(me) + sum(pss(k) for k in kids),
                  "torch": "torch" in sys.modules}))
"""


def run(code: str, *args: str) -> str:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          check=True, env={**os.environ, "PYTHONPATH": os.getcwd()}).stdout


def measure(stages: str, inputs: str, package: str) -> dict:
    return json.loads(run(CHILD, stages, inputs, package).strip().splitlines()[-1])


def main() -> int:
    import planner

    card = sys.argv[1] if len(sys.argv) > 1 else "piper-joe"
    factories = [s.factory for s in planner.load(card).stages]  # frontend, acoustic, vocoder
    package = factories[0].partition(":")[0]
    with tempfile.TemporaryDirectory() as tmp:
        inputs = os.path.join(tmp, "inputs.pickle")
        run(INPUTS, inputs, TEXT, ",".join(factories))
        empty = measure("", inputs, package)
        rows = {"(none)": empty}
        for name in ("frontend", "acoustic", "vocoder", "frontend,acoustic,vocoder"):
            rows[name] = measure(name, inputs, package)
    print(f"{'stages':<28} {'PSS MiB':>8} {'over empty':>10} {'torch':>6}")
    for name, r in rows.items():
        over = (r["pss_kib"] - empty["pss_kib"]) / 1024
        print(f"{name:<28} {r['pss_kib'] / 1024:>8.1f} {over:>10.1f} {str(r['torch']):>6}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
