"""The vocoder's noise: numpy's own seeded draws, bit for bit, whichever path computes them."""

from __future__ import annotations

import numpy as np
import pytest

from models.hibari import noise
from tests.models import needs


def _numpys(seed: int, n: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(n, dtype=np.float32)


def test_the_whole_array_draw_is_in_use_on_this_machine():
    # Where it is not (another numpy or byte order), the draws fall back to numpy's and stay
    # right, but cost what they did: this says the saving holds where the project runs.
    assert noise.exact()


@pytest.mark.parametrize("seed", [0, 7, 2**31 + 5, 4_294_967_295])
def test_long_draws_are_numpys_bits(seed):
    # Two million values take about 30,000 words off the fast path: wedge tests that keep and
    # that refuse, some 500 tails (a few of them looping), and slow words that follow each other.
    n = 2_000_000
    assert np.array_equal(noise.vectorised_draw(seed, n), _numpys(seed, n))


@pytest.mark.parametrize("n", [1, 2, 3, 601, 601 * 2 * 37 + 1])
def test_any_length_is_a_prefix_of_numpys_stream(n):
    for seed in range(40):
        assert np.array_equal(noise.vectorised_draw(seed, n), _numpys(seed, n)), (seed, n)
        assert np.array_equal(noise.standard_normal_f32(seed, n), _numpys(seed, n)), (seed, n)


def test_no_values_for_an_empty_draw():
    assert noise.standard_normal_f32(3, 0).shape == (0,)


def test_where_the_check_fails_numpys_own_draw_answers(monkeypatch):
    monkeypatch.setattr(noise, "_checked", False)
    monkeypatch.setattr(noise, "vectorised_draw",
                        lambda *a: pytest.fail("used after a failed check"))
    assert np.array_equal(noise.standard_normal_f32(11, 5000), _numpys(11, 5000))


def test_seeded_normal_answers_one_float32_draw_of_a_shape():
    draw = noise.SeededNormal(42)
    z = draw.standard_normal((601, 40), dtype=np.float32)
    assert z.shape == (601, 40) and np.array_equal(z, np.random.default_rng(42).standard_normal(
        (601, 40), dtype=np.float32))
    with pytest.raises(TypeError, match="one float32 draw"):
        draw.standard_normal((601, 40), dtype=np.float32)  # a second draw would not be numpy's
    with pytest.raises(TypeError, match="one float32 draw"):
        noise.SeededNormal(1).standard_normal(10)  # float64


@needs.hibari
def test_hibaris_vocoder_gives_the_same_audio_with_it():
    from hibari import dsp

    rng = np.random.default_rng(5)
    frames = 180
    parts = [rng.normal(-2.0, 1.0, (601, frames)).astype(np.float32) for _ in range(5)]
    f0 = np.where(np.arange(frames) % 50 < 35, 180.0, 0.0).astype(np.float32)
    assert np.array_equal(dsp.synth(*parts, f0, noise.SeededNormal(99)),
                          dsp.synth(*parts, f0, np.random.default_rng(99)))
