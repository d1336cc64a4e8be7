"""Synthetic stages whose costs are given in args, for pipelines with known behaviour (tests of
`planner tune`, of the bench and of the launcher):

    factory: launcher.synthetic:stage
    args: {gil_ms: 2.0, native_ms: 5.0, device_ms: 1.0, out_bytes: 65536, chunks: 1}

Per request the stage spends `gil_ms` of CPU in pure Python (holding the interpreter lock),
`native_ms` of CPU in native code that releases the lock (hashing), and `device_ms` asleep (a
stand-in for a device), then hands on `out_bytes` of payload; with `chunks` > 1 it is a streaming
stage that yields that many chunks, the work spread evenly, or with `burst: true` all done before
the first chunk and the chunks then yielded at once (as a model that computes a whole request in
one call and hands it on in pieces). A terminal stage (`audio_ms` > 0) returns that much
silence-free audio at `sample_rate` Hz (default: a plan's default rate, which a pipeline of these
stages has unless it declares its own `sample_rate`).
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Iterator, Mapping
from typing import Any

import torch

from launcher.audio import SAMPLE_RATE
from launcher.off_cpu import off_cpu

_BLOCK = b"\x5a" * (64 << 10)  # hashing 64 KiB releases the interpreter lock (CPython hashlib)


def spin_python(ms: float) -> None:
    """Burn `ms` of this thread's CPU time in bytecode: the interpreter lock is held throughout
    (CPython still hands it over every switch interval when another thread asks)."""
    end = time.thread_time() + ms / 1000.0
    x = 0
    while time.thread_time() < end:
        for _ in range(200):
            x += 1


def spin_native(ms: float) -> None:
    """Burn `ms` of CPU in native code that releases the interpreter lock."""
    end = time.thread_time() + ms / 1000.0
    while time.thread_time() < end:
        hashlib.sha256(_BLOCK).digest()


class SyntheticStage:
    def __init__(self, gil_ms: float, native_ms: float, device_ms: float, out_bytes: int,
                 chunks: int, audio_ms: float, burst: bool = False,
                 sample_rate: int = SAMPLE_RATE) -> None:
        for name, value in (("gil_ms", gil_ms), ("native_ms", native_ms),
                            ("device_ms", device_ms), ("out_bytes", out_bytes),
                            ("audio_ms", audio_ms)):
            if not (isinstance(value, (int, float)) and value >= 0 and math.isfinite(value)):
                raise ValueError(f"synthetic stage: {name} must be a number >= 0, not {value!r}")
        if not (isinstance(chunks, int) and chunks >= 1):
            raise ValueError(f"synthetic stage: chunks must be an integer >= 1, not {chunks!r}")
        if not (isinstance(sample_rate, int) and sample_rate > 0):
            raise ValueError(f"synthetic stage: sample_rate must be an integer > 0, not "
                             f"{sample_rate!r}")
        self.gil_ms, self.native_ms, self.device_ms = gil_ms, native_ms, device_ms
        if not isinstance(burst, bool):
            raise ValueError(f"synthetic stage: burst must be true or false, not {burst!r}")
        self.out_bytes, self.chunks, self.audio_ms = int(out_bytes), chunks, audio_ms
        self.burst, self.sample_rate = burst, sample_rate

    def _work(self, share: float) -> None:
        spin_python(self.gil_ms * share)
        spin_native(self.native_ms * share)
        if self.device_ms:
            with off_cpu():  # a device's time: the process's other stages may have its CPUs
                time.sleep(self.device_ms * share / 1000.0)

    def _piece(self, share: float, work: bool = True) -> dict[str, Any]:
        if work:
            self._work(share)
        out: dict[str, Any] = {"payload": torch.ones(int(self.out_bytes * share), dtype=torch.uint8)}
        if self.audio_ms:
            n = int(self.sample_rate * self.audio_ms * share / 1000.0)
            out["audio"] = 0.1 * torch.sin(torch.arange(n, dtype=torch.float32) * 0.05)
        return out

    def __call__(self, payload: Mapping[str, Any]) -> dict[str, Any] | Iterator[dict[str, Any]]:
        if self.chunks == 1:
            return self._piece(1.0)
        if self.burst:
            return self._burst()
        return (self._piece(1.0 / self.chunks) for _ in range(self.chunks))

    def _burst(self) -> Iterator[dict[str, Any]]:
        self._work(1.0)
        for _ in range(self.chunks):
            yield self._piece(1.0 / self.chunks, work=False)


def stage(*, gil_ms: float = 0.0, native_ms: float = 0.0, device_ms: float = 0.0,
          out_bytes: int = 0, chunks: int = 1, audio_ms: float = 0.0,
          burst: bool = False, sample_rate: int = SAMPLE_RATE) -> SyntheticStage:
    return SyntheticStage(gil_ms, native_ms, device_ms, out_bytes, chunks, audio_ms, burst,
                          sample_rate)
