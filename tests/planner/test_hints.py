"""Every hint, applied as it says, removes its diagnostic: over generated commands (placement and
compute flags, good and bad, and YAML overlays) on every built-in card and variant, each
diagnostic's typed fix (and each one it offers after "or") is applied (flags dropped and added,
YAML merged into the config) and the diagnostic is gone; and the hint names exactly the flags and
the YAML of that fix, so a person pasting the hint does what the test did."""

from __future__ import annotations

import shlex
from collections import Counter

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import planner
from planner.cards import all_cards, load_pipeline
from planner.flags import ISOLATE, ASSIGN, THREADS, COPIES, PIN, from_options, parse
from planner.topology import tp_rank_names
from tests.lanes import examples

CARDS = [(c.name, v) for c in all_cards() for v in c.variants]
FLAG_NAMES = (ISOLATE, ASSIGN, THREADS, COPIES, PIN)
CPU_LISTS = ["0", "1", "0-1", "3", "5", "0,2", "0-3", "x"]


@st.composite
def commands(draw, card: str, variant: str):
    """A command on one card: flags (some of them wrong) and perhaps a YAML overlay."""
    pl = load_pipeline(card, variant=variant)
    stages = list(pl.stage_names)
    names = stages + [a for a, _ in pl.roles] + ["nope"]
    ranks = [n for s in pl.stages if s.is_tp for n in tp_rank_names(pl, s.name)]
    processes = sorted({s.process or s.name for s in pl.stages}) + ranks + [
        "solo", "x_tp0", "a/b", ""]
    groups = processes[:-4 - len(ranks)] + stages + ["nope"]
    pick = st.sampled_from
    flags = {
        "isolate_stages": draw(st.lists(pick(names), max_size=2)),
        "stage_processes": draw(st.lists(st.builds("{}={}".format, pick(names),
                                                   pick(processes + stages)), max_size=2)),
        "stage_threads": draw(st.lists(st.builds("{}={}".format, pick(stages + ["nope"]),
                                                 pick([0, 1, 2, 3, 5])), max_size=2)),
        "process_copies": draw(st.lists(st.builds("{}={}".format, pick(groups),
                                                  pick([0, 1, 2, 3])), max_size=2)),
        "process_cpus": draw(st.lists(st.builds("{}={}".format, pick(groups), pick(CPU_LISTS)),
                                      max_size=1)),
    }
    config = None
    if draw(st.booleans()):
        entries = []
        for s in draw(st.lists(pick(stages), max_size=2, unique=True)):
            entry = {"name": s}
            if draw(st.booleans()):
                entry["process"] = draw(pick(processes[:-2]))
            if draw(st.booleans()):
                entry["threads"] = draw(pick([1, 2, 3]))
            if pl.stage(s).on_gpu and draw(st.booleans()):
                entry["runtime"] = {"resources": {
                    "total_gpu_memory_fraction": draw(pick([None, 0.1, 0.5, 0.9]))}}
            entries.append(entry)
        config = {"model": card, "variant": variant, "stages": entries}
        if draw(st.booleans()):
            config["processes"] = {draw(pick(groups[:-1])): draw(st.fixed_dictionaries(
                {}, optional={"copies": pick([1, 2, 3]), "cpus": pick(["0", "0-1", "4"])}))}
    return flags, config, draw(pick([1, 2, 4]))


def _solve(card, variant, config, requests, cpus):
    return planner.solve(card, variant=variant, config=config, requests=requests, cpus=cpus)


def _with_overlay(card, variant, config, overlay):
    """The config as the hint says to write it: merged into the user's (stage entries by name),
    or a new overlay on the card."""
    if overlay is None:
        return config
    out = dict(config or {"model": card, "variant": variant, "stages": []})
    out["stages"] = [dict(e) for e in out.get("stages", [])]
    for entry in overlay.get("stages", []):
        mine = next((e for e in out["stages"] if e["name"] == entry["name"]), None)
        if mine is None:
            out["stages"].append(dict(entry))
        else:
            mine.update(entry)
    return out


def _hint_requests(text: str) -> set:
    """The placement and compute flags a hint quotes, as typed requests."""
    out = set()
    for span in text.split("`")[1::2]:
        if span.startswith(FLAG_NAMES):
            out.update(parse(shlex.split(span)))
    return out


def _hint_yaml(hint: str):
    """The YAML block a hint shows (its `model:`/`variant:` lines aside), as data."""
    lines = hint.splitlines()
    start = next((i for i, line in enumerate(lines) if line in ("stages:",)
                  or line.startswith("model:")), None)
    if start is None:
        return None
    block = []
    for line in lines[start:]:
        if not line.startswith(("  ", "model:", "variant:", "stages:")):
            break
        block.append(line)
    data = yaml.safe_load("\n".join(block))
    return {k: v for k, v in data.items() if k not in ("model", "variant")}


def _same(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and abs(a - b) < 1e-9
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def check_hints(card, variant, flags, config, cpus):
    given_ = from_options(**flags)
    r = _solve(card, variant, config, given_, cpus)
    before = Counter((d.code, d.subject) for d in r.diagnostics)
    for d in r.diagnostics:
        if d.fix is None:
            continue
        quoted = _hint_requests(d.hint)
        offered = {q for fix in d.fix.choices for q in fix.drop + fix.add}
        assert quoted <= offered, (d.hint, d.fix)  # the hint quotes only the fix's flags
        named = quoted | _hint_requests(d.message)
        for fix in d.fix.choices:
            assert set(fix.add) <= quoted and set(fix.drop) <= named, (d.hint, d.message, fix)
            if fix.config is not None:
                assert _same(_hint_yaml(d.hint), fix.config), (d.hint, fix.config)
            again = _solve(card, variant, _with_overlay(card, variant, config, fix.config),
                           fix.applied(given_), cpus)
            after = Counter((x.code, x.subject) for x in again.diagnostics)
            assert after[d.code, d.subject] < before[d.code, d.subject], (
                d.code, d.message, d.hint, fix, [x.message for x in again.diagnostics])


@pytest.mark.parametrize("card, variant", CARDS)
@settings(max_examples=examples(15, 4), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_hint_applied_removes_its_diagnostic(card, variant, data):
    check_hints(card, variant, *data.draw(commands(card, variant)))


# The case, kept as an example: the partner-along hint replaces the isolation.
def test_the_move_the_partner_along_hint_replaces_the_isolation():
    r = planner.solve("qwen3-tts", isolate_stages=["preprocessing"])
    (d,) = r.diagnostics
    assert d.hint.endswith("move the partner along: replace `--isolate-stage preprocessing` with "
                           "`--stage-process preprocessing=preprocessing "
                           "--stage-process tts_engine=preprocessing`")
    check_hints("qwen3-tts", "default", {"isolate_stages": ["preprocessing"]}, None, 2)
