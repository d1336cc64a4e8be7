"""How good are `planner tune`'s predictions? For each pipeline: profile it, predict every
placement the planner accepts, then serve every one of them with `planner bench` under the same
closed-loop loads (`planner tune --verify` with K = all), and report

- the median and worst throughput prediction error over all candidates and loads;
- per load, the measured throughput of the placement tune chose over the best measured one.

    python benchmarks/tune_accuracy.py              # synthetic pipelines and qwen3-tts (~5 min)
    python benchmarks/tune_accuracy.py --quick      # one synthetic pipeline, C=1 and C=4

Pipelines: synthetic stages with known costs (`launcher.synthetic`) that stress different
resources, and the built-in qwen3-tts card with its stand-in stages.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

SYNTHETIC = {
    # Two stages that hold the interpreter lock: one process serialises them.
    "lock-bound": [("front", {"gil_ms": 6.0}), ("engine", {"gil_ms": 8.0}),
                   ("out", {"gil_ms": 2.0, "audio_ms": 300.0})],
    # Native work and a device wait: they overlap inside one process already.
    "native-device": [("front", {"native_ms": 4.0, "device_ms": 4.0}),
                      ("engine", {"gil_ms": 3.0, "native_ms": 5.0}),
                      ("out", {"gil_ms": 1.0, "native_ms": 2.0, "audio_ms": 300.0})],
    # A streaming engine feeding a decoder chunk by chunk.
    "streaming": [("front", {"gil_ms": 1.0}),
                  ("engine", {"gil_ms": 6.0, "native_ms": 6.0, "chunks": 6, "out_bytes": 65536}),
                  ("out", {"gil_ms": 4.0, "native_ms": 2.0, "audio_ms": 300.0})],
}


def synthetic_config(name: str, stages: list[tuple[str, dict]]) -> dict:
    out = []
    for i, (stage, args) in enumerate(stages):
        entry = {"name": stage, "process": "pipeline", "factory": "launcher.synthetic:stage",
                 "args": args}
        if i + 1 < len(stages):
            entry["next"] = stages[i + 1][0]
            if args.get("chunks", 1) > 1:
                entry["stream_to"] = [stages[i + 1][0]]
        else:
            entry["terminal"] = True
        out.append(entry)
    return {"name": name, "stages": out,
            "process_safe_edges": [[a, b] for (a, _), (b, _) in zip(stages, stages[1:])]}


def tune(target: list[str], loads: list[int], requests: int, out: Path) -> dict:
    cmd = [sys.executable, "-m", "planner", "tune", *target, "--verify", "99", "--format",
           "json", "--output", str(out), "--requests", str(requests)]
    for c in loads:
        cmd += ["--concurrency", str(c)]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr}")
    print(f"  ({time.perf_counter() - t0:.0f} s)")
    return json.loads(done.stdout)


def report(name: str, result: dict, loads: list[int]) -> list[float]:
    errs: list[float] = []
    print(f"{name}: {len(result['candidates'])} placements")
    for k, c in enumerate(loads):
        rows = [(cand, cand["predicted_by_workload"][k], (cand["measured_by_workload"] or [{}])[k])
                for cand in result["candidates"]]
        measured = [(cand, m["throughput_rps"]) for cand, _, m in rows if m.get("throughput_rps")]
        if not measured:
            continue
        best_measured = max(v for _, v in measured)
        chosen = next(v for cand, v in measured if cand is result["candidates"][0]) \
            if result["candidates"][0]["measured_by_workload"] else None
        for cand, p, m in rows:
            got = m.get("throughput_rps")
            if got:
                e = (p["throughput_rps"] - got) / got
                errs.append(abs(e))
                label = " ".join(cand["flags"]) or "declared"
                print(f"  C={c:<3} {label:60.60} predicted {p['throughput_rps']:7.2f} "
                      f"measured {got:7.2f} req/s  error {e:+.1%}")
        if chosen is not None:
            print(f"  C={c}: chosen placement measures x{chosen / best_measured:.3f} of the best "
                  f"measured")
    return errs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    loads = [1, 4] if args.quick else [1, 8]
    requests = 24 if args.quick else 48
    print(f"# tune accuracy, {os.cpu_count()} cores; loads C={loads}; {requests} requests per run")
    all_errs: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        names = ["lock-bound"] if args.quick else list(SYNTHETIC)
        for name in names:
            cfg = Path(tmp) / f"{name}.yaml"
            cfg.write_text(yaml.safe_dump(synthetic_config(name, SYNTHETIC[name])))
            result = tune(["--config", str(cfg)], loads, requests, Path(tmp) / name)
            all_errs += report(name, result, loads)
        if not args.quick:
            result = tune(["qwen3-tts"], loads, requests, Path(tmp) / "qwen3")
            all_errs += report("qwen3-tts (stand-ins)", result, loads)
    if all_errs:
        print(f"throughput prediction error over {len(all_errs)} runs: median "
              f"{statistics.median(all_errs):.1%}, worst {max(all_errs):.1%}")


if __name__ == "__main__":
    main()
