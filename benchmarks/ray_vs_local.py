"""`--backend ray` against `--backend local` for one replica, in one run on this machine.

The pipeline is the launcher benchmark's null pipeline (`source -> relay -> sink`, three stages
that only hand a 1 KiB tensor on), split into three processes, so what differs is only how the
processes are run: forked by the launcher (local), or Ray actors in a placement group of a local
Ray instance started here (ray). Both go through `launch_replicas`, as `planner serve` does.
Between workers the two are the same (Unix sockets, shared memory); the control plane differs
(the supervisor talks to actors over TCP instead of pipes), and so does startup.

- startup: `launch_replicas` until every stage is built (Ray: after the Ray instance is up,
  which is timed on its own);
- C=1 latency: median of one `synthesize` at a time;
- C=16 throughput: 16 threads calling `synthesize` in a closed loop.

    python -m benchmarks.ray_vs_local            # about a minute
    python -m benchmarks.ray_vs_local --quick    # smoke run
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import threading
import time
from datetime import date

import planner
from benchmarks.launcher_overhead import CONCURRENCY, KIB, null_pipeline
from benchmarks.machine import cpu_name
from launcher.serving.replica_set import launch_replicas


def _latency(d, n: int) -> float:
    for _ in range(5):
        d.synthesize("x", timeout=60)
    times = []
    for _ in range(n):
        t = time.perf_counter()
        d.synthesize("x", timeout=60)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


def _throughput(d, seconds: float) -> float:
    done, stop = [0] * CONCURRENCY, time.monotonic() + seconds

    def loop(i: int) -> None:
        while time.monotonic() < stop:
            d.synthesize("x", timeout=60)
            done[i] += 1

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(CONCURRENCY)]
    t = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return sum(done) / (time.perf_counter() - t)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true")
    args = p.parse_args()
    n, seconds = (30, 2.0) if args.quick else (300, 10.0)

    pipeline = planner.load(config=null_pipeline(KIB))
    requests = [planner.Isolate("relay"), planner.Isolate("sink")]
    # Three processes on a machine that may have two cores: CPUs are declared, not counted (the
    # same oversubscription for both backends).
    cluster = planner.Cluster((planner.Node("local", 0, None),))
    result = planner.solve_replicas(pipeline, cluster, 1, requests=requests, gpus=False)
    assert result.ok, result.diagnostics
    rows = {}
    from launcher.backends.ray_backend import RaySession

    t = time.perf_counter()
    session = RaySession(num_cpus=max(4, os.cpu_count() or 1))  # a local Ray instance
    ray_up = time.perf_counter() - t
    try:
        for backend in ("local", "ray"):
            ray_cluster = session.cluster() if backend == "ray" else cluster
            packing = result.packing if backend == "local" else planner.solve_replicas(
                pipeline, ray_cluster, 1, requests=requests, gpus=False).packing
            t = time.perf_counter()
            replicas = launch_replicas(result.plan, packing, "cpu", backend=backend,
                                       session=session if backend == "ray" else None,
                                       cluster=ray_cluster)
            startup = time.perf_counter() - t
            with replicas:
                rows[backend] = (startup, _latency(replicas, n), _throughput(replicas, seconds))
            if backend == "ray":
                session = None  # closed with the replicas
    finally:
        if session is not None:
            session.close()
    print(f"ray vs local, one replica of a null 3-process pipeline (1 KiB), {date.today()}, "
          f"{cpu_name()}, {os.cpu_count()} CPUs, "
          f"python {platform.python_version()}")
    print(f"local Ray instance up in {ray_up:.1f} s")
    print(f"{'backend':8} {'startup s':>10} {'C=1 p50 ms':>11} {'C=16 req/s':>11}")
    for backend, (startup, lat, rps) in rows.items():
        print(f"{backend:8} {startup:10.1f} {lat:11.2f} {rps:11.0f}")
    (s0, l0, r0), (s1, l1, r1) = rows["local"], rows["ray"]
    print(f"ray/local: startup x{s1 / s0:.2f}, C=1 latency x{l1 / l0:.2f}, "
          f"C=16 throughput x{r1 / r0:.2f}")


if __name__ == "__main__":
    main()
