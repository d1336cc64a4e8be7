"""Memory of a served tree: `planner serve MODEL` and every process under it, after requests.

Starts `planner serve MODEL --port 0` (extra arguments after `--` go to it), waits for its ready
line, sends `--requests` speech requests one after the other, then reads each process's
proportional set size (PSS: shared pages divided among the processes that map them, so the sum
is what the tree costs) and resident set size (RSS) from /proc/PID/smaps_rollup (Linux). Prints
one row per process, the sums, and the time from start to the ready line.

    python -m benchmarks.served_memory piper-joe
    python -m benchmarks.served_memory qwen3-tts -- --isolate-stage code2wav
    python -m benchmarks.served_memory piper-joe --json
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
import urllib.request

from benchmarks.process_tree import stat_fields, tree
from benchmarks.served_process import stop


def memory_kib(pid: int) -> dict[str, int]:
    fields = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name in ("Rss", "Pss"):
                fields[name.lower()] = int(rest.split()[0])
    return fields


def parent_is_forkserver(pid: int) -> bool:
    fields = stat_fields(pid)
    if fields is None:
        return False  # gone meanwhile
    ppid = fields[1]
    with open(f"/proc/{ppid}/cmdline", "rb") as f:
        return b"forkserver" in f.read()


def describe(pid: int, root: int) -> str:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        argv = f.read().split(b"\0")
    text = " ".join(a.decode(errors="replace") for a in argv if a)
    if pid == root:
        return "server (planner serve)"
    if "forkserver" in text:  # the fork server, and the workers it forked (same command line)
        return "worker" if parent_is_forkserver(pid) else "fork server"
    if "resource_tracker" in text:
        return "resource tracker"
    if "espeak" in text:
        return "espeak-ng (program)"
    if "multiprocessing" in text or "spawn_main" in text:
        return "worker"
    return text[:40]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--requests", type=int, default=1)
    ap.add_argument("--text", default="The quick brown fox jumps over the lazy dog. It was a "
                                      "bright cold day in April.")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("serve_args", nargs="*")
    args = ap.parse_args()
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "planner", "serve", args.model, "--port", "0", *args.serve_args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url = None
    try:
        for line in proc.stdout:
            if (m := re.match(r"ready: .* on (http://\S+)", line)) is not None:
                url = m.group(1)
                break
        ready_s = time.perf_counter() - started
        if url is None:
            print(proc.stderr.read(), file=sys.stderr)
            return 1
        for _ in range(args.requests):
            body = json.dumps({"model": args.model, "input": args.text,
                               "response_format": "wav"}).encode()
            req = urllib.request.Request(f"{url}/v1/audio/speech", data=body,
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=300) as r:
                r.read()
        time.sleep(1.0)  # let the workers' last stats reports and frees land
        rows = []
        for pid in tree(proc.pid):
            try:
                rows.append({"process": describe(pid, proc.pid), "pid": pid, **memory_kib(pid)})
            except OSError:
                continue
    finally:
        stop(proc)
    total = {"pss": sum(r["pss"] for r in rows), "rss": sum(r["rss"] for r in rows)}
    if args.json:
        print(json.dumps({"model": args.model, "ready_s": round(ready_s, 2), "processes": rows,
                          "total": total}, indent=1))
        return 0
    print(f"{args.model}: ready in {ready_s:.1f} s; after {args.requests} request(s)")
    print(f"{'process':<26} {'PSS MiB':>9} {'RSS MiB':>9}")
    for r in rows:
        print(f"{r['process']:<26} {r['pss'] / 1024:>9.1f} {r['rss'] / 1024:>9.1f}")
    print(f"{'total':<26} {total['pss'] / 1024:>9.1f} {total['rss'] / 1024:>9.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
