"""Load generator accuracy: how far behind its schedule `planner bench`'s open-loop generator sends,
and whether it measures time to first audio and latency right, against a server whose timings
are known.

The server (a child process: uvicorn + Starlette, nothing of the launcher) answers every speech
request like a streaming TTS would, with no CPU work: it waits FIRST_S, then sends CHUNKS chunks
of silence CHUNK_S apart. So each request's time to first audio is FIRST_S and its latency
FIRST_S + (CHUNKS - 1) * CHUNK_S plus the HTTP overhead, whatever the rate: the only thing that
grows with the rate is the client's own work (in flight = rate x latency). For each rate it prints
the schedule lag (send time - due time) p50/p99/max, late requests (sent >= 1 ms after due), and
the measured TTFA and latency next to the known values.

    python -m benchmarks.loadgen_lag            # 10-100 req/s, 500 requests each (~3 min)
    python -m benchmarks.loadgen_lag --quick    # smoke mode used by the tests (~5 s)
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
import threading
import time
from datetime import date

from benchmarks.machine import cpu_name
from planner.app.bench.arrivals import realtime
from planner.app.bench.load_results import LATE_S
from planner.app.bench.load_shapes import Closed, Load, Open, arrival_times
from planner.app.bench.loadgen import run_load
from planner.app.bench.stats import percentile

FIRST_S, CHUNKS, CHUNK_S, CHUNK_BYTES = 0.05, 4, 0.02, 9600  # 0.2 s of 24 kHz PCM per chunk

SERVER = f"""
import asyncio, sys, uvicorn
from starlette.applications import Starlette
from starlette.responses import StreamingResponse
from starlette.routing import Route

async def speech(request):
    await request.body()
    async def body():
        await asyncio.sleep({FIRST_S})
        for k in range({CHUNKS}):
            if k:
                await asyncio.sleep({CHUNK_S})
            yield bytes({CHUNK_BYTES})
    return StreamingResponse(body(), media_type="audio/pcm", headers={{"x-sample-rate": "24000"}})

app = Starlette(routes=[Route("/v1/audio/speech", speech, methods=["POST"])])
config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="info", access_log=False,
                        backlog=4096)
uvicorn.Server(config).run()
"""


def start_server() -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-c", SERVER], stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    for line in proc.stderr:
        m = re.search(r"Uvicorn running on (http://[\d.]+:\d+)", line)
        if m:
            return proc, m[1]
    raise RuntimeError("the test server did not start")


def os_floor(rate: float, requests: int) -> list[float]:
    """The same schedule kept by a bare thread that only sleeps, at the priority the generator's
    sender process gets: the machine's own wake-up jitter, which no generator can beat (a
    baseline measured in the same run)."""
    times = arrival_times(Open(rate), 1, count=requests)
    lags: list[float] = []

    def keep() -> None:
        realtime()
        t0 = time.perf_counter()
        for due in times:
            while (left := t0 + due - time.perf_counter()) > 0:
                time.sleep(left)
            lags.append(time.perf_counter() - t0 - due)

    thread = threading.Thread(target=keep)
    thread.start()
    thread.join()
    return sorted(lags)


def cpu_time() -> float:
    """CPU seconds of this process and of its children that have ended: the load generator's
    sender process ends with each load (the server, still running, is not counted)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def ms(x: float) -> str:
    return f"{x * 1000:7.2f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="two rates, 25 requests each")
    ap.add_argument("--requests", type=int, help="requests per rate")
    ap.add_argument("--rate", type=float, action="append", help="rates to run (repeatable)")
    args = ap.parse_args()
    rates = args.rate or ([20.0, 50.0] if args.quick else [10.0, 25.0, 50.0, 100.0])
    # Quick: enough requests for a schedule at each rate, a smoke run's worth of seconds (each
    # rate runs twice as long as its schedule, the bare-thread baseline after the load).
    requests = args.requests or (25 if args.quick else 500)
    known_latency = FIRST_S + (CHUNKS - 1) * CHUNK_S

    machine = cpu_name()
    print(f"# load generator accuracy, {date.today()}, {machine} ({os.cpu_count()} CPUs), "
          f"Python {platform.python_version()}")
    print(f"server: first audio after {FIRST_S * 1000:g} ms, {CHUNKS} chunks {CHUNK_S * 1000:g} "
          f"ms apart (latency {known_latency * 1000:g} ms), no CPU work; Poisson arrivals, "
          f"{requests} requests per rate, streaming\n")
    print("## schedule lag and measured timings")
    print(f"{'rate':>6} {'in flight':>9}  {'lag p50':>8} {'lag p99':>8} {'lag max':>8} "
          f"{'late':>5}  {'TTFA p50':>9} {'TTFA p99':>9} {'lat p50':>8} {'lat p99':>8}   "
          f"{'sleep p99':>9}  (ms)")
    proc, url = start_server()
    priorities = set()
    try:
        run_load(url, Load(Closed(4), ("Warm up.",), 16, None, True))  # connections, imports
        for rate in rates:
            t0, cpu0 = time.perf_counter(), cpu_time()
            r = run_load(url, Load(Open(rate), ("Some text to speak.",), requests, None, True,
                                   seed=1))
            wall, cpu = time.perf_counter() - t0, (cpu_time() - cpu0) / requests
            priorities.add(r.sender_realtime)
            floor = os_floor(rate, requests)
            lag, ttfa, lat = r.lag, r.ttfa, r.latency
            if lag is None or ttfa is None or lat is None or r.errors:
                print(f"{rate:6g}  {r.errors} errors, e.g. {r.error_messages(1)}")
                continue
            print(f"{rate:6g} {rate * lat.mean:9.1f}  {ms(lag.p50)}  {ms(lag.p99)}  "
                  f"{ms(lag.max)} {r.late:5d}  {ms(ttfa.p50)}   {ms(ttfa.p99)}  "
                  f"{ms(lat.p50)}  {ms(lat.p99)}    {ms(percentile(floor, 99))}  {ms(cpu)}  "
                  f"[{wall:.1f} s]")
    finally:
        proc.terminate()
        proc.wait(10)
    priority = {frozenset({True}): "real-time (SCHED_FIFO 1)", frozenset({False}): "normal"}
    print(f"\nsender process priority: {priority.get(frozenset(priorities), 'mixed')}")
    print(f"late: sent {LATE_S * 1000:g} ms or more after due. Known: TTFA "
          f"{FIRST_S * 1000:g} ms, latency {known_latency * 1000:g} ms, plus HTTP overhead. "
          "sleep p99: the same schedule kept by a bare thread that only sleeps, at the sender's "
          "priority, right after: "
          "the machine's own wake-up jitter, the floor under the lag. CPU/req: the client's "
          "CPU time per request (writing, the spin before each due time, reading and parsing "
          "the response): 1 / CPU/req is the most the generator can send from one core, and it "
          "needs a share of a core that the server does not take.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
