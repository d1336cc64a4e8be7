"""The vocoder's Gaussian noise: numpy's own draws, computed a whole array at a time.

hibari's vocoder asks `numpy.random.default_rng(seed).standard_normal((601, 2F), float32)` for
each sentence: about 420,000 values for five seconds of speech. numpy draws them one at a time
(a ziggurat over PCG64's 32-bit halves, a C call per value), the largest single step of the
vocoder. `standard_normal_f32(seed, n)` returns the same bits from whole-array steps:
every 32-bit word of PCG64's stream is tried as the start of a draw at once (index, sign and
magnitude from its bits, then the ziggurat's fast test), and only the 1.5% that leave the fast
path (a wedge test against the density, or the tail past `R`, which takes more words) are
looked at one by one to find where each later draw starts.

The ziggurat's tables are computed here from its two constants (the tail's start `R` and the
area `V` of each of its 256 layers), not copied. The first call checks the result against
numpy's own draws; where they differ (another numpy, another byte order, no `log1pf` in the C
library), every call returns numpy's own draw instead, so the bits never depend on which path
ran.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math
import sys
import threading
from collections.abc import Callable

import numpy as np

R = 3.6541528853610088  # where the tail starts: the ziggurat's base layer ends here
V = 0.00492867323399  # the area of each of its 256 layers
LAYERS = 256
MANTISSA = 1 << 23  # a draw's magnitude is 23 bits of its word
UNIT = 1.0 / (1 << 24)  # a uniform in [0, 1) is a word's top 24 bits times this
MARGIN = 40  # words drawn beyond n, as a fraction 1/MARGIN: the slow paths take ~1.5% more
CHECK_SEEDS = (0, 1, 2, 3)
CHECK_SIZE = 60_000  # enough words that the tail (1 in 3,900 draws) is walked too
CHUNK = 1 << 15  # words per step of the fast path: its working arrays stay in a core's cache


def _tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each layer's width per unit of magnitude (float32), the magnitude under which a draw
    needs no wedge test (uint32), and the density at each layer's edge (float32), layer 0 being
    the base with the tail and layer 1 the top."""
    def density(x: float) -> float:
        return math.exp(-0.5 * x * x)

    edge = [0.0] * LAYERS
    edge[-1] = R
    for i in range(LAYERS - 1, 1, -1):  # each layer's edge from the one below it: equal areas
        edge[i - 1] = math.sqrt(-2.0 * math.log(V / edge[i] + density(edge[i])))
    edge[0] = V / density(R)  # the base layer is as wide as its area with the tail folded in
    width = (np.array(edge) / MANTISSA).astype(np.float32)
    inner = np.zeros(LAYERS, np.uint32)  # layer 1's inner edge is 0: every draw there is tested
    inner[0] = round(R / edge[0] * MANTISSA)
    inner[2:] = np.round(np.array(edge[1:-1]) / np.array(edge[2:]) * MANTISSA)
    edge_density = np.array([1.0] + [density(x) for x in edge[1:]]).astype(np.float32)
    return width, inner, edge_density


_WIDTH, _INNER, _DENSITY = _tables()
# Indexed by a word's low nine bits (layer, then sign), one 64-bit entry holding both what the
# fast path needs: the signed width's float32 bits, then the inner edge.
_BY_LOW_BITS = (np.concatenate([_WIDTH, -_WIDTH]).view(np.uint32).astype(np.uint64)
                | np.concatenate([_INNER, _INNER]).astype(np.uint64) << np.uint64(32))
_DENSITY_STEP = np.zeros(LAYERS, np.float32)
_DENSITY_STEP[1:] = _DENSITY[:-1] - _DENSITY[1:]
_R32 = np.float32(R)
_INV_R32 = np.float32(1.0 / R)


def _log1pf() -> Callable[[float], float] | None:
    """The C library's single-precision log1p: numpy's tail draw calls it."""
    for name in (ctypes.util.find_library("m"), None):
        try:
            fn = ctypes.CDLL(name).log1pf
        except (OSError, AttributeError):
            continue
        fn.argtypes, fn.restype = [ctypes.c_float], ctypes.c_float
        return fn
    return None


_LOG1PF = _log1pf()


def _tail(words: np.ndarray, at: int) -> tuple[np.float32, int]:
    """A draw past R whose first uniform is `words[at]`: its magnitude and the words it took."""
    first = at
    while True:
        xx = -_INV_R32 * np.float32(_LOG1PF(-(int(words[at]) >> 8) * UNIT))
        yy = -np.float32(_LOG1PF(-(int(words[at + 1]) >> 8) * UNIT))
        at += 2
        if yy + yy > xx * xx:
            return _R32 + xx, at - first


class _Scratch(threading.local):
    """Each thread's working arrays, kept between draws: a sentence's words are megabytes, and
    arrays that size made afresh for each draw cost more in new pages than in arithmetic."""

    def __init__(self) -> None:
        self.words = np.empty(0, np.uint32)
        self.x = np.empty(0, np.float32)
        self.low = np.empty(CHUNK, np.intp)
        self.magnitude = np.empty(CHUNK, np.uint32)
        self.looked_up = np.empty(CHUNK, np.uint64)
        self.is_slow = np.empty(CHUNK, bool)

    def sized(self, words: int) -> tuple[np.ndarray, np.ndarray]:
        if self.words.size < words:
            self.words = np.empty(words, np.uint32)
            self.x = np.empty(words, np.float32)
        return self.words[:words], self.x[:words]


_scratch = _Scratch()


def _fast_path(generator: np.random.PCG64, words: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Fill `words` from the generator and `x` with each word's value as the start of a draw
    on the fast path; return the positions of the words that leave it."""
    s, slow = _scratch, []
    for start in range(0, words.size, CHUNK):
        w = words[start:start + CHUNK]
        k = w.size
        w.view(np.uint64)[:] = generator.random_raw(k // 2)
        low, magnitude = s.low[:k], s.magnitude[:k]
        looked_up, is_slow = s.looked_up[:k], s.is_slow[:k]
        np.bitwise_and(w, 0x1FF, out=low)  # layer (8 bits), then the sign bit
        np.right_shift(w, 9, out=magnitude)
        np.take(_BY_LOW_BITS, low, out=looked_up, mode="clip")  # indices are < 512: no check
        pair = looked_up.view(np.uint32)  # little-endian: the width's bits, then the inner edge
        np.multiply(magnitude, pair[0::2].view(np.float32), out=x[start:start + k],
                    dtype=np.float32)
        np.greater_equal(magnitude, pair[1::2], out=is_slow)
        found = np.flatnonzero(is_slow)
        if found.size:
            slow.append(found + start)
    return np.concatenate(slow) if slow else np.zeros(0, np.intp)


def vectorised_draw(seed: int, n: int, margin: int = MARGIN) -> np.ndarray:
    """The draw as whole-array steps (n >= 1); `standard_normal_f32` checks it is numpy's."""
    size = -(-(n + n // margin + 512) // CHUNK) * CHUNK  # whole chunks of words, an even count
    words, x = _scratch.sized(size)
    slow = _fast_path(np.random.PCG64(seed), words, x)
    # Those near the end are never reached (see the count below).
    slow = slow[slow < words.size - 64]
    layer = words[slow] & 0xFF
    wedge = layer != 0
    end = slow + 2  # a wedge test takes the next word as its uniform
    emits = np.ones(slow.size, bool)

    at, lw = slow[wedge], layer[wedge]
    uniform = (words[at + 1] >> 8).astype(np.float32) * np.float32(UNIT)
    under = _DENSITY_STEP[lw] * uniform + _DENSITY[lw]  # float32, as numpy computes it
    xw = x[at].astype(np.float64)
    density = np.exp(-0.5 * xw * xw)
    inside = under.astype(np.float64) < density
    for j in np.flatnonzero(np.abs(under - density) < 1e-12).tolist():
        inside[j] = float(under[j]) < math.exp(-0.5 * xw[j] * xw[j])  # the C library's exp
    emits[wedge] = inside

    tails = np.flatnonzero(~wedge)
    for j in tails.tolist():
        p = int(slow[j])
        value, taken = _tail(words, p + 1)
        x[p] = -value if (int(words[p]) >> 17) & 1 else value
        end[j] = p + 1 + taken

    # A slow word starts a draw unless an earlier draw took it: surely so when no earlier slow
    # draw reaches it; the few that follow another closely are settled by looking back.
    reach = np.zeros_like(end)
    if end.size > 1:
        np.maximum.accumulate(end[:-1], out=reach[1:])
    starts = slow >= reach
    longest = int((end - slow).max(initial=1))
    for j in np.flatnonzero(~starts).tolist():
        k, reached = j - 1, 0
        while k >= 0 and slow[k] + longest > slow[j]:
            if starts[k]:
                reached = max(reached, int(end[k]))
            k -= 1
        starts[j] = slow[j] >= reached

    keep = np.ones(words.size, bool)
    started = np.flatnonzero(starts)
    for j in started[~wedge[started]].tolist():
        keep[slow[j] + 1:end[j]] = False
    wedges = started[wedge[started]]
    keep[slow[wedges] + 1] = False
    keep[slow[wedges[~emits[wedges]]]] = False
    out = x[keep]  # a fresh array: the scratch is the next draw's
    if out.size < n:
        return vectorised_draw(seed, n, max(1, margin // 4))
    return out[:n]


def _numpy(seed: int, n: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(n, dtype=np.float32)


_checked: bool | None = None
_check_lock = threading.Lock()


def exact() -> bool:
    """Whether the whole-array draw gives numpy's bits here (checked once per process)."""
    global _checked
    with _check_lock:
        if _checked is None:
            _checked = (_LOG1PF is not None and sys.byteorder == "little"
                        and all(np.array_equal(vectorised_draw(s, CHECK_SIZE),
                                               _numpy(s, CHECK_SIZE)) for s in CHECK_SEEDS))
        return _checked


def standard_normal_f32(seed: int, n: int) -> np.ndarray:
    """`numpy.random.default_rng(seed).standard_normal(n, dtype=numpy.float32)`, the same bits."""
    if n <= 0:
        return np.zeros(max(n, 0), np.float32)
    if exact():
        try:
            return vectorised_draw(seed, n)
        except IndexError:  # a tail that ran past the words drawn: never seen, but numpy knows
            pass
    return _numpy(seed, n)


class SeededNormal:
    """What hibari's `dsp.synth` asks of its generator (`standard_normal(shape, dtype)`),
    answered by `standard_normal_f32` for a fresh `default_rng(seed)`'s first draw."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._used = False

    def standard_normal(self, size: int | tuple[int, ...], dtype: type = np.float64) -> np.ndarray:
        shape = (size,) if isinstance(size, int) else tuple(size)
        if self._used or np.dtype(dtype) != np.float32:
            raise TypeError("SeededNormal answers one float32 draw, as hibari's vocoder asks")
        self._used = True
        return standard_normal_f32(self.seed, math.prod(shape)).reshape(shape)
