"""The piper-joe vocoder's work per request, by how z is handed to it (issue 33).

For each way, the same bench texts (`planner bench`'s, seed 0) go through the real acoustic stage
once; then, in interleaved repetitions, the vocoder stage object decodes every piece of every
request on this thread, timed with `time.process_time` (onnxruntime runs one intra-op thread, so
that is the vocoder's CPU). Ways:

- whole: what a whole response (wav, flac, mp3) now gets, one piece per sentence, no context;
- each chunk schedule given (`--schedule 24,64` is the card's old one, which whole responses
  used to pay as well): streamed chunks with `--context` frames each side.

Per way: vocoder CPU per request (median over repetitions of the per-request mean), its ratio to
whole, chunks per request, and for streams the time to first audio on one thread (the sentence's
acoustic work plus the first chunk's decode, median over requests) and the playback headroom:
how many times slower every stage could run before a player that starts with the first chunk
stalls (min over chunks, median and worst over requests; one thread doing everything, so a
pipelined deployment has more).

    python -m benchmarks.vocoder_chunking                       # 12 texts, 5 repetitions
    python -m benchmarks.vocoder_chunking --schedule 24,64 --schedule 24,48,96,192
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from datetime import date

import numpy as np

from benchmarks.machine import cpu_name
from models import piper
from models.piper import voice as V
from planner.app.bench.texts import request_texts

DEFAULT_SCHEDULES = ("24,64", "24,64,128", "24,48,96,192", "24,96,256")


def _pieces(acoustic, payload, stream: bool) -> tuple[list[dict], list[float]]:
    """The vocoder's inputs for one request, and the acoustic thread time before each."""
    out, before, t0 = [], [], time.thread_time()
    for item in acoustic({**payload, "stream": stream}):
        before.append(time.thread_time() - t0)
        out.append(item)
    return out, before


def _headroom(acoustic_s: list[float], vocoder_s: list[float], pieces: list[dict]) -> float:
    """min over chunks k >= 1 of (audio played before k) / (work done after the first chunk)."""
    done = np.cumsum(vocoder_s) + np.array(acoustic_s)
    played = np.cumsum([(p["z"].shape[1] - p["z_left"] - p["z_right"]) * V.HOP / 22050
                        for p in pieces])
    worst = float("inf")
    for k in range(1, len(pieces)):
        worst = min(worst, played[k - 1] / max(done[k] - done[0], 1e-9))
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", type=int, default=12)
    parser.add_argument("--chars", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--context", type=int, default=12)
    parser.add_argument("--schedule", action="append", help="chunk sizes, e.g. 24,64,128")
    args = parser.parse_args()
    schedules = args.schedule or list(DEFAULT_SCHEDULES)

    frontend, vocoder = piper.frontend(), piper.vocoder()
    payloads = [frontend({"text": t, "voice": None})
                for t in request_texts(0, args.texts, args.chars)]
    ways: dict[str, list[tuple[list[dict], list[float]]]] = {}
    whole = piper.acoustic(context_frames=args.context)
    ways["whole"] = [_pieces(whole, p, False) for p in payloads]
    for s in schedules:
        acoustic = piper.acoustic(chunk_frames=[int(x) for x in s.split(",")],
                                  context_frames=args.context)
        ways[s] = [_pieces(acoustic, p, True) for p in payloads]

    cpu: dict[str, list[float]] = {w: [] for w in ways}
    per_piece: dict[str, list[list[float]]] = {w: [[] for _ in payloads] for w in ways}
    for rep in range(args.repeat):
        for way in (list(ways) if rep % 2 == 0 else list(reversed(ways))):
            total = 0.0
            for i, (pieces, _) in enumerate(ways[way]):
                times = []
                for piece in pieces:
                    c0 = time.process_time()
                    vocoder(piece)
                    times.append(time.process_time() - c0)
                total += sum(times)
                if rep == args.repeat - 1 or not per_piece[way][i]:
                    per_piece[way][i] = times
            cpu[way].append(total / len(payloads))

    print(f"# vocoder_chunking.py, {date.today()}, {cpu_name()}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; {args.texts} texts of "
          f"about {args.chars} characters, context {args.context} frames, {args.repeat} reps")
    base = statistics.median(cpu["whole"])
    print("| way | vocoder CPU ms/request | x whole | pieces/request | TTFA ms (1 thread) | "
          "headroom median | headroom worst |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for way, reqs in ways.items():
        med = statistics.median(cpu[way])
        pieces = statistics.mean(len(p) for p, _ in reqs)
        if way == "whole":
            print(f"| whole | {med * 1000:.0f} | 1.00 | {pieces:.1f} | - | - | - |")
            continue
        ttfa = statistics.median((before[0] + per_piece[way][i][0]) * 1000
                                 for i, (_, before) in enumerate(reqs))
        rooms = [_headroom(before, per_piece[way][i], p) for i, (p, before) in enumerate(reqs)
                 if len(p) > 1]
        print(f"| stream {way} | {med * 1000:.0f} | {med / base:.2f} | {pieces:.1f} | "
              f"{ttfa:.0f} | {statistics.median(rooms):.1f} | {min(rooms):.1f} |")


if __name__ == "__main__":
    main()
