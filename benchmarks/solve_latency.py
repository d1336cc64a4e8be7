"""Solve latency: in-process `planner.solve` per card and request, the CLI cold start, and scaling
on synthetic pipelines. Prints medians with min/max; no pass/fail.

    python -m benchmarks.solve_latency            # full run (~1 min)
    python -m benchmarks.solve_latency --quick    # smoke mode used by the tests
    python -m benchmarks.solve_latency --baseline-tree ../old   # also time another checkout's
                                                  # planner.solve on the same requests, same run
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from datetime import date

import planner
from benchmarks.machine import cpu_name
from planner import all_cards


def timed(fn, repeat: int) -> list[float]:
    fn()  # warm caches (card files, imports)
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def fmt(ts: list[float], unit: float = 1e3, suffix: str = "ms") -> str:
    return (f"median {statistics.median(ts) * unit:8.2f} {suffix}  "
            f"(min {min(ts) * unit:.2f}, max {max(ts) * unit:.2f})")


def card_cases():
    """One feasible and one infeasible request per card variant, where the card has one."""
    for card in all_cards():
        for variant in card.variants:
            pl = planner.load_pipeline(card.name, variant=variant)
            feasible = infeasible = None
            for s in pl.stage_names:
                if pl.stage(s).is_tp:
                    continue
                r = planner.solve(card.name, variant=variant, isolate_stages=[s])
                if r.ok and feasible is None:
                    feasible = [s]
                if r.status == "infeasible" and infeasible is None:
                    infeasible = [s]
            yield card.name, variant, feasible, infeasible


def synthetic(n_stages: int, n_gpus: int, n_requests: int, seed: int = 0):
    """A chain of stages over GPUs, grouped four per process, every edge safe with fractions."""
    rng = random.Random(seed)
    per_gpu = 4 * -(-n_stages // (4 * n_gpus))  # whole processes of four stages per GPU
    stages = []
    for i in range(n_stages):
        g = min(i // per_gpu, n_gpus - 1)
        stages.append({"name": f"s{i}", "process": f"p{i // 4}", "gpu": g,
                       "runtime": {"resources": {"total_gpu_memory_fraction": 0.01}},
                       **({"next": f"s{i + 1}"} if i + 1 < n_stages else {"terminal": True})})
    edges = [[f"s{i}", f"s{i + 1}"] for i in range(n_stages - 1)]
    cfg = {"name": f"synthetic-{n_stages}", "stages": stages, "process_safe_edges": edges}
    picks = rng.sample(range(n_stages), n_requests)
    isolate = [f"s{i}" for i in picks[: n_requests // 2]]
    # Moves stay on their stage's GPU, so the all-safe pipeline is feasible.
    assign = [f"s{i}=q{min(i // per_gpu, n_gpus - 1)}_{rng.randrange(3)}"
              for i in picks[n_requests // 2:]]
    return cfg, isolate, assign


# Runs in a child interpreter inside another checkout: the same requests through whatever
# `planner.solve` that checkout has (both accept the flags' values).
_BASELINE_SNIPPET = """
import json, statistics, sys, time
import planner
cases, repeat = json.loads(sys.argv[1])
out = []
for card, variant, req in cases:
    planner.solve(card, variant=variant, isolate_stages=req)
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        planner.solve(card, variant=variant, isolate_stages=req)
        ts.append(time.perf_counter() - t)
    out.append(statistics.median(ts))
print(json.dumps(out))
"""


def medians_in(tree: str | None, cases: list, repeat: int) -> list[float]:
    env = dict(os.environ)
    if tree:
        env["PYTHONPATH"] = os.path.abspath(tree)
    out = subprocess.run([sys.executable, "-c", _BASELINE_SNIPPET, json.dumps([cases, repeat])],
                         capture_output=True, text=True, check=True, env=env,
                         cwd=os.path.abspath(tree) if tree else None)
    return json.loads(out.stdout)


def compare_trees(tree: str, cases: list, repeat: int) -> None:
    """This checkout against `tree`, alternating three rounds so machine noise hits both."""
    ours, theirs = [], []
    for _ in range(3):
        ours.append(medians_in(None, cases, repeat))
        theirs.append(medians_in(tree, cases, repeat))
    ratios = [statistics.median(o[i] for o in ours) / statistics.median(t[i] for t in theirs)
              for i in range(len(cases))]
    print(f"this tree / baseline tree, per request (median of medians): median x"
          f"{statistics.median(ratios):.2f} (min x{min(ratios):.2f}, max x{max(ratios):.2f}) "
          f"over {len(cases)} requests")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="few repetitions, small pipelines")
    ap.add_argument("--baseline-tree", help="another checkout whose planner.solve to time too")
    args = ap.parse_args()
    repeat = 5 if args.quick else 50

    print(f"# solve latency, {date.today()}, {cpu_name()}, Python {platform.python_version()}")
    print("\n## in-process planner.solve per card")
    feas, infeas = [], []
    for card, variant, ok_req, bad_req in card_cases():
        if ok_req:
            ts = timed(lambda: planner.solve(card, variant=variant, isolate_stages=ok_req), repeat)
            feas.extend(ts)
            print(f"{card:16} {variant:10} ok   --isolate-stage {ok_req[0]:18} {fmt(ts)}")
        if bad_req:
            ts = timed(lambda: planner.solve(card, variant=variant, isolate_stages=bad_req), repeat)
            infeas.extend(ts)
            print(f"{card:16} {variant:10} fail --isolate-stage {bad_req[0]:18} {fmt(ts)}")
    print(f"all feasible requests:   {fmt(feas)}")
    print(f"all infeasible requests: {fmt(infeas)}  (with minimal cores and hints)")
    if args.baseline_tree:
        cases = [[c, v, r] for c, v, ok, bad in card_cases() for r in (ok, bad) if r]
        compare_trees(args.baseline_tree, cases, repeat)

    print("\n## CLI cold start: planner solve qwen3-tts --isolate-stage vocoder, vs bare OR-Tools")
    cmd = [sys.executable, "-m", "planner", "solve", "qwen3-tts", "--isolate-stage", "vocoder",
           "--format", "json"]
    bare = [sys.executable, "-c", "import ortools.sat.python.cp_model"]
    # The same import ending without the interpreter's teardown of its modules (pandas, numpy:
    # about 0.13 s here), as `planner` itself ends: what the planner's own work adds is this gap.
    bare_quick = [sys.executable, "-c", "import ortools.sat.python.cp_model, os; os._exit(0)"]
    # Quick: two rounds, each two cold starts of each (`timed` discards a first run): ~6 s.
    rounds = 2 if args.quick else 10
    cold, floor, floor_quick = [], [], []
    for _ in range(rounds):  # interleaved, so all see the same machine
        cold += timed(lambda: subprocess.run(cmd, capture_output=True, check=True), 1)
        floor += timed(lambda: subprocess.run(bare, capture_output=True, check=True), 1)
        floor_quick += timed(lambda: subprocess.run(bare_quick, capture_output=True, check=True),
                             1)
    print(f"cold command:            {fmt(cold, 1, 's')}")
    print(f"bare cp_model import:    {fmt(floor, 1, 's')}")
    print(f"  ... without teardown:  {fmt(floor_quick, 1, 's')}")
    print(f"cold command / bare import: x{statistics.median(cold) / statistics.median(floor):.2f}"
          f" (x{statistics.median(cold) / statistics.median(floor_quick):.2f} of the import "
          "without its teardown)")

    print("\n## synthetic pipelines")
    sizes = [(10, 2, 4), (100, 4, 10)] if args.quick else [(10, 2, 4), (100, 4, 10), (1000, 16, 50)]
    for n, g, k in sizes:
        cfg, iso, asg = synthetic(n, g, k)
        r = planner.solve(config=cfg, isolate_stages=iso, stage_processes=asg)
        ts = timed(lambda: planner.solve(config=cfg, isolate_stages=iso, stage_processes=asg),
                   2 if args.quick else 5)
        print(f"{n:5} stages, {g:2} GPUs, {k:2} requests: {r.status:10} {fmt(ts)}")
        bad_cfg = {**cfg, "process_safe_edges": cfg["process_safe_edges"][::2]}
        r = planner.solve(config=bad_cfg, isolate_stages=iso, stage_processes=asg)
        ts = timed(lambda: planner.solve(config=bad_cfg, isolate_stages=iso, stage_processes=asg),
                   2 if args.quick else 5)
        print(f"{n:5} stages, {g:2} GPUs, {k:2} requests, half the edges unsafe: {r.status:10} "
              f"{len(r.diagnostics):3} diagnostics {fmt(ts)}")

    print("\n## replica packing: --replicas 64 and --replicas max on N nodes x 8 GPUs (cold caches)")
    from planner import Cluster, Node, pack
    from planner.replicas import _place_on_node, node_capacity  # to time cold caches

    cards = ["qwen3-tts", "higgs-tts", "ming-omni-tts"]
    plans = {c: planner.solve(c, variant="tp2" if c == "ming-omni-tts" else None).plan
             for c in cards}
    for nodes in (1, 2, 4, 8, 16, 32, 64, 128) if not args.quick else (1, 16):
        cluster = Cluster(tuple(Node(f"n{i}", 8, 64) for i in range(nodes)))
        cells = []
        for card, plan in plans.items():
            for want in (64, None):
                node_capacity.cache_clear()
                _place_on_node.cache_clear()
                t = time.perf_counter()
                p = pack(plan, cluster, want)
                dt = time.perf_counter() - t
                cells.append(f"{card}{'' if want else ' max'} {dt * 1e3:6.1f} ms"
                             f" ({'fits' if p.fits else 'max ' + str(p.most)})")
        print(f"{nodes:4} nodes: " + "; ".join(cells))


if __name__ == "__main__":
    main()
