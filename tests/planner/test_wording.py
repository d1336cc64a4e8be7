"""Diagnostics are short and true, each cause said once: the message states what cannot work,
the "because" facts say which request and which fact collide, and nothing is said twice. Checked
over the placement and compute diagnostics every built-in card gives for one-stage requests, and
word for word on the examples the README shows."""

from __future__ import annotations

import itertools
import re

import pytest

import planner
from planner.cards import all_cards
from planner.plan import Copies, Isolate, Pin, Threads

CARDS = [(c.name, v) for c in all_cards() for v in c.variants]


def _requests(stages):
    for s in stages:
        yield [Isolate(s)], 2
        yield [planner.Assign(s, "solo")], 2
        yield [Threads(s, 3)], 2
        yield [Copies(s, 3)], 2
        yield [Isolate(s), Copies(s, 2), Threads(s, 2)], 2
        yield [Isolate(s), Pin(s, (5,))], 2
        yield [Isolate(s), Pin(s, (0,)), Threads(s, 2)], 4
        yield [Isolate(s), Pin(s, (0,)), Copies(s, 2)], 4
    for a, b in zip(stages, stages[1:]):
        yield [Isolate(a), planner.Assign(b, a)], 2


def _diagnostics(card, variant):
    pl = planner.load(card, variant=variant)
    for requests, cpus in _requests(list(pl.stage_names)):
        yield from planner.solve_pipeline(pl, requests=requests, cpus=cpus).diagnostics
    threads = {"model": card, "variant": variant, "processes": {"pipeline": {"copies": 3}},
               "stages": [{"name": pl.stage_names[-1], "threads": 2}]}
    yield from planner.solve(config=threads, cpus=2).diagnostics


def _words(text: str) -> list[str]:
    return re.findall(r"[\w.`=>/-]+", text.lower())


def _runs(text: str, n: int = 4) -> set[tuple[str, ...]]:
    w = _words(text)
    return {tuple(w[i:i + n]) for i in range(len(w) - n + 1)}


def _numbers(text: str) -> set[str]:
    """The figures a text states; GPU ids name a GPU, they are not figures."""
    text = re.sub(r"GPUs? \d+(, \d+)*", "", text)
    return set(re.findall(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])", text))


def repeats(d) -> list[str]:
    """What diagnostic `d` says twice: a quoted flag, a run of four words, or a figure of the
    message that a "because" fact already states."""
    parts = [d.message, *d.because]
    found = []
    flags = [f for p in parts for f in re.findall(r"`[^`]+`", p)]
    found += [f for f in set(flags) if flags.count(f) > 1]
    for a, b in itertools.combinations(parts, 2):
        found += [" ".join(r) for r in _runs(a) & _runs(b)]
    stated = set().union(*map(_numbers, d.because)) if d.because else set()
    found += [f"figure {n}" for n in _numbers(d.message) & stated]
    return found


@pytest.mark.parametrize("card, variant", CARDS)
def test_no_diagnostic_says_a_cause_twice(card, variant):
    seen = 0
    for d in _diagnostics(card, variant):
        seen += 1
        assert d.message and d.hint, d
        assert not repeats(d), (d.code, d.message, d.because, repeats(d))
    assert seen  # each card gives some: the check is not vacuous


def test_the_check_finds_a_repeated_cause():
    # The over-cpus wording before it was rewritten: the same threads, the same CPUs, twice.
    old = planner.Diagnostic(
        code="over-cpus",
        message="process vocoder would run 3 threads of one stage at once on 2 CPUs",
        because=("`--isolate-stage vocoder` puts vocoder in its own process vocoder",
                 "process vocoder runs 1 copy (one copy) of vocoder 3 threads "
                 "(`--stage-threads vocoder=3`): up to 3 threads of one stage busy at once",
                 "the node has 2 CPUs"))
    assert "threads of one stage" in repeats(old) and "figure 2" in repeats(old)


@pytest.mark.parametrize("model, requests, cpus, message, because, hint", [
    ("qwen3-tts", [Isolate("vocoder"), Threads("vocoder", 3)], 2,
     "process vocoder cannot run vocoder's threads at once",
     ("`--stage-threads vocoder=3` gives vocoder 3 threads", "the node has 2 CPUs"),
     "ask for what fits: replace `--stage-threads vocoder=3` with `--stage-threads vocoder=2`"),
    ("piper-joe", [Isolate("vocoder"), Copies("vocoder", 2), Threads("vocoder", 2)], 2,
     "process vocoder cannot run vocoder's threads in every copy at once",
     ("`--isolate-stage vocoder` puts vocoder in its own process vocoder",
      "`--process-copies vocoder=2` runs 2 copies of process vocoder",
      "`--stage-threads vocoder=2` gives vocoder 2 threads", "the node has 2 CPUs"),
     "ask for what fits: replace `--stage-threads vocoder=2` with `--stage-threads vocoder=1`"),
])
def test_compute_diagnostics_word_for_word(model, requests, cpus, message, because, hint):
    (d,) = planner.solve(model, requests=requests, cpus=cpus).diagnostics
    assert (d.code, d.message, d.because, d.hint) == ("over-cpus", message, because, hint)


def test_copies_from_a_card_and_threads_by_default_are_said_where_they_come_from():
    (d,) = planner.solve("piper-joe", requests=[Copies("pipeline", 3)], cpus=2).diagnostics
    assert d.because == ("`--process-copies pipeline=3` runs 3 copies of process pipeline",
                         "every stage runs 1 thread (the default)",
                         "the node has 2 CPUs")
    assert d.message == ("process pipeline cannot run the threads of frontend, acoustic or "
                         "vocoder in every copy at once")
