"""Where one request's CPU goes between the socket and the model: `planner serve hibari-heart`
against the same work done by the library in one process.

A voice this fast (hibari-heart: ~37 ms of CPU for five seconds of speech) shows every fixed cost
per request that a heavier voice hides. CPU time, unlike wall time, stays meaningful on a busy
machine (what neighbours add is the wait for a core, not the CPU a thread burns; caches they
share still move it a few per cent), so every figure here is CPU read from the kernel:

1. **The model's work, without any server**, in this process, each part's thread CPU
   (`time.thread_time_ns`) per request over the held-out texts (`peer_hibari.TEXTS`),
   interleaved: the library's own call split into its G2P, its onnxruntime session, its
   vocoder (`hibari.dsp.synth`) and its WAV writing; and the card's stage objects
   (`models.hibari`: frontend, acoustic, vocoder) and our WAV encoding (`launcher.audio`).
2. **The served plan** (`planner serve hibari-heart FLAGS`), one request at a time (C=1, the
   bench's HTTP client): every thread of every process of the server, its CPU per request from
   `/proc/PID/task/TID/schedstat` (nanoseconds), named by `py-spy dump` where py-spy is
   installed (else by thread id), and the same threads' CPU per second while the server idles
   (`--idle`: its timers and pollers, which a request pays for by the second, not by itself);
   the launcher's own per-stage timings from /metrics (wall time per request, and of it the
   time each stage's thread waited for a core); the client's CPU per request.

3. **The library's own call** (`Hibari()(text)` and its `write_wav`) in this process, in
   batches taken in turn with the served batches, so that served / library pairs batch by
   batch: the fixed cost per request of serving it (the machine's speed drifts by more than
   that from one minute to the next, so figures measured apart are not compared). `--baseline DIR` (another checkout of the project, main
for instance) serves the same plan from there too, in alternating batches with this checkout
(the order rotated from batch to batch), and prints this / that of the CPU per request of the
front door, the workers' other threads, the stage threads and the whole tree, paired batch by
batch (median, geometric mean, 90% interval): what a change to the serving path saved.

    python -m benchmarks.request_costs                              # declared plan
    python -m benchmarks.request_costs --flags '--process-copies pipeline=2'
    python -m benchmarks.request_costs --baseline ../main --requests 800 --batches 16
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

from benchmarks.peer_hibari import MODEL, ROOT, SPEECH, TEXTS, our_server
from benchmarks.line_child import BenchFailed
from benchmarks.machine import run_facts
from benchmarks.peer_args import per_round, positive, rotated
from benchmarks.process_tree import tree
from benchmarks.round_ratios import summarise

from planner.app.bench.load_shapes import Closed, Load
from planner.app.bench.loadgen import run_load
from planner.app.bench.measure import settled_metrics, stage_profile

STAGES = ("frontend", "acoustic", "vocoder")


# -- the model's work in one process --------------------------------------------------------
def model_parts(repetitions: int) -> dict[str, float]:
    """Median thread CPU (s) per request of each part, the library's and our stages', over
    `repetitions` passes of the held-out texts (the first pass warms and is left out)."""
    import numpy as np
    from hibari import Hibari, dsp
    from hibari.tts import write_wav

    import models.hibari as card
    from launcher.audio import pcm16, wav_header

    lib = Hibari()
    frontend, acoustic, vocoder = card.frontend(), card.acoustic(), card.vocoder()
    clock = time.thread_time_ns
    parts: dict[str, list[int]] = {}

    def timed(name: str, fn):
        t0 = clock()
        out = fn()
        parts.setdefault(name, []).append(clock() - t0)
        return out

    def library(text: str) -> None:
        ids = timed("library: G2P", lambda: [lib.ids(p) for p in lib.phonemize(text)])
        outs = timed("library: onnxruntime session", lambda: [lib.sess.run(None, {
            "ids": np.asarray([i], np.int64), "speed": np.asarray([1.0], np.float32)})
            for i in ids])
        audio = timed("library: vocoder (dsp.synth)", lambda: np.concatenate(
            [dsp.synth(*(o[0] for o in out), np.random.default_rng()) for out in outs]))
        timed("library: write_wav", lambda: write_wav(io.BytesIO(), audio))

    def ours(text: str) -> None:
        ids = timed("stages: frontend", lambda: frontend({"text": text}))
        frames = timed("stages: acoustic", lambda: list(acoustic(ids)))
        audio = timed("stages: vocoder", lambda: np.concatenate(
            [vocoder(f)["audio"] for f in frames]))
        data = timed("ours: WAV encoding", lambda: pcm16(audio))
        wav_header(24_000, len(data))

    for rep in range(repetitions + 1):
        for text in TEXTS:
            library(text)
            ours(text)
            timed("library: one call, Hibari()(text)", lambda t=text: lib(t))
        if rep == 0:
            parts.clear()  # the warm-up pass
    return {name: statistics.median(v) / 1e9 for name, v in parts.items()}


# -- the served plan --------------------------------------------------------------------------
def thread_names(pid: int) -> dict[int, str]:
    """Thread id -> the Python thread's name, from `py-spy dump` ({} without py-spy)."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not os.path.exists(spy):
        return {}
    try:
        out = subprocess.run([spy, "dump", "--pid", str(pid), "--json"], capture_output=True,
                             text=True, timeout=60).stdout
        return {t["os_thread_id"]: t.get("thread_name") or "?" for t in json.loads(out)}
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return {}


def thread_cpu(pids: list[int]) -> dict[tuple[int, int], int]:
    """(pid, tid) -> nanoseconds on a CPU so far."""
    out = {}
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    out[pid, int(tid)] = int(f.read().split()[0])
            except (OSError, ValueError):
                pass  # a thread that just ended
    return out


def delta(before: dict, after: dict) -> dict:
    return {k: v - before.get(k, 0) for k, v in after.items()}


class Served:
    """A plan served from one checkout, its threads named, measured batch by batch."""

    def __init__(self, root: Path, flags: list[str], startup_timeout: float) -> None:
        self.root = root
        self.server = our_server(flags, root)
        self.server.start(startup_timeout)
        self.url = f"http://127.0.0.1:{self.server.port}"
        run_load(self.url, Load(Closed(1), TEXTS, len(TEXTS), None, False, speech=SPEECH))
        health = httpx.get(f"{self.url}/health", timeout=10).json()
        self.roles = {self.server.proc.pid: "front door"} | {
            p["pid"]: f"worker {p['name']}" for p in health["processes"]}
        self.pids = tree(self.server.proc.pid)
        self.names = {pid: thread_names(pid) for pid in self.pids}
        self.busy: dict[tuple[int, int], int] = {}
        self.idle: dict[tuple[int, int], float] = {}
        self.requests, self.wall_s, self.client_s = 0, 0.0, 0.0
        self.batches: list[dict[str, float]] = []  # per batch: CPU ms/request by group

    def watch_idle(self, seconds: float) -> None:
        t0, before = time.monotonic(), thread_cpu(self.pids)
        time.sleep(seconds)
        self.idle = {k: v / (time.monotonic() - t0)
                     for k, v in delta(before, thread_cpu(self.pids)).items()}

    def batch(self, requests: int) -> None:
        cpu0, client0 = thread_cpu(self.pids), time.process_time()
        result = run_load(self.url, Load(Closed(1), TEXTS, requests, None, False, speech=SPEECH))
        self.client_s += time.process_time() - client0
        if result.errors:
            raise BenchFailed(f"{result.errors} of {requests} requests failed: "
                              f"{'; '.join(result.error_messages())}")
        got = delta(cpu0, thread_cpu(self.pids))
        for k, v in got.items():
            self.busy[k] = self.busy.get(k, 0) + v
        self.requests += requests
        self.wall_s += result.wall_s
        self.batches.append({group: sum(v for k, v in got.items() if self.group(k) == group)
                             / 1e6 / requests for group in GROUPS})

    def group(self, key: tuple[int, int]) -> str:
        pid, tid = key
        if self.roles.get(pid) == "front door":
            return "front door"
        return "stage threads" if self.names[pid].get(tid) in STAGES else "worker, other threads"

    def figures(self) -> dict:
        n = self.requests
        threads = [{"process": self.roles.get(pid, f"pid {pid}"),
                    "thread": self.names[pid].get(tid, str(tid)),
                    "cpu_per_request_s": self.busy.get((pid, tid), 0) / 1e9 / n,
                    "idle_cpu_per_s": self.idle.get((pid, tid), 0) / 1e9}
                   for pid, tid in set(self.busy) | set(self.idle)]
        threads = [t for t in threads if t["cpu_per_request_s"] or t["idle_cpu_per_s"]]
        return {"root": str(self.root), "requests": n, "wall_s": self.wall_s,
                "client_cpu_per_request_s": self.client_s / n,
                "threads": sorted(threads, key=lambda t: -t["cpu_per_request_s"]),
                "batches": self.batches}

    def stop(self) -> None:
        self.server.stop()


GROUPS = ("front door", "worker, other threads", "stage threads")


class LibraryCalls:
    """The library's own call in this process (`Hibari()(text)` and its `write_wav`), measured
    in the same rotation as the served plans, so that served / library pairs batch by batch."""

    def __init__(self) -> None:
        from hibari import Hibari
        from hibari.tts import write_wav

        self.tts, self.write_wav = Hibari(), write_wav
        self.batches: list[float] = []  # thread CPU ms per request

    def batch(self, requests: int) -> None:
        t0 = time.thread_time_ns()
        for i in range(requests):
            self.write_wav(io.BytesIO(), self.tts(TEXTS[i % len(TEXTS)]))
        self.batches.append((time.thread_time_ns() - t0) / 1e6 / requests)


def served(roots: list[Path], flags: list[str], requests: int, batches: int, idle_s: float,
           startup_timeout: float) -> tuple[list[dict], list[float], dict[str, float | None]]:
    """Each checkout's figures and the library's call, measured in alternating batches (the
    order rotated from batch to batch, so a neighbour's burst falls on all alike), and the first
    checkout's stage timings from /metrics."""
    plans: list[Served] = []
    library = LibraryCalls()
    try:
        for root in roots:
            plans.append(Served(root, flags, startup_timeout))
        for plan in plans:
            plan.watch_idle(idle_s)
        library.batch(len(TEXTS))  # warm
        library.batches.clear()
        metrics0 = settled_metrics(plans[0].url)
        turns: list[Served | LibraryCalls] = [*plans, library]
        for b, size in enumerate(per_round(requests, batches)):
            for turn in rotated(turns, b):
                turn.batch(size)
        profile = stage_profile(metrics0, settled_metrics(plans[0].url), {s: s for s in STAGES})
    finally:
        for plan in plans:
            plan.stop()
    return ([p.figures() for p in plans], library.batches,
            {s.stage: s.per_request_s for s in profile})


# -- the report -------------------------------------------------------------------------------
def thread_lines(serve: dict) -> list[str]:
    ms = 1000.0
    rate = serve["requests"] / serve["wall_s"]
    lines = [f"served from {serve['root']}, one request at a time ({serve['requests']} requests, "
             f"{rate:.1f} req/s): each thread's CPU per request; while idle, per second",
             f"  {'process':22s} {'thread':24s} {'ms/request':>10s} {'idle ms/s':>10s}"]
    for t in serve["threads"]:
        lines.append(f"  {t['process']:22s} {t['thread']:24s} {t['cpu_per_request_s'] * ms:10.3f}"
                     f" {t['idle_cpu_per_s'] * ms:10.3f}")
    idle = sum(t["idle_cpu_per_s"] for t in serve["threads"])
    groups = {g: statistics.fmean(b[g] for b in serve["batches"]) for g in GROUPS}
    total = sum(groups.values())
    lines += [f"  served tree {total:.3f} ms/request: " + ", ".join(
        f"{g} {v:.3f}" for g, v in groups.items()) + f"; {idle * ms:.3f} ms/s of it ticks on "
        f"while idle ({idle / rate * ms:.3f} ms/request at this rate)",
        f"  client (the bench's HTTP client): {serve['client_cpu_per_request_s'] * ms:.3f} "
        "ms/request"]
    return lines


def _tree(serve: dict) -> list[float]:
    return [sum(b.values()) for b in serve["batches"]]


def report(parts: dict[str, float], serves: list[dict], library: list[float],
           stages: dict[str, float | None]) -> list[str]:
    ms = 1000.0
    lines = ["the model's work in one process, thread CPU per request (median over the texts, "
             "measured once before the rest):",
             *(f"  {name:40s} {s * ms:7.3f} ms" for name, s in parts.items())]
    for serve in serves:
        lines += ["", *thread_lines(serve)]
    mine = serves[0]
    lines.append("")
    for serve in serves:
        s = summarise(_tree(serve), library)
        lines.append(f"served tree from {serve['root']} / the library's own call (its write_wav "
                     f"included), in the same rotation: {statistics.fmean(_tree(serve)):.3f} "
                     f"against {statistics.fmean(library):.3f} ms/request, "
                     f"{s.text() if s else '-'}")
    lines.append("the launcher's stage timings (/metrics, wall per request): " + ", ".join(
        f"{s} {v * ms:.2f} ms" for s, v in stages.items() if v is not None))
    for other in serves[1:]:
        lines.append(f"this checkout / {other['root']}, CPU per request paired batch by batch: "
                     "median (geometric mean, 90% interval)")
        for group in (*GROUPS, "served tree"):
            def of(serve: dict, g: str = group) -> list[float]:
                return _tree(serve) if g == "served tree" else [b[g] for b in serve["batches"]]
            s = summarise(of(mine), of(other))
            lines.append(f"  {group:22s} {statistics.fmean(of(mine)):7.3f} against "
                         f"{statistics.fmean(of(other)):7.3f} ms: {s.text() if s else '-'}")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="request_costs.py", description=__doc__.split("\n")[0])
    p.add_argument("--flags", default="", metavar="'FLAGS'",
                   help="planner serve's flags for the plan (default: as declared)")
    p.add_argument("--requests", type=positive, default=400,
                   help="served one at a time, over all batches (default 400)")
    p.add_argument("--batches", type=positive, default=8,
                   help="batches the requests are served in, alternating with each --baseline "
                        "(default 8)")
    p.add_argument("--baseline", type=Path, action="append", default=[], metavar="DIR",
                   help="another checkout of the project (e.g. main) to serve the same plan "
                        "from, in alternating batches with this one (repeatable)")
    p.add_argument("--repetitions", type=positive, default=5,
                   help="passes over the texts in one process (default 5)")
    p.add_argument("--idle", type=float, default=5.0, metavar="S",
                   help="seconds each idle server is watched (default 5)")
    p.add_argument("--startup-timeout", type=float, default=300.0, metavar="S")
    p.add_argument("--json", type=Path, metavar="FILE", help="write the raw figures here")
    args = p.parse_args(argv)
    flags = shlex.split(args.flags)
    if args.requests < args.batches:
        p.error(f"--requests {args.requests} is fewer than --batches {args.batches}")
    for root in args.baseline:
        if not (root / "launcher" / "serving" / "serve.py").is_file():
            p.error(f"--baseline {root} is not a checkout of this project (no "
                    "launcher/serving/serve.py there)")
    at_start = run_facts()
    try:
        parts = model_parts(args.repetitions)
        serves, library, stages = served([ROOT, *(r.resolve() for r in args.baseline)], flags,
                                         args.requests, args.batches, args.idle,
                                         args.startup_timeout)
    except BenchFailed as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"request_costs: planner serve {MODEL} {shlex.join(flags)}".rstrip()
          + f" against the library in one process, {at_start['date']}")
    print(f"machine: {at_start['cpu']}, {at_start['cores']} cores, load average "
          f"{at_start['load_average'][0]} at the start, {run_facts()['load_average'][0]} at the end"
          " (CPU time: a busy machine moves it a few per cent)")
    print(f"command: {at_start['command']}")
    print("\n".join(report(parts, serves, library, stages)))
    if args.json:
        args.json.write_text(json.dumps({"machine": at_start, "flags": flags, "parts": parts,
                                         "served": serves, "library_batches": library,
                                         "stages": stages}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
