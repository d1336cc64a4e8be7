"""Head to head: `planner serve hibari-heart` against hibari-tts run as its users run it, in their
own process, with no server at all.

What a hibari user runs instead of our server is the library: `Hibari()(text)`. Each of the
library's rows is `peer_hibari_library.py` in processes of its own, with `Hibari(threads=N)`
(`--library-threads N`, repeatable, default 1 and 2: the library sets onnxruntime's intra- and
inter-op threads to N and leaves its spinning on; our plans give the acoustic stage 1 or 2),
answering whole WAV files (the library's `write_wav` into memory, as `Hibari.save` writes them):
- `loop-tN` (C=1): one process calling it in a loop;
- `server-tN` (C>1): the HTTP server a user writes around it (peer_hibari_server.py: Starlette
  on uvicorn, its request threads sharing one `Hibari`), asked by the same client as ours;
- `threads-tN` (C>1): one process whose C threads share one `Hibari` (its documented use), with
  no HTTP;
- `processes-tN` (C>1): C processes, each with its own `Hibari`, started at once (no HTTP, no
  handoff: this voice's limit on the machine).
Ours (`--ours NAME='FLAGS'`, repeatable) is `planner serve hibari-heart FLAGS`, each started
once and up for the whole run, asked by the bench's own HTTP client (`planner bench`'s closed
loop) for whole WAV files (`response_format: wav`, voice `heart`, speed 1).

Every system gets the same held-out texts (`TEXTS`: sentences the test suite does not speak;
request i speaks TEXTS[i % 16]), closed loop at each `--concurrency`, in `--rounds` interleaved
rounds (each round every system in turn, the order rotated from round to round, each after a
warm-up of C requests), `--requests` per system and load over all rounds. It prints the machine
(CPU model, cores, load average at the start and the end), the command, each system's command,
then per load each system's requests/s, latency p50/p90 and CPU per request (the server's whole
process tree for ours, and the client's CPU beside it; the library's processes for its rows),
ours / the library of requests/s paired round by round with the 90% interval, and the issue's
bars (ours at C=4 >= x1.0 of the server a user writes and >= x0.9 of the processes, at C=1 >=
x0.8 of the loop), each judged against the library's strongest thread count at that load: met when the
interval lies at or above the bar. `--json FILE` writes the raw results (every latency).

    python -m benchmarks.peer_hibari                                # the defaults below
    python -m benchmarks.peer_hibari --quick                        # smoke run
    python -m benchmarks.peer_hibari --ours declared= --ours 'c4=--process-copies pipeline=2'
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from pathlib import Path

from benchmarks.peer_hibari_library import INDEX, STOP
from benchmarks.peer_hibari_report import (
    PEERS, PROCESSES, SERVER, kinds_at, label, peer_name, peers_at, report,
)
from benchmarks.line_child import BenchFailed, LineChild
from benchmarks.machine import run_facts
from benchmarks.peer_args import (
    add_round_options, ours_entry, per_round, positive, rotated, settle_rounds,
)
from benchmarks.process_tree import tree_cpu_s
from benchmarks.served_process import ROOT, Server

from planner.app.bench.load_shapes import Closed, Load
from planner.app.bench.loadgen import run_load
from planner.app.bench.speech import Speech

MODEL = "hibari-heart"
DEFAULTS = {"rounds": 8, "requests": 384}
QUICK = {"rounds": 2, "requests": 8}
# The declared topology and what `planner tune hibari-heart` picked for C=1 and C=4 from a fresh
# profile on a quiet 2-vCPU machine (benchmarks/EVIDENCE.md, "hibari-heart: tune's picks").
DEFAULT_OURS = ("declared=", "c1=--stage-threads acoustic=2",
                "c4=--isolate-stage acoustic --process-copies pipeline=2 "
                "--process-copies acoustic=2")
SPEECH = Speech(model=MODEL, voice="heart", format="wav")
# Held out: no test speaks these (tests/models/hibari has its own), nor does bench's generator.
TEXTS = (
    "The ferry to the northern islands leaves twice a day, weather permitting.",
    "Grandmother kept her recipes in a tin box that smelled of cinnamon and old paper.",
    "When the power failed, the whole street gathered on the steps to watch the stars.",
    "Please remind the committee that the budget review has moved to Thursday afternoon.",
    "A flock of geese crossed the valley in a long, uneven line. Their calls echoed off the "
    "cliffs.",
    "The museum's newest exhibit traces the history of clocks from sundials to atomic "
    "timekeepers.",
    "He counted forty-two steps from the harbour wall to the lighthouse door.",
    "Fresh snow muffled every sound, and the village seemed to hold its breath.",
    "Our train was delayed by a fallen tree, so we arrived just as the concert began.",
    "The engineer checked each valve twice before she signed the inspection report.",
    "Tomatoes ripen faster on the windowsill than in the garden. Nobody quite knows why.",
    "At the edge of the forest stood a cabin with a green door and a crooked chimney.",
    "The orchestra rehearsed the final movement until the conductor finally smiled.",
    "Maps drawn by early sailors often showed sea monsters in the unexplored corners.",
    "If the bridge stays closed, the detour adds about twenty minutes to the drive.",
    "The children built a raft from driftwood and rope, then argued about who would steer.",
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="peer_hibari.py", description="planner serve hibari-heart against hibari-tts in "
                                           "its users' own process, in interleaved rounds")
    add_round_options(p, DEFAULTS, QUICK, "a plan of hibari-heart, as planner serve's flags "
                                          "(repeatable; default: " + "; ".join(DEFAULT_OURS) + ")")
    p.add_argument("--library-threads", type=positive, action="append", metavar="N",
                   help="Hibari(threads=N) for the library's rows (repeatable; default 1 and 2)")
    p.add_argument("--json", type=Path, metavar="FILE", help="write the raw results here")
    args = p.parse_args(argv)
    settle_rounds(p, args, DEFAULTS, QUICK, [ours_entry(o) for o in DEFAULT_OURS], lambda name: (
        f"--ours name {name!r} looks like one of the library's rows; choose another"
        if name.split("-t")[0] in PEERS else None))
    args.library_threads = sorted(set(args.library_threads or [1, 2]))
    return args


# -- the library's processes ------------------------------------------------------------------
class Host(LineChild):
    """peer_hibari_library.py as a child process: one `Hibari` with `threads` threads, reading
    request indices from `take_fd` when it shares a closed loop with other hosts. It imports
    hibari and nothing of the project."""

    def __init__(self, threads: int, take_fd: int) -> None:
        super().__init__([sys.executable, "-m", "benchmarks.peer_hibari_library", "--threads",
                          str(threads), "--take-fd", str(take_fd)], "the library's process",
                         ROOT, pass_fds=(take_fd,))
        self.ready: dict | None = None

    def ask(self, texts: list[str], requests: int | None, concurrency: int) -> None:
        self.send({"texts": texts, "requests": requests, "concurrency": concurrency})


class Library:
    """The library's processes for one thread count: `count` hosts and the pipe they take
    shared request indices from."""

    MAX_TAKEN = 16_000  # indices a run may put in the pipe (4 bytes each; 64 KiB holds 16,384)

    def __init__(self, threads: int, count: int) -> None:
        self.take_r, self.take_w = os.pipe()
        self.hosts = [Host(threads, self.take_r) for _ in range(count)]  # built side by side

    def wait_ready(self) -> None:
        for host in self.hosts:
            host.ready = host.reply()

    def run(self, texts: list[str], requests: int, concurrency: int, processes: bool) -> dict:
        """One measured run: `concurrency` threads in one host, or one loop in each of
        `concurrency` hosts at once, taking the next request from the pipe as each ends."""
        hosts = self.hosts[:concurrency] if processes else self.hosts[:1]
        cpu0 = sum(tree_cpu_s(h.proc.pid) for h in hosts)
        if processes:
            if requests + concurrency > self.MAX_TAKEN:
                raise BenchFailed(f"{requests} requests in one round is more than the take pipe "
                                  f"holds; give more --rounds")
            marks = [*range(requests), *[STOP] * concurrency]
            os.write(self.take_w, b"".join(INDEX.pack(i) for i in marks))
            for host in hosts:
                host.ask(texts, None, 1)
        else:
            hosts[0].ask(texts, requests, concurrency)
        replies = [h.reply() for h in hosts]
        cpu = sum(tree_cpu_s(h.proc.pid) for h in hosts) - cpu0
        return {"requests": requests, "errors": 0,
                "wall_s": max(r["end"] for r in replies) - min(r["start"] for r in replies),
                "latencies_s": [x for r in replies for x in r["latencies_s"]], "cpu_s": cpu,
                "client_cpu_s": None}

    def stop(self) -> None:
        for host in self.hosts:
            host.stop()
        os.close(self.take_r)
        os.close(self.take_w)


# -- ours -------------------------------------------------------------------------------------
def our_server(flags: list[str], root: Path = ROOT) -> Server:
    """`planner serve hibari-heart FLAGS` from the checkout at `root` (this one by default)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (
        str(root), os.environ.get("PYTHONPATH"))))}
    server = Server(f"planner serve {MODEL}", [sys.executable, "-m", "planner", "serve", MODEL,
                                               *flags], "/health", env, cwd=root)
    server.argv += ["--port", str(server.port)]
    return server


def our_run(server: Server, texts: list[str], requests: int, concurrency: int) -> dict:
    """One measured run of a served plan with the bench's closed-loop client."""
    load = Load(Closed(concurrency), tuple(texts), requests, None, False, speech=SPEECH)
    cpu0, client0 = tree_cpu_s(server.proc.pid), time.process_time()
    result = run_load(f"http://127.0.0.1:{server.port}", load)
    client, cpu = time.process_time() - client0, tree_cpu_s(server.proc.pid) - cpu0
    return {"requests": len(result.samples), "errors": result.errors, "wall_s": result.wall_s,
            "latencies_s": [s.latency_s for s in result.ok], "cpu_s": cpu,
            "client_cpu_s": client, "error_messages": list(result.error_messages())}


# -- the run ----------------------------------------------------------------------------------
def systems_at(args: argparse.Namespace, concurrency: int) -> list[str]:
    return [n for n, _ in args.ours] + list(peers_at(concurrency, args.library_threads))


def user_server(threads: int) -> Server:
    """The HTTP server a user writes around one `Hibari(threads=N)` (peer_hibari_server.py)."""
    server = Server(f"a user's server, Hibari(threads={threads})",
                    [sys.executable, "-m", "benchmarks.peer_hibari_server", "--threads",
                     str(threads)], "/health", dict(os.environ))
    server.argv += ["--port", str(server.port)]
    return server


def measure(system: str, concurrency: int, requests: int, servers: dict[str, Server],
            libraries: dict[int, Library]) -> dict:
    """One measured run of `system`: ours and a user's server (`servers`: both answer HTTP, asked
    by the bench's client), or the library's processes."""
    texts = list(TEXTS)
    if system in servers:
        return our_run(servers[system], texts, requests, concurrency)
    kind, _, threads = system.rpartition("-t")
    return libraries[int(threads)].run(texts, requests, concurrency, kind == PROCESSES)


def run(args: argparse.Namespace) -> dict:
    at_start = run_facts()
    servers = {name: our_server(flags) for name, flags in args.ours}
    if any(SERVER in kinds_at(c) for c in args.concurrency):
        servers |= {peer_name(SERVER, t): user_server(t) for t in args.library_threads}
    most = max(args.concurrency)
    libraries: dict[int, Library] = {}
    runs: list[dict] = []
    try:
        for t in args.library_threads:
            libraries[t] = Library(t, most)
        for library in libraries.values():
            library.wait_ready()
        for name, server in servers.items():
            t0 = time.monotonic()
            server.start(args.startup_timeout)
            print(f"{name}: serving after {time.monotonic() - t0:.1f} s: "
                  f"{shlex.join(server.argv[2:])}", flush=True)
        counts = per_round(args.requests, args.rounds)
        for r, count in enumerate(counts):
            for c in args.concurrency:
                for system in rotated(systems_at(args, c), r):
                    measure(system, c, c, servers, libraries)  # warm-up, not counted
                    run_ = measure(system, c, count, servers, libraries)
                    runs.append({"system": system, "label": label(c), "round": r, **run_})
                    if run_["errors"]:
                        raise BenchFailed(f"{system} failed {run_['errors']} of {count} "
                                          f"requests at {label(c)}: "
                                          f"{'; '.join(run_['error_messages'])}")
            print(f"round {r + 1} of {len(counts)} done", flush=True)
    finally:
        for server in servers.values():
            server.stop()
        for library in libraries.values():
            library.stop()
    first = next(iter(libraries.values())).hosts[0]
    return {"machine": at_start, "load_average_end": run_facts()["load_average"],
            "ours": {name: flags for name, flags in args.ours},
            "library": {"threads": args.library_threads, "versions": first.ready["versions"],
                        "argv": first.argv[:5]},
            "settings": {"rounds": args.rounds, "requests": args.requests,
                         "concurrency": args.concurrency, "warmup": "C requests per run"},
            "texts": list(TEXTS), "runs": runs}


def header(results: dict) -> list[str]:
    m, lib = results["machine"], results["library"]
    v = lib["versions"]
    return [
        f"peer_hibari: planner serve {MODEL} against hibari-tts {v['hibari-tts']} in-process "
        f"(onnxruntime {v['onnxruntime']}, numpy {v['numpy']}, scipy {v['scipy']}), {m['date']}",
        f"machine: {m['cpu']}, {m['cores']} cores, load average {m['load_average'][0]} at the "
        f"start, {results['load_average_end'][0]} at the end",
        f"command: {m['command']}",
        *(f"{name}: planner serve {MODEL} {shlex.join(flags)}".rstrip()
          for name, flags in results["ours"].items()),
        *(f"{kind}-tN: {what}: python -m benchmarks."
          f"{'peer_hibari_server' if kind == SERVER else 'peer_hibari_library'} --threads N "
          f"(Hibari(threads=N): onnxruntime intra- and inter-op threads N; N = "
          f"{', '.join(map(str, lib['threads']))})" for kind, what in PEERS.items()),
        f"whole WAV responses, {len(results['texts'])} held-out texts, closed loop, "
        f"{results['settings']['rounds']} interleaved rounds, {results['settings']['requests']} "
        "requests per system and load",
    ]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        results = run(args)
    except BenchFailed as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.json:
        args.json.write_text(json.dumps(results) + "\n")
    print()
    print("\n".join([*header(results), "", *report(results)]))
    if args.json:
        print(f"\nraw results: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
