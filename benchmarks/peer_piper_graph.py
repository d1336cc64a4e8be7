"""The piper-joe voice graph in one process on one thread: the floor under any server of it.

Run by `peer_piper.py` as a child process (`python -m benchmarks.peer_piper_graph`): it builds
the card's three stages (models.piper: frontend, acoustic, vocoder; one onnxruntime thread each;
no torch, as a served piper worker), then answers requests on stdin, one JSON line each,
`{"sentences": [...]}`: each sentence goes frontend -> acoustic (a whole request: one piece per
sentence) -> vocoder -> one WAV (what a whole-WAV request of `planner serve` returns), one after
another; it prints `{"latencies_s": [...], "audio_s": ...}` (the seconds of audio made, at the
card's sample rate). The parent reads this process's CPU (and its espeak-ng child's) from /proc
around each line.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np
import yaml

from benchmarks.served_process import ROOT

CARD = yaml.safe_load((ROOT / "models" / "piper-joe.yaml").read_text())
SAMPLE_RATE = int(CARD["sample_rate"])


def stages():
    import models.piper as piper

    args = {s["name"]: s.get("args", {}) for s in CARD["stages"]}
    return (piper.frontend(**args["frontend"]), piper.acoustic(threads=1, **args["acoustic"]),
            piper.vocoder(threads=1, **args["vocoder"]))


def wav(sentence: str, frontend, acoustic, vocoder) -> bytes:
    from launcher.audio import pcm16, wav_header

    ids = frontend({"text": sentence, "voice": "joe", "stream": False})
    audio = [vocoder(chunk)["audio"] for chunk in acoustic({**ids, "stream": False})]
    data = pcm16(np.concatenate(audio))
    return wav_header(SAMPLE_RATE, len(data)) + data


def main() -> int:
    graph = stages()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        latencies, samples = [], 0
        for sentence in json.loads(line)["sentences"]:
            t0 = time.perf_counter()
            size = len(wav(sentence, *graph)) - 44
            latencies.append(time.perf_counter() - t0)
            if size <= 0:
                raise RuntimeError(f"no audio for {sentence!r}")
            samples += size // 2
        print(json.dumps({"latencies_s": latencies, "audio_s": samples / SAMPLE_RATE}),
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
