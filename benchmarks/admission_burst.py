"""Admission control under a burst: N concurrent requests (default 300) against
`planner serve MODEL` on this machine; every answer must be a 200 or a 429/503 with Retry-After,
never a 500 and never a hang past the client timeout.

Prints the count of each status, how fast refusals came back (median, max) and the latency of
the served requests; exits 1 when any answer was something else. Bounded in time: the server is
stopped after the burst (or after `--deadline` seconds, whichever comes first).

    python -m benchmarks.admission_burst                        # qwen3-tts, 300 at once
    python -m benchmarks.admission_burst --concurrency 300 --max-queued 32 --input "Hi there."
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import re
import statistics
import subprocess
import sys
import time

import httpx

from benchmarks.machine import cpu_name
from benchmarks.served_process import stop

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
READY = re.compile(r"ready: .* on (http://\S+) ")


def start_server(model: str, max_queued: int | None, deadline: float) -> tuple[subprocess.Popen, str]:
    cmd = [sys.executable, "-m", "planner", "serve", model, "--port", "0", "--device", "cpu"]
    if max_queued is not None:
        cmd += ["--max-queued", str(max_queued)]
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env=env, cwd=ROOT)
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        line = proc.stdout.readline()
        if not line:
            break
        if m := READY.search(line):
            return proc, m.group(1)
    proc.kill()
    raise SystemExit(f"{model} did not become ready within {deadline:g} s")


async def burst(url: str, n: int, text: str, timeout: float) -> list[tuple[int | str, float, bool]]:
    limits = httpx.Limits(max_connections=n, max_keepalive_connections=0)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=timeout) as client:
        gate = asyncio.Event()

        async def one() -> tuple[int | str, float, bool]:
            await gate.wait()
            t = time.perf_counter()
            try:
                r = await client.post("/v1/audio/speech", json={"input": text})
                return r.status_code, time.perf_counter() - t, "retry-after" in r.headers
            except httpx.HTTPError as exc:
                return type(exc).__name__, time.perf_counter() - t, False

        tasks = [asyncio.create_task(one()) for _ in range(n)]
        await asyncio.sleep(0.2)  # every task waits at the gate
        gate.set()
        return await asyncio.gather(*tasks)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="qwen3-tts")
    ap.add_argument("--concurrency", type=int, default=300)
    ap.add_argument("--max-queued", type=int, default=None)
    ap.add_argument("--input", default="Hello there, this is a short sentence.")
    ap.add_argument("--timeout", type=float, default=120.0, help="per request, seconds")
    ap.add_argument("--deadline", type=float, default=180.0, help="server start, seconds")
    args = ap.parse_args()
    proc, url = start_server(args.model, args.max_queued, args.deadline)
    try:
        results = asyncio.run(burst(url, args.concurrency, args.input, args.timeout))
    finally:
        stop(proc)
    counts = collections.Counter(code for code, _, _ in results)
    refused = [s for code, s, _ in results if code in (429, 503)]
    served = [s for code, s, _ in results if code == 200]
    bad = {c: n for c, n in counts.items() if c not in (200, 429, 503)}
    no_retry = sum(1 for code, _, ra in results if code in (429, 503) and not ra)
    print(f"{args.model}: {args.concurrency} concurrent requests, max-queued "
          f"{args.max_queued or 'default'}; {cpu_name()}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    print("  statuses: " + ", ".join(f"{c}: {n}" for c, n in sorted(counts.items(), key=str)))
    if refused:
        print(f"  refusals answered in: median {statistics.median(refused) * 1e3:.0f} ms, "
              f"max {max(refused) * 1e3:.0f} ms; without Retry-After: {no_retry}")
    if served:
        print(f"  served in: median {statistics.median(served):.2f} s, max {max(served):.2f} s")
    return 1 if bad or no_retry else 0


if __name__ == "__main__":
    sys.exit(main())
