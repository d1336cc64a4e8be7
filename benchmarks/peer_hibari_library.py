"""hibari-tts as its users run it, without any server: one `Hibari` in this process, called for
whole WAV files. A child process of `peer_hibari.py`, which drives it over stdin and stdout.

It builds `hibari.Hibari(threads=N)` (the voice "heart", inside the wheel; `threads` is what the
library gives onnxruntime, intra- and inter-op alike), makes one call to warm it, prints one
JSON line `{"ready": true, ...}`, then answers one JSON line per line it reads:

    {"texts": [...], "requests": N, "concurrency": C}

request i speaks texts[i % len(texts)]: `audio = tts(text)`, then the library's own
`hibari.tts.write_wav` into memory (what `tts.save` writes, a 16-bit mono WAV at 24 kHz), as a
user who writes a server would answer. With C = 1 it is one call loop on the main thread; with
C > 1, C threads take the next request as each finishes and share the one instance (its
documented use: onnxruntime sessions run concurrently). With `"requests": null` it takes the
request indices from the pipe `--take-fd` instead, 4 bytes each, until a stop mark: several
such processes then share one closed loop, each taking the next request when its last one ended
(a pipe's read of 4 bytes is whole, whoever reads beside it). It answers

    {"latencies_s": [...], "start": T0, "end": T1, "bytes": B}

with `start`/`end` from `time.monotonic()` (one clock for every process of the machine), so
the parent can time several such processes as one run.
"""

from __future__ import annotations

import argparse
import io
import itertools
import json
import os
import struct
import sys
import threading
import time


def speak(tts, write_wav, text: str) -> int:
    """One whole response: the WAV file's size in bytes."""
    out = io.BytesIO()
    write_wav(out, tts(text))
    return out.getbuffer().nbytes


INDEX = struct.Struct("<I")  # a request index in the take pipe
STOP = 0xFFFFFFFF  # the take pipe's stop mark: one for each process that reads it


def pipe_taker(fd: int):
    def take() -> int | None:
        data = os.read(fd, INDEX.size)
        if len(data) != INDEX.size:
            raise RuntimeError(f"the take pipe gave {len(data)} bytes, not {INDEX.size}")
        (index,) = INDEX.unpack(data)
        return None if index == STOP else index

    return take


def count_taker(requests: int):
    counter = itertools.count()  # next() on a count is atomic under the interpreter lock

    def take() -> int | None:
        i = next(counter)
        return i if i < requests else None

    return take


def closed_loop(tts, write_wav, texts: list[str], concurrency: int, take) -> dict:
    latencies: list[float] = []
    sizes: list[int] = []

    def client() -> None:
        while (i := take()) is not None:
            t0 = time.perf_counter()
            size = speak(tts, write_wav, texts[i % len(texts)])
            latencies.append(time.perf_counter() - t0)
            sizes.append(size)

    start = time.monotonic()
    if concurrency == 1:
        client()  # one call loop, on this thread
    else:
        threads = [threading.Thread(target=client) for _ in range(concurrency)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    end = time.monotonic()
    if 0 in sizes:
        raise RuntimeError("a request made no audio")
    return {"latencies_s": latencies, "start": start, "end": end, "bytes": sum(sizes)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="peer_hibari_library.py")
    p.add_argument("--threads", type=int, default=1, help="Hibari(threads=N) (default 1)")
    p.add_argument("--take-fd", type=int, help="the pipe of request indices shared with other "
                                               "processes (inherited)")
    args = p.parse_args(argv)

    import importlib.metadata as metadata

    from hibari import Hibari
    from hibari.tts import write_wav

    tts = Hibari(threads=args.threads)
    speak(tts, write_wav, "Warm up the voice once.")
    versions = {name: metadata.version(name) for name in ("hibari-tts", "onnxruntime", "numpy",
                                                           "scipy")}
    print(json.dumps({"ready": True, "threads": args.threads, "versions": versions}), flush=True)
    for line in sys.stdin:
        ask = json.loads(line)
        take = (pipe_taker(args.take_fd) if ask["requests"] is None
                else count_taker(ask["requests"]))
        reply = closed_loop(tts, write_wav, ask["texts"], ask["concurrency"], take)
        print(json.dumps(reply), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
