"""Cancellation inside a long step: the stand-in generator's prefill runs in pieces, and an
abandoned long request is stopped between two of them, so the next request does not wait for the
rest of its prefill (the audit saw 10.5-11.8 s)."""

from __future__ import annotations


import pytest

from launcher import cancellation, launch, standins

from tests.launcher import plans
from tests.launcher.conftest import DEVICE
from tests.waiting import wait_until

LONG = ("A long paragraph of text that somebody gave up on. " * 80)[:4000]


@pytest.fixture
def stage_thread():
    """This thread consumes cancellation points, as the launcher's stage threads do."""
    cancellation.want_points()
    yield
    cancellation._local.wanted = False


def test_a_direct_caller_gets_outputs_only():
    payload = standins.preprocessing()({"text": LONG})
    first = next(standins.codec_generator(size="tiny")(payload))
    assert first is not None and "codes" in first


def test_a_long_prefill_yields_a_cancellation_point_between_its_pieces(stage_thread):
    pre = standins.preprocessing()
    gen = standins.codec_generator(size="tiny")
    payload = pre({"text": LONG})
    items = gen(payload)
    pieces = 0
    while (item := next(items)) is None:
        pieces += 1
    items.close()
    prefix = 1 + min(len(payload["tokens"]), standins.MAX_TEXT_TOKENS)
    assert pieces == -(-prefix // standins.PREFILL_PIECE) - 1 and "codes" in item


def test_pieces_give_the_audio_a_one_piece_prefill_gives(stage_thread):
    pre = standins.preprocessing()
    payload = pre({"text": "Short enough for one piece, long enough for two: " * 3})
    chunked = [c for c in standins.codec_generator(size="tiny")(payload) if c is not None]
    old, standins.PREFILL_PIECE = standins.PREFILL_PIECE, 1 << 20
    try:
        whole = list(standins.codec_generator(size="tiny")(payload))
    finally:
        standins.PREFILL_PIECE = old
    assert len(chunked) == len(whole)
    for a, b in zip(chunked, whole):
        assert a["codes"].equal(b["codes"])  # the same codes: only rounding may differ inside


@pytest.mark.slow
def test_an_abandoned_long_request_stops_within_a_piece_and_frees_the_engine(tmp_path):
    log = tmp_path / "engine.log"
    plan = plans.qwen3(generator_factory="tests.launcher.factories:logged_generator",
                       generator_args=(("log", str(log)),))
    with launch(plan, device=DEVICE, factory_defaults={"size": "base"}) as d:
        abandoned = d.submit(LONG)
        wait_until(lambda: log.exists() and "piece" in log.read_text(),  # inside its prefill
                   60, "the long request to reach the engine")
        abandoned.cancel()  # what the front door does when its client goes away
        assert d.synthesize("The next one.", timeout=60).samples.numel() > 0
    events = [e.split() for e in log.read_text().split("\n") if e]
    tag = events[0][1]  # the abandoned request's: it came first
    mine = [what for what, t in events if t == tag]
    # Closed in its prefill: not one chunk, and fewer pieces than its whole prefill has.
    assert mine[-1] == "closed" and "chunk" not in mine
    whole = -(-(1 + min(len(LONG.encode()), standins.MAX_TEXT_TOKENS))
              // standins.PREFILL_PIECE) - 1
    assert mine.count("piece") < whole
    # The next request ran after it was closed, whole.
    theirs = [what for what, t in events if t != tag]
    assert theirs and theirs[-1] == "closed" and "chunk" in theirs
    assert events.index(["closed", tag]) < events.index([theirs[0], events[-1][1]])
