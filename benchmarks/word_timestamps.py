"""The real voices' word timestamps against a forced alignment of the same audio (issue 47).

For each card, every held-out sentence (none of them spoken by any test) goes through the card's
own stages in this process, built from its plan as a worker builds them, asked for word timings
(`timestamps`), one sentence per request; the audio goes to a forced alignment of the sentence's
words (`forced_alignment`: pocketsphinx's alignment mode) and each word's start is compared with
where the alignment has it. Per card: how many words were compared, the median and 90th
percentile of |ours - aligned| (the bar: 80 ms and 200 ms), the median signed difference (ours
later when positive) and the worst. These are computations on the audio, not timings: the
machine's load does not change them.

    python -m benchmarks.word_timestamps                      # both voices, 24 sentences
    python -m benchmarks.word_timestamps --card hibari-heart --quick
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from datetime import date

import numpy as np

from benchmarks import forced_alignment
from benchmarks.machine import cpu_name

CARDS = ("piper-joe", "hibari-heart")
MEDIAN_BAR_S, P90_BAR_S = 0.080, 0.200
# Held out: no test speaks these, and the rule for where a word starts was chosen on others.
SENTENCES = [
    "The farmer sold apples and pears at the crowded market on Saturday.",
    "A small airplane circled above the valley before it landed safely.",
    "My grandmother keeps her old letters in a wooden box under the bed.",
    "The students listened carefully while the professor described the experiment.",
    "We found a comfortable hotel near the harbor, close to the fish restaurants.",
    "Heavy rain flooded the streets, so most shops closed early that afternoon.",
    "He practiced the piano every morning until his fingers were tired.",
    "The river slowly carved a deep canyon through the soft red rock.",
    "Please turn off the lights and lock the front door when you leave.",
    "Her brother bought a bright yellow bicycle with a basket in front.",
    "The committee will announce the winners of the contest next month.",
    "Cold wind blew across the frozen lake as the sun went down.",
    "They walked along the beach and collected shells in a paper bag.",
    "The doctor asked him to rest for a week and drink plenty of water.",
    "Our team won the final game after a long and difficult season.",
    "The old clock in the hallway stopped working many years ago.",
    "She wrote a short story about a dragon who was afraid of the dark.",
    "The bakery on the corner sells warm bread and sweet cinnamon rolls.",
    "A family of ducks crossed the road while the cars waited patiently.",
    "The new library has quiet rooms where people can read and study.",
    "He forgot his umbrella at the office and got wet on the way home.",
    "The children built a tall tower out of blocks and then knocked it over.",
    "During the storm, the power went out and we lit a few candles.",
    "The engineer explained how the bridge could carry very heavy trucks.",
]


@dataclass(frozen=True)
class Comparison:
    card: str
    errors: tuple[float, ...]  # ours - aligned, seconds, one per word compared
    skipped: tuple[str, ...]  # sentences not compared, each with why

    def summary(self) -> dict[str, float]:
        e = np.asarray(self.errors)
        return {"words": e.size, "median": float(np.median(np.abs(e))),
                "p90": float(np.percentile(np.abs(e), 90)), "bias": float(np.median(e)),
                "worst": float(np.max(np.abs(e)))}

    @property
    def meets_the_bar(self) -> bool:
        s = self.summary()
        return s["median"] <= MEDIAN_BAR_S and s["p90"] <= P90_BAR_S


def spoken(card: str):
    """A function text -> (audio, its sample rate, its words timed from its start), running the
    card's stages here as its workers would (frontend -> acoustic -> vocoder)."""
    import planner
    from launcher.words import TIMESTAMPS, Timeline
    from planner.app.profiling.stage_timing import build_stage

    plan = planner.solve(card).plan
    frontend, acoustic, vocoder = (build_stage(s, "cpu", {}) for s in plan.stages)

    def speak(text: str):
        timeline, audio, words = Timeline(plan.sample_rate), [], []
        payload = {"text": text, "voice": None, TIMESTAMPS: True, "stream": False}
        merged = {k: v for k, v in {**payload, **frontend(payload)}.items() if v is not None}
        for piece in acoustic(merged):
            audio.append(np.asarray(vocoder(piece)["audio"]))
            words += timeline.add(audio[-1].size, piece.get("words", ()))
        return np.concatenate(audio), plan.sample_rate, [*words, *timeline.rest()]

    return speak


def compare(card: str, sentences: list[str]) -> Comparison:
    speak = spoken(card)
    errors, skipped = [], []
    for text in sentences:
        audio, rate, words = speak(text)
        names = [w.word for w in words]
        if missing := forced_alignment.unknown(names):
            skipped.append(f"{text!r}: not in the recogniser's dictionary: {missing}")
            continue
        aligned = forced_alignment.word_starts(audio, rate, names)
        if aligned is None:
            skipped.append(f"{text!r}: the recogniser found no alignment")
            continue
        errors += [w.start - a for w, a in zip(words, aligned)]
    return Comparison(card, tuple(errors), tuple(skipped))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--card", action="append", choices=CARDS,
                    help="a card to measure (repeatable; default: both)")
    ap.add_argument("--quick", action="store_true", help="the first 4 sentences only")
    args = ap.parse_args(argv)
    sentences = SENTENCES[:4] if args.quick else SENTENCES
    print(f"# word_timestamps.py, {date.today()}, {cpu_name()}: {len(sentences)} held-out "
          "sentences, each word's start against a forced alignment (pocketsphinx)")
    print(f"{'card':<14} {'words':>5} {'median':>8} {'p90':>8} {'bias':>8} {'worst':>8}  "
          f"bar (median <= {MEDIAN_BAR_S * 1000:.0f} ms, p90 <= {P90_BAR_S * 1000:.0f} ms)")
    for card in args.card or CARDS:
        result = compare(card, sentences)
        s = result.summary()
        ms = {k: f"{s[k] * 1000:.0f} ms" for k in ("median", "p90", "bias", "worst")}
        print(f"{card:<14} {s['words']:>5} {ms['median']:>8} {ms['p90']:>8} {ms['bias']:>8} "
              f"{ms['worst']:>8}  {'met' if result.meets_the_bar else 'NOT met'}")
        for why in result.skipped:
            print(f"  skipped {why}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
