"""How good are `planner tune`'s predictions? For each pipeline: profile it, predict every
placement the planner accepts, then serve every one of them with `planner bench` under the same
closed-loop loads (`planner tune --verify` with K = all), and report

- the median and worst throughput prediction error over all candidates and loads;
- per load, the measured throughput of the placement tune chooses for that load alone (as
  `planner tune --concurrency C` would), and of its one choice for all loads at once, over the
  best measured one.

    python -m benchmarks.tune_eval.accuracy                         # the default set (~18 min)
    python -m benchmarks.tune_eval.accuracy --quick                 # one pipeline, C=1 and C=4
    python -m benchmarks.tune_eval.accuracy --pipeline four-mixed   # a 4-stage one (~12 min)
    python -m benchmarks.tune_eval.accuracy --pipeline device-bound # mostly a device wait (~4 min)
    python -m benchmarks.tune_eval.accuracy --pipeline held-out     # a per-chunk terminal (~4 min)
    python -m benchmarks.tune_eval.accuracy --config my.yaml        # a pipeline of your own
    python -m benchmarks.tune_eval.accuracy --chart benchmarks/tune_accuracy.png  # and plot them

Pipelines: synthetic stages with known costs (`launcher.synthetic`) that stress different
resources, and the built-in qwen3-tts card with its stand-in stages.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

import planner
from planner.flags import flags
from planner.tune.choose import choose
from planner.tune.model import Workload
from planner.tune.profile import Profile

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
# Run only when named (`--pipeline`): four-mixed's four stages make 15 placements, about 5 minutes.
EXTRA = {
    # Mostly waiting on a device (a sleep here), little CPU.
    "device-bound": [("front", {"device_ms": 10.0, "gil_ms": 0.5}),
                     ("engine", {"gil_ms": 2.0, "device_ms": 15.0}),
                     ("out", {"gil_ms": 1.0, "audio_ms": 300.0})],
    # Pure Python, native work in hashing calls, a streaming stage, a terminal one with both.
    "four-mixed": [("a", {"gil_ms": 3.0}), ("b", {"gil_ms": 1.0, "native_ms": 6.0}),
                   ("c", {"gil_ms": 4.0, "chunks": 4, "out_bytes": 32768}),
                   ("d", {"gil_ms": 1.0, "native_ms": 1.0, "audio_ms": 300.0})],
    # First run only after the rules of 2026-11-30 were set: a device-waiting encoder, a
    # streaming engine, and a terminal stage that does its work once per chunk it is handed.
    "held-out": [("enc", {"native_ms": 3.0, "device_ms": 2.0}),
                 ("lm", {"gil_ms": 2.0, "native_ms": 4.0, "chunks": 4, "out_bytes": 8192}),
                 ("voc", {"gil_ms": 1.5, "native_ms": 1.0, "audio_ms": 300.0})],
}
QWEN3 = "qwen3-tts"
CARDS = [card.name for card in planner.all_cards()]


@dataclass(frozen=True)
class Point:
    """One candidate placement at one load: what tune predicted and what the bench measured."""

    pipeline: str
    placement: str
    concurrency: int
    predicted_rps: float
    measured_rps: float
    chosen: bool

    @property
    def error(self) -> float:
        return (self.predicted_rps - self.measured_rps) / self.measured_rps


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
            "process_safe_edges": [[a, b] for (a, _), (b, _) in itertools.pairwise(stages)]}


def tune(target: list[str], loads: list[int], requests: int, out: Path,
         save: Path | None) -> dict:
    cmd = [sys.executable, "-m", "planner", "tune", *target, "--verify", "99", "--format",
           "json", "--output", str(out), "--requests", str(requests)]
    for c in loads:
        cmd += ["--concurrency", str(c)]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr}")
    print(f"  ({time.perf_counter() - t0:.0f} s)")
    if save is not None:
        save.mkdir(parents=True, exist_ok=True)
        (save / f"{out.name}.json").write_text(done.stdout, encoding="utf-8")
        if target[0] == "--config":  # the pipeline itself, for replay.py
            (save / f"{out.name}.yaml").write_text(Path(target[1]).read_text(encoding="utf-8"),
                                                    encoding="utf-8")
    return json.loads(done.stdout)


def choice_at(result: dict, pipeline: planner.Pipeline, load: int) -> int:
    """The candidate `planner tune --concurrency C` picks with this load alone, asked of
    `planner.tune.choose` with the run's own profile. With several loads at once tune ranks by
    their geometric mean, which can only pick one placement for all of them."""
    profile = Profile.from_dict(result["profile"])
    best = choose(pipeline, profile, (Workload(concurrency=load),)).best
    return next(i for i, c in enumerate(result["candidates"])
                if c["flags"] == list(flags(best.requests)))


def label(candidate: dict) -> str:
    return " ".join(candidate["flags"]) or "declared"


def report(name: str, result: dict, loads: list[int], pipeline: planner.Pipeline) -> list[Point]:
    points: list[Point] = []
    candidates = result["candidates"]
    print(f"{name}: {len(candidates)} placements")
    for k, c in enumerate(loads):
        load_points = []
        chosen_here = choice_at(result, pipeline, c)
        for i, cand in enumerate(candidates):
            got = ((cand["measured_by_workload"] or [{}])[k]).get("throughput_rps")
            if got:
                load_points.append(Point(name, label(cand), c,
                                         cand["predicted_by_workload"][k]["throughput_rps"], got,
                                         chosen=i == chosen_here))
        for p in load_points:
            print(f"  C={c:<3} {p.placement:60.60} predicted {p.predicted_rps:7.2f} "
                  f"measured {p.measured_rps:7.2f} req/s  error {p.error:+.1%}")
        if load_points:
            best = max(p.measured_rps for p in load_points)
            measured = {p.placement: p.measured_rps for p in load_points}
            here, overall = label(candidates[chosen_here]), label(candidates[0])
            if here in measured:
                print(f"  C={c}: tune's choice for C={c} alone ({here}) measures "
                      f"x{measured[here] / best:.3f} of the best measured")
            if overall in measured:
                print(f"  C={c}: tune's choice for all loads at once ({overall}) measures "
                      f"x{measured[overall] / best:.3f} of the best measured")
        points += load_points
    return points


def chart(points: list[Point], path: Path, title: str) -> None:
    """Predicted against measured throughput, one marker per pipeline and load; the diagonal is
    a perfect prediction, the band around it +-15%."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 6.0), dpi=120)
    top = 1.1 * max(max(p.predicted_rps, p.measured_rps) for p in points)
    ax.plot([0, top], [0, top], color="black", linewidth=0.8, label="predicted = measured")
    ax.fill_between([0, top], [0, top * 0.85], [0, top * 1.15], color="0.9",
                    label="within 15%")
    markers = dict(zip(sorted({p.concurrency for p in points}), "os^Dv"))
    for i, name in enumerate(dict.fromkeys(p.pipeline for p in points)):
        for c, marker in markers.items():
            mine = [p for p in points if p.pipeline == name and p.concurrency == c]
            if mine:
                ax.scatter([p.measured_rps for p in mine], [p.predicted_rps for p in mine],
                           marker=marker, color=f"C{i}", label=f"{name}, C={c}",
                           edgecolors=["black" if p.chosen else "none" for p in mine])
    ax.set(xlim=(0, top), ylim=(0, top), xlabel="measured throughput (req/s, planner bench)",
           ylabel="predicted throughput (req/s, planner tune)", title=title)
    ax.legend(fontsize=7, loc="upper left")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    print(f"chart: {path}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--chart", type=Path, metavar="PNG",
                    help="also plot predicted against measured throughput to this file")
    ap.add_argument("--pipeline", action="append", metavar="NAME",
                    choices=[*SYNTHETIC, *EXTRA, *CARDS],
                    help=f"only these pipelines (repeatable; default: {', '.join(SYNTHETIC)} and "
                         f"{QWEN3}; also {', '.join(EXTRA)}, or any built-in card, served with "
                         "its stand-in stages)")
    ap.add_argument("--config", action="append", type=Path, default=[], metavar="FILE",
                    help="also a pipeline of your own, as a planner YAML config (repeatable); "
                         "with --config alone, only those")
    ap.add_argument("--requests", type=int, metavar="N",
                    help="measured requests per placement and load (default 96, as planner "
                         "bench; --quick 24)")
    ap.add_argument("--save", type=Path, metavar="DIR",
                    help="keep each pipeline's `planner tune --format json` answer (profile, "
                         "predictions, measurements) as DIR/NAME.json, and its config as "
                         "DIR/NAME.yaml, to study offline")
    args = ap.parse_args()
    loads = [1, 4] if args.quick else [1, 8]
    requests = args.requests or (24 if args.quick else 96)
    print(f"# tune accuracy, {os.cpu_count()} cores; loads C={loads}; {requests} requests per run")
    points: list[Point] = []
    with tempfile.TemporaryDirectory() as tmp:
        default = [] if args.config else (["lock-bound"] if args.quick else [*SYNTHETIC, QWEN3])
        names = args.pipeline or default
        for name in names:
            if name in CARDS:
                result = tune([name], loads, requests, Path(tmp) / name, args.save)
                points += report(f"{name} (stand-ins)", result, loads,
                                 planner.load(model_path=name))
                continue
            cfg = Path(tmp) / f"{name}.yaml"
            stages = {**SYNTHETIC, **EXTRA}[name]
            cfg.write_text(yaml.safe_dump(synthetic_config(name, stages)))
            result = tune(["--config", str(cfg)], loads, requests, Path(tmp) / name, args.save)
            points += report(name, result, loads, planner.load(config=str(cfg)))
        for cfg in args.config:
            result = tune(["--config", str(cfg)], loads, requests, Path(tmp) / cfg.stem,
                          args.save)
            points += report(cfg.stem, result, loads, planner.load(config=str(cfg)))
    if not points:
        return
    errs = [abs(p.error) for p in points]
    summary = (f"throughput prediction error over {len(errs)} runs: median "
               f"{statistics.median(errs):.1%}, worst {max(errs):.1%}")
    print(summary)
    if args.chart:
        chart(points, args.chart, f"planner tune: {summary.split(': ')[1]}\n"
                                  f"{os.cpu_count()} cores, {requests} requests per run, "
                                  f"{time.strftime('%Y-%m-%d')}")


if __name__ == "__main__":
    main()
