"""The README's examples are the commands' own output, so the README cannot drift: each example
runs as written and its output is compared with the page (tests/doc_pages.py says how; `python
-m tests.doc_examples --update README.md` rewrites them). What the planner decides alone is
compared exactly, in the fast lane; what serves or measures the machine runs in the slow lane
and is compared by its columns, names and structure."""

import re
import shutil
from pathlib import Path

import pytest

from planner.cards import all_cards
from tests.doc_examples import check, page_cpus_available
from tests.doc_pages import Kind, examples, keep_elisions, matches, shape

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
EXAMPLES = examples(README)
DEFAULT_SAMPLE_RATE = 24000


def _param(example):
    marks = [] if example.kind is Kind.EXACT else [pytest.mark.slow]
    return pytest.param(example, id=example.name, marks=marks)


@pytest.mark.parametrize("example", [_param(e) for e in EXAMPLES])
def test_the_readme_example_prints_what_the_readme_shows(example, tmp_path):
    if not page_cpus_available():
        pytest.skip("the README's examples were made seeing CPUs 0 and 1; this process may not "
                    "use both, and `solve` counts them")
    if example.kind is Kind.SHAPE:
        needs_what_it_runs(example)
    problems = check(example, tmp_path)
    assert not problems, ("the README differs from the command's output (if the change is "
                          "meant, run `python -m tests.doc_examples --update README.md`):\n"
                          + "\n\n".join(problems))


def needs_what_it_runs(example):
    """A measured example serves a card: skip, saying what is missing, where it cannot run."""
    pytest.importorskip("torch", reason="serving needs the serve extra")
    text = " ".join(c.text for c in example.commands)
    if "hibari-heart" in text:
        pytest.importorskip("hibari", reason="hibari-heart needs the speech extra")
    for program in ("curl", "file"):
        if f"$ {program} " in "\n".join(f"$ {c.text}" for c in example.commands) \
                and shutil.which(program) is None:
            pytest.skip(f"the example runs {program}, which this machine lacks")


def test_the_readme_shows_every_command_and_its_real_voice():
    subcommands = {c.subcommand for e in EXAMPLES for c in e.commands if c.is_planner}
    assert subcommands == {"models", "show", "solve", "serve", "bench", "tune"}
    served = next(c for e in EXAMPLES for c in e.commands if c.subcommand == "serve")
    assert served.argv[2] in ("piper-joe", "hibari-heart")  # a real voice, not a stand-in
    assert not any(c.subcommand == "tune" and c.kind is Kind.SHAPE
                   for e in EXAMPLES for c in e.commands), "tune profiling is too slow to run here"


def test_each_machine_dependent_example_says_so_just_before_it():
    text = README.read_text(encoding="utf-8").splitlines()
    for example in EXAMPLES:
        if example.kind is Kind.SHAPE:
            before = " ".join(text[max(0, example.first_line - 6):example.first_line])
            assert "machine-dependent" in before, example.name


def _card_table() -> list[list[str]]:
    section = README.read_text(encoding="utf-8").split("\n## The built-in cards\n", 1)[1]
    rows = [line for line in section.split("\n## ", 1)[0].splitlines() if line.startswith("| `")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows]


def test_the_card_table_says_what_each_card_is_and_takes():
    """Real or stand-in, sample rate and voices, as each card declares them; every card once."""
    listed = []
    for names_cell, stages, needs, rate, voices in _card_table():
        names = re.findall(r"`([^`]+)`", names_cell)
        listed += names
        for card in (c for c in all_cards() if c.name in names):
            factories = {s["factory"].split(":")[0] for s in card.raw["stages"]}
            real = not any(f.startswith("launcher.standins") for f in factories)
            assert stages.startswith("real" if real else "stand-in"), card.name
            assert ("espeak-ng" in needs) == any("piper" in f for f in factories), card.name
            hz = card.raw.get("sample_rate", DEFAULT_SAMPLE_RATE)
            assert rate == f"{hz:,} Hz", card.name
            declared = card.raw.get("voices")
            assert re.findall(r"`([^`]+)`", voices) == (declared or []), card.name
            assert declared or voices == "any", card.name
    assert sorted(listed) == sorted(c.name for c in all_cards())


# --- the comparison itself: it must catch a drift, and let through only what may differ -----

def test_an_exact_example_that_drifted_is_caught():
    solve = next(c for e in EXAMPLES for c in e.commands
                 if c.kind is Kind.EXACT and c.subcommand == "solve")
    drifted = [line.replace("CPU threads: 3", "CPU threads: 4") for line in solve.expected]
    assert matches(solve.expected, list(solve.expected), Kind.EXACT)
    assert drifted != list(solve.expected)
    assert not matches(drifted, list(solve.expected), Kind.EXACT)


def test_a_measured_example_may_differ_in_numbers_and_verdicts_not_in_columns_or_names():
    page = ["placement  load  req/s", "★ declared  C=4  20.95", "split  C=4  18.49",
            "winner C=4: `declared` wins on req/s", "note: * measured above its bound"]
    other_run = ["placement  load  req/s", "declared  C=4  9.5", "★ split  C=4  12.25*",
                 "winner C=4: `split` (--isolate-stage vocoder) wins on req/s",
                 "advice C=4: 50% of streams stalled"]
    assert matches(page, other_run, Kind.SHAPE)
    renamed = [line.replace("split", "apart") for line in other_run]
    assert not matches(page, renamed, Kind.SHAPE)
    recolumned = ["placement  load  procs  req/s", *other_run[1:]]
    assert not matches(page, recolumned, Kind.SHAPE)
    assert shape("HTTP 200, audio/wav, 122444 bytes in 0.044976s") == \
        "HTTP #, audio/wav, # bytes in #s"
    # a wider placement column lengthens the rule under the header: the same table
    assert matches(["placement  load", "─" * 20], ["placement    load", "─" * 24], Kind.SHAPE)


def test_an_elision_stands_for_any_lines_and_an_update_keeps_it():
    page = ("head", "...", "tail")
    assert matches(page, ["head", "a", "b", "tail"], Kind.EXACT)
    assert matches(page, ["head", "tail"], Kind.EXACT)
    assert not matches(page, ["head", "a"], Kind.EXACT)
    assert keep_elisions(page, ["head", "x", "y", "tail", "new"], Kind.EXACT) == \
        ["head", "...", "tail", "new"]
    # where the lines around an elision are gone, the run's lines come in full
    assert keep_elisions(page, ["other", "x"], Kind.EXACT) == ["other", "x"]
