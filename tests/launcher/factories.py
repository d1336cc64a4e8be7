"""Factories only the tests use: a stage that cannot be built, and paced stages for timing tests."""

from __future__ import annotations

import time

from launcher import standins


def broken(**kwargs):
    raise RuntimeError("weights file /models/vocoder.safetensors not found")


def paced_generator(*, delay: float = 0.05, size: str = "base", **kwargs):
    """The stand-in generator, sleeping before each chunk, so requests last long enough to watch."""
    inner = standins.codec_generator(size=size, **kwargs)

    def run(payload):
        for chunk in inner(payload):
            if chunk is not None:  # None is a cancellation point inside the prefill, not audio
                time.sleep(delay)
            yield chunk

    return run


def logging_vocoder(*, log: str, size: str = "base"):
    """The stand-in vocoder, appending the wall-clock time at which each chunk is finished."""
    inner = standins.vocoder(size=size)

    def run(payload):
        out = inner(payload)
        with open(log, "a") as f:
            f.write(f"{time.time()}\n")
        return out

    return run


def greedy_vocoder(*, device: str = "cpu", total_gpu_memory_fraction: float | None = None,
                   over: float = 0.05, size: str = "base"):
    """The stand-in vocoder, after allocating its fraction of the GPU plus `over` (may be < 0).

    On CUDA with a fraction applied, over > 0 must fail: the fraction is enforced.
    """
    import torch

    if device.startswith("cuda") and total_gpu_memory_fraction is not None:
        index = torch.device(device).index or 0
        total = torch.cuda.get_device_properties(index).total_memory
        block = torch.empty(int((total_gpu_memory_fraction + over) * total), dtype=torch.uint8,
                            device=device)
        del block
    return standins.vocoder(size=size, device=device)


_HOARD: list = []


def hoarding_vocoder(*, size: str = "base"):
    """The stand-in vocoder, keeping every payload it receives: their shared blocks stay lent."""
    inner = standins.vocoder(size=size)

    def run(payload):
        _HOARD.append(dict(payload))
        return inner(payload)

    return run


def tracked_generator(*, log: str, delay: float = 0.05, size: str = "base", **kwargs):
    """The paced stand-in generator, logging each chunk it yields and when it is closed."""
    inner = paced_generator(delay=delay, size=size, **kwargs)

    def run(payload):
        try:
            for chunk in inner(payload):
                if chunk is not None:  # a cancellation point is not a chunk
                    with open(log, "a") as f:
                        f.write(f"chunk {time.time()}\n")
                yield chunk
        finally:
            with open(log, "a") as f:
                f.write(f"closed {time.time()}\n")

    return run


def logged_generator(*, log: str, size: str = "base", **kwargs):
    """The stand-in generator, logging each prefill piece, each chunk and its close, with a tag
    of its request: the order of events shows where it stopped."""
    inner = standins.codec_generator(size=size, **kwargs)

    def run(payload):
        n = payload.get("prepared_request") or len(payload["tokens"])
        try:
            for item in inner(payload):
                with open(log, "a") as f:
                    f.write(f"{'piece' if item is None else 'chunk'} {n}\n")
                yield item
        finally:
            with open(log, "a") as f:
                f.write(f"closed {n}\n")

    return run


def failing_audio(*, word: str = "fail", audio_ms: float = 20.0):
    """A terminal synthetic stage that raises on a request whose text has `word` in it."""
    from launcher import synthetic

    inner = synthetic.stage(audio_ms=audio_ms)

    def run(payload):
        if word in payload["text"]:
            raise RuntimeError(f"cannot say {word!r}: the voice file went missing")
        return inner(payload)

    return run


def worded_generator(*, size: str = "base", device: str = "cpu", **kwargs):
    """The stand-in generator, with word timings when the request asks for them: each chunk it
    hands on carries one word, `chunk<k>`, spoken from 1 ms into that chunk's audio for 1 ms
    (what a model's stage upstream of the vocoder yields: `launcher.words`)."""
    from launcher.words import TIMESTAMPS, WORDS, WordTiming

    inner = standins.codec_generator(size=size, device=device, **kwargs)

    def run(payload):
        k = 0
        for chunk in inner(payload):
            if chunk is not None and payload.get(TIMESTAMPS):
                chunk = {**chunk, WORDS: (WordTiming(f"chunk{k}", 0.001, 0.002),)}
                k += 1
            yield chunk

    return run
