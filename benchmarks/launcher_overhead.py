"""Launcher overhead: a null pipeline in one process against the same pipeline split in three.

The pipeline is three stages that do no work and only hand a tensor on (`source -> relay ->
sink`, `launcher.standins:null_stage`), planned with `planner.solve` and run through
`launcher.launch(plan)`, as a user would. "one" runs the three stages in one process; "split"
isolates `relay` and `sink`, so every request crosses two process boundaries (plus the result's
way back to the caller, which both placements pay). Measured in one run, on one machine:

- C=1 latency: median time of one `synthesize` call with a 1 KiB payload, one request at a time;
- C=16 throughput: 16 threads calling `synthesize` in a closed loop, requests per second;
- CPU per request at C=16, per process (Linux): the split's work and the one's, side by side;
- 64 MiB crossing: (median split latency - median one-process latency) / 2 crossings with a
  64 MiB payload, against a plain `copy_` of 64 MiB (the least a crossing can cost: the bytes
  move once, into shared memory, and the reader views them in place).

Goals (issue 8): latency split/one <= 1.5, throughput split/one >= 0.8, crossing <= 1.5x copy.
Prints the numbers and ratios; no pass/fail.

The throughput ratio depends on the cores: "one" is a chain of two interpreter locks (the
caller's and the worker's) that a second core barely speeds up, while the split's processes run
side by side. `--cores N` runs everything (the workers inherit it) on the first N CPUs of this
process, so one machine shows how the ratio moves with cores.

    python -m benchmarks.launcher_overhead            # full run (about a minute)
    python -m benchmarks.launcher_overhead --cores 1  # the same on one core
    python -m benchmarks.launcher_overhead --quick    # smoke run (about 10 s)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import os
import statistics
import threading
import time
from datetime import date

import torch

import launcher
import planner
from benchmarks.handoff_cost import MIB, memory_copy  # the same baseline: a plain copy_
from benchmarks.machine import cpu_name
from planner.app.bench.machine import process_cpu_s

KIB = 1 << 10
BIG = 64 * MIB
CONCURRENCY = 16
GOALS = {"latency": 1.5, "throughput": 0.8, "crossing": 1.5}
FACTORY = "launcher.standins:null_stage"


def null_pipeline(payload_bytes: int) -> dict:
    def stage(name: str, nxt: str | None, role: str) -> dict:
        s = {"name": name, "process": "pipeline", "factory": FACTORY,
             "args": {"role": role, "payload_bytes": payload_bytes}}
        return {**s, "next": nxt} if nxt else {**s, "terminal": True}

    return {"name": "null-pipeline",
            "stages": [stage("source", "relay", "source"), stage("relay", "sink", "relay"),
                       stage("sink", None, "sink")],
            "process_safe_edges": [["source", "relay"], ["relay", "sink"]]}


PLACEMENTS = {"one": [], "split": ["relay", "sink"]}


def plan_for(placement: str, payload_bytes: int) -> planner.Plan:
    result = planner.solve(config=null_pipeline(payload_bytes),
                           isolate_stages=PLACEMENTS[placement])
    assert result.ok, result.diagnostics
    return result.plan


def latencies(deployment: launcher.Deployment, n: int, warmup: int) -> list[float]:
    out = []
    for i in range(warmup + n):
        t = time.perf_counter()
        deployment.synthesize("x", timeout=60)
        if i >= warmup:
            out.append(time.perf_counter() - t)
    return out


def throughput(deployment: launcher.Deployment, clients: int, seconds: float,
               cpu: dict[str, list[float]] | None = None) -> float:
    """Requests per second; with `cpu`, also appends each process's CPU time per request
    (in seconds) over the counted window: "caller" (the supervisor and the client threads) and
    each worker by name."""
    done = [0] * clients
    start = threading.Barrier(clients + 1)
    stop = threading.Event()

    def client(i: int) -> None:
        start.wait()
        while not stop.is_set():
            deployment.synthesize("x", timeout=60)
            done[i] += 1

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    start.wait()
    time.sleep(min(0.5, seconds / 4))  # ramp-up, not counted
    pids = {"caller": os.getpid(), **deployment.worker_pids()}
    cpu_before = {name: process_cpu_s(pid) for name, pid in pids.items()}
    before, t0 = sum(done), time.perf_counter()
    time.sleep(seconds)
    after, t1 = sum(done), time.perf_counter()
    cpu_after = {name: process_cpu_s(pid) for name, pid in pids.items()}
    if cpu is not None and after > before:
        for name in pids:
            if cpu_before[name] is not None and cpu_after[name] is not None:
                cpu.setdefault(name, []).append(
                    (cpu_after[name] - cpu_before[name]) / (after - before))
    stop.set()
    for t in threads:
        t.join()
    return (after - before) / (t1 - t0)


def _echo(conn) -> None:
    while (data := conn.recv_bytes()) != b"stop":
        conn.send_bytes(data)


def pipe_round_trips(repeat: int) -> dict[str, float]:
    """The floor under a crossing on this machine: a 1-byte pipe round trip to another process,
    back to back, and after the receiver slept 0.5 ms (as a pipeline stage at C=1 has)."""
    ctx = mp.get_context("spawn")
    here, there = ctx.Pipe()
    child = ctx.Process(target=_echo, args=(there,), daemon=True)
    child.start()
    out = {}
    try:
        for name, gap in (("back_to_back_s", 0.0), ("after_idle_s", 0.0005)):
            times = []
            for _ in range(repeat):
                if gap:
                    time.sleep(gap)
                t = time.perf_counter()
                here.send_bytes(b"x")
                here.recv_bytes()
                times.append(time.perf_counter() - t)
            out[name] = statistics.median(times)
    finally:
        here.send_bytes(b"stop")
        child.join(5)
    return out


def measure(args: argparse.Namespace) -> dict:
    """Both placements run side by side and are measured in turn, round after round, so that a
    machine busy with something else now and then disturbs both alike; medians of the rounds."""
    n_small, n_big = (40, 5) if args.quick else (300, 20)
    seconds = 0.5 if args.quick else 3.0
    rounds = 1 if args.quick else args.rounds
    per: dict[str, dict[str, list[float]]] = {p: {"latency_s": [], "throughput_rps": [],
                                                  "big_latency_s": []} for p in PLACEMENTS}
    cpu: dict[str, dict[str, list[float]]] = {p: {} for p in PLACEMENTS}
    with contextlib.ExitStack() as stack:
        small = {p: stack.enter_context(launcher.launch(plan_for(p, KIB), device="cpu"))
                 for p in PLACEMENTS}
        # What the workers may run on (`--cores` reaches them only through inheritance).
        worker_cpus = sorted({len(os.sched_getaffinity(pid)) for d in small.values()
                              for pid in d.worker_pids().values()})
        for _ in range(rounds):
            for p, d in small.items():
                per[p]["latency_s"].append(statistics.median(latencies(d, n_small, warmup=20)))
            for p, d in small.items():
                per[p]["throughput_rps"].append(throughput(d, CONCURRENCY, seconds, cpu[p]))
    with contextlib.ExitStack() as stack:
        big = {p: stack.enter_context(launcher.launch(plan_for(p, BIG), device="cpu"))
               for p in PLACEMENTS}
        for _ in range(rounds):
            for p, d in big.items():
                per[p]["big_latency_s"].append(statistics.median(latencies(d, n_big, warmup=3)))
    out: dict = {p: {k: statistics.median(v) for k, v in m.items()} for p, m in per.items()}
    out["rounds"] = per
    out["worker_cpus"] = worker_cpus
    out["cpu_per_request_s"] = {p: {name: statistics.median(v) for name, v in c.items()}
                                for p, c in cpu.items()}
    copy = statistics.median(memory_copy(BIG, 10 if args.quick else 50))
    crossings = [(b - a) / 2 for a, b in zip(per["one"]["big_latency_s"],
                                             per["split"]["big_latency_s"])]
    out["memcpy_64mib_s"] = copy
    out["pipe_round_trip"] = pipe_round_trips(50 if args.quick else 500)
    out["crossing_64mib_s"] = statistics.median(crossings)
    out["ratios"] = {
        "latency": out["split"]["latency_s"] / out["one"]["latency_s"],
        "throughput": out["split"]["throughput_rps"] / out["one"]["throughput_rps"],
        "crossing": out["crossing_64mib_s"] / copy,
    }
    out["ratio_ranges"] = {
        "latency": _range(per["split"]["latency_s"], per["one"]["latency_s"]),
        "throughput": _range(per["split"]["throughput_rps"], per["one"]["throughput_rps"]),
        "crossing": [min(crossings) / copy, max(crossings) / copy],
    }
    return out


def _range(a: list[float], b: list[float]) -> list[float]:
    ratios = [x / y for x, y in zip(a, b)]
    return [min(ratios), max(ratios)]


def report(r: dict, quick: bool) -> str:
    one, split, ratio, spread = r["one"], r["split"], r["ratios"], r["ratio_ranges"]

    def verdict(key: str, sign: str) -> str:
        ok = ratio[key] <= GOALS[key] if sign == "<=" else ratio[key] >= GOALS[key]
        low, high = spread[key]
        return (f"x{ratio[key]:5.2f} (rounds x{low:.2f}-x{high:.2f})  goal {sign} "
                f"{GOALS[key]:g} {'ok' if ok else 'MISSED'}")

    rounds = len(r["rounds"]["one"]["latency_s"])
    return "\n".join([
        f"launcher overhead, {date.today()}, {cpu_name()}, "
        f"{_cores_text()}, "
        f"torch {torch.__version__}; medians of {rounds} round(s){' (quick)' if quick else ''}",
        "null pipeline source -> relay -> sink; one: 1 process; split: 3 processes "
        "(2 crossings per request)",
        f"  {'':28s} {'one':>11s} {'split':>11s}   split/one",
        f"  {'C=1 latency, 1 KiB':28s} {one['latency_s'] * 1e3:8.2f} ms "
        f"{split['latency_s'] * 1e3:8.2f} ms   {verdict('latency', '<=')}",
        f"  {f'C={CONCURRENCY} throughput, 1 KiB':28s} {one['throughput_rps']:5.0f} req/s "
        f"{split['throughput_rps']:5.0f} req/s   {verdict('throughput', '>=')}",
        f"  {'C=1 latency, 64 MiB':28s} {one['big_latency_s'] * 1e3:8.2f} ms "
        f"{split['big_latency_s'] * 1e3:8.2f} ms",
        f"  64 MiB crossing {r['crossing_64mib_s'] * 1e3:.2f} ms, plain copy_ "
        f"{r['memcpy_64mib_s'] * 1e3:.2f} ms: {verdict('crossing', '<=')}",
        *_cpu_lines(r["cpu_per_request_s"]),
        f"  floor: a pipe round trip to another process takes "
        f"{r['pipe_round_trip']['back_to_back_s'] * 1e6:.0f} us back to back, "
        f"{r['pipe_round_trip']['after_idle_s'] * 1e6:.0f} us after the receiver slept 0.5 ms",
    ])


def _cpu_lines(cpu: dict[str, dict[str, float]]) -> list[str]:
    """Where the CPU goes at C=16: on a machine with fewer cores than busy processes, the
    throughput ratio cannot beat the ratio of the CPU each request costs."""
    if not all(cpu.values()):
        return []
    totals = {p: sum(c.values()) for p, c in cpu.items()}
    lines = [f"  CPU per request at C={CONCURRENCY} (caller = supervisor + client threads):"]
    for p, c in cpu.items():
        parts = ", ".join(f"{name} {v * 1e6:.0f}" for name, v in c.items())
        lines.append(f"    {p:5s} {totals[p] * 1e6:4.0f} us = {parts}")
    lines.append(f"    one/split x{totals['one'] / totals['split']:.2f}: the throughput ratio if both "
                 f"were bound by CPU alone ({_cores_text()} here)")
    return lines


def _cores_text() -> str:
    used, total = len(os.sched_getaffinity(0)), os.cpu_count()
    return f"{used} cores" if used == total else f"{used} of {total} cores"


def _restrict_to(cores: int) -> None:
    """Run this process, and every worker it starts from now on, on its first `cores` CPUs."""
    allowed = sorted(os.sched_getaffinity(0))
    if not 1 <= cores <= len(allowed):
        raise SystemExit(f"--cores {cores}: this process may use 1 to {len(allowed)} CPUs")
    os.sched_setaffinity(0, allowed[:cores])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (smoke run)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per measurement (5)")
    parser.add_argument("--json", action="store_true", help="print the raw numbers as JSON too")
    parser.add_argument("--cores", type=int, default=None,
                        help="run on this many CPUs only (Linux; default: all this process may use)")
    args = parser.parse_args()
    if args.cores is not None:
        _restrict_to(args.cores)  # before any worker (or the fork server) starts
    torch.set_num_threads(1)  # as in a worker process
    result = measure(args)
    print(report(result, args.quick))
    if args.json:
        print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
