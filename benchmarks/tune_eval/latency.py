"""How long `planner tune --profile FILE` takes to answer, cold, per built-in card: the whole
command as a user runs it, against the floor under it (a bare interpreter importing the planner,
OR-Tools with it), and, in this process, the simulation of every placement in one process
against the same spread over forked workers. Runs interleave (A B C, A B C, ...), so a slow spell
of the machine falls on every card alike. Prints medians with min/max; no pass/fail.

    python -m benchmarks.tune_eval.latency benchmarks/tune_runs/2026-11-30/14-card-profiles/
    python -m benchmarks.tune_eval.latency PROFILE.json ... --repeat 9 --concurrency 1 \\
        --concurrency 8

Each FILE is a profile (`planner tune --output DIR` writes DIR/profile.json) or a saved tune
answer (its "profile"); its "model" names the card.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import planner
from benchmarks.machine import cpu_name
from planner.tune.model import Workload
from planner.tune.parallel import predict_many, usable_cores
from planner.tune.profile import Profile

# The command as installed (what a user times), else the module.
_SCRIPT = Path(sys.executable).with_name("planner")
PLANNER = [str(_SCRIPT)] if _SCRIPT.is_file() else [sys.executable, "-m", "planner"]


def profiles(paths: list[str], tmp: Path) -> dict[str, Path]:
    """card -> profile file, from files and directories of them (answers are unpacked into
    `tmp`)."""
    out: dict[str, Path] = {}
    files = [f for p in map(Path, paths) for f in (sorted(p.glob("*.json")) if p.is_dir() else [p])]
    for f in files:
        data = json.loads(f.read_text(encoding="utf-8"))
        data = data.get("profile", data)
        if "model" not in data or "stages" not in data:
            continue
        path = tmp / f"{data['model']}.json"
        path.write_text(json.dumps(data), encoding="utf-8")
        out[data["model"]] = path
    return out


def wall(cmd: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def fmt(ts: list[float]) -> str:
    return (f"median {statistics.median(ts):5.2f} s  (min {min(ts):.2f}, max {max(ts):.2f})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+", help="profile or answer files, or directories of them")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--concurrency", type=int, action="append",
                    help="loads to predict (repeatable; default tune's own, C=1 and C=4)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="tune-latency-") as tmp:
        return measure(args, Path(tmp))


def measure(args: argparse.Namespace, tmp: Path) -> int:
    cards = profiles(args.paths, tmp)
    if not cards:
        sys.exit(f"no profiles in {' '.join(args.paths)}")
    plans = {card: [f.plan for f in planner.feasible_placements(planner.load(model_path=card))]
             for card in cards}
    loads = [f"--concurrency={c}" for c in args.concurrency or ()]
    out = tmp / "answers"
    cmds = {card: PLANNER + ["tune", card, "--profile", str(p), "--output", str(out / card),
                             *loads] for card, p in sorted(cards.items())}
    floor = [sys.executable, "-c", "import planner.app.cli, planner.app.tune.command"]
    try:
        load_avg = os.getloadavg()[0]
    except OSError:
        load_avg = float("nan")
    print(f"# tune latency, {date.today()}, {cpu_name()}, "
          f"{os.cpu_count()} cores ({usable_cores()} usable), load average {load_avg:.1f}, "
          f"Python {platform.python_version()}; loads {' '.join(loads) or 'C=1 C=4'}; "
          f"{args.repeat} runs each, interleaved")
    times: dict[str, list[float]] = {card: [] for card in cmds}
    times["(floor: import the planner)"] = []
    for _ in range(args.repeat):
        times["(floor: import the planner)"].append(wall(floor))
        for card, cmd in cmds.items():
            times[card].append(wall(cmd))
    for name, ts in times.items():
        placements = f"{len(plans[name]):3d} placements" if name in cards else ""
        print(f"{name:30s} {placements:15s} {fmt(ts)}")

    print("\n# the simulation alone, in this process: serial against forked workers")
    workloads = tuple(Workload(concurrency=c) for c in (args.concurrency or (1, 4)))
    for card, path in sorted(cards.items()):
        profile = Profile.load(path)
        serial, forked = [], []
        for _ in range(max(1, args.repeat // 2)):
            t = time.perf_counter()
            predict_many(plans[card], profile, workloads, jobs=1)
            serial.append(time.perf_counter() - t)
            t = time.perf_counter()
            predict_many(plans[card], profile, workloads)
            forked.append(time.perf_counter() - t)
        s, f = statistics.median(serial), statistics.median(forked)
        print(f"{card:30s} {len(plans[card]):3d} placements  serial {s:5.2f} s, forked {f:5.2f} s "
              f"(x{s / f:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
