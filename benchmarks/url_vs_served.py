"""Does `planner bench --url` measure a server as bench measures the same plan it serves itself?

Starts `planner serve MODEL FLAGS` here, as a user would, then runs one
`planner bench MODEL --without-declared --placement bench=FLAGS --url url=http://127.0.0.1:PORT`
in `--rounds` interleaved rounds: the same plan, served once by bench (afresh each round) and
once from outside (up the whole run), under the same seeded load. It prints, per load, url /
bench of requests/s paired round by round (median, geometric mean and its 90% interval), the
merged latency and first-audio p50 ratios, and the verdict: the two agree within the noise of
the rounds when the interval holds 1.

    python -m benchmarks.url_vs_served                          # piper-joe, C=1 and 4
    python -m benchmarks.url_vs_served qwen3-tts --flags '--isolate-stage vocoder' --quick
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import threading
from pathlib import Path

from benchmarks.round_ratios import labels, versus
from benchmarks.served_process import ROOT, stop

BENCH, URL = "bench", "url"  # the two rows' names
DEFAULTS = {"rounds": 6, "requests": 72}
QUICK = {"rounds": 2, "requests": 4}
READY = re.compile(r"ready: \S+ on (http://127\.0\.0\.1:\d+)")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="url_vs_served.py",
                                description="bench over --url against bench serving the plan")
    p.add_argument("model", nargs="?", default="piper-joe", help="card (default piper-joe)")
    p.add_argument("--flags", default="", metavar="'FLAGS'",
                   help="placement flags of the plan, as planner serve takes them")
    p.add_argument("--concurrency", type=int, action="append", metavar="C",
                   help="closed-loop clients (repeatable; default 1 and 4)")
    p.add_argument("--rounds", type=int, help=f"default {DEFAULTS['rounds']}")
    p.add_argument("--requests", type=int, help="per row and load over all rounds (default "
                                                f"{DEFAULTS['requests']})")
    p.add_argument("--whole", action="store_true", help="whole answers (default: streamed)")
    p.add_argument("--quick", action="store_true", help="smoke run")
    p.add_argument("--output", type=Path, default=Path("bench-results/url-vs-served"),
                   metavar="DIR")
    args = p.parse_args(argv)
    base = QUICK if args.quick else DEFAULTS
    args.rounds = args.rounds or base["rounds"]
    args.requests = args.requests or base["requests"]
    args.concurrency = sorted(set(args.concurrency or [1, 4]))
    if min(args.rounds, args.requests, *args.concurrency) < 1 or args.requests < args.rounds:
        p.error("--rounds, --requests and --concurrency must be at least 1, and --requests at "
                "least --rounds")
    try:
        args.serve_flags = shlex.split(args.flags)
    except ValueError as e:
        p.error(f"--flags {args.flags!r} do not split ({e}); check the quotes")
    return args


def bench_argv(args: argparse.Namespace, url: str) -> list[str]:
    loads = [w for c in args.concurrency for w in ("--concurrency", str(c))]
    return [sys.executable, "-m", "planner", "bench", args.model, "--without-declared",
            "--placement", f"{BENCH}={args.flags}", "--url", f"{URL}={url},format=pcm", *loads,
            "--rounds", str(args.rounds), "--requests", str(args.requests),
            *([] if args.whole else ["--stream"]), "--output", str(args.output)]


def verdicts(results: dict) -> list[str]:
    """Per load: url / bench, and whether they agree within the rounds' noise."""
    lines = []
    for label in labels(results):
        vs = versus(results, URL, BENCH, label)
        rps = vs.get("req/s")
        if rps is None:
            lines.append(f"{label}: no requests/s to compare")
            continue
        held = rps.holds(1.0)
        verdict = ("one round only: no interval" if held is None else
                   "agree within the rounds' noise (the interval holds 1)" if held else
                   "differ by more than the rounds' noise")
        parts = [f"req/s {rps.text()}"] + [f"{k} x{v:.3f}" for k in ("p50", "first audio p50")
                                            if (v := vs.get(k))]
        lines.append(f"{label}: url / bench {', '.join(parts)}: {verdict}")
    return lines


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    serve = subprocess.Popen(
        [sys.executable, "-m", "planner", "serve", args.model, *args.serve_flags, "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (
            str(ROOT), os.environ.get("PYTHONPATH"))))})
    try:
        url, seen = None, []
        for line in serve.stdout:  # ends if the server exits
            seen.append(line)
            if m := READY.search(line):
                url = m.group(1)
                break
        if url is None:
            print("error: planner serve did not start:\n" + "".join(seen[-10:]), file=sys.stderr)
            return 2
        # Keep reading what it prints, so that a full pipe never blocks the server.
        threading.Thread(target=serve.stdout.read, daemon=True).start()
        print(f"planner serve {shlex.join([args.model, *args.serve_flags])} on {url}", flush=True)
        code = subprocess.run(bench_argv(args, url)).returncode
    finally:
        stop(serve)
    if code != 0:
        print(f"error: planner bench exited with code {code}; its message is above",
              file=sys.stderr)
        return 2
    results = json.loads((args.output / "results.json").read_text())
    print("\n" + "\n".join(verdicts(results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
