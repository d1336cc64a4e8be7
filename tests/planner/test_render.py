"""Typed values rendered apart: flags round-trip through their parser, and `--format json`
carries each conflict and fix as data, so a script never parses the prose."""

import json

import pytest

import planner
from planner import Assign, Isolate
from tests.cli import BOTH, run_planner


@pytest.mark.parametrize("requests", [
    (), (Isolate("vocoder"),), (Assign("tts_engine", "engine"), Isolate("vocoder")),
    (Assign("a", "b=c"),),
])
def test_flags_round_trip(requests):
    words = [w for f in planner.flags(requests) for w in f.split(" ", 1)]
    assert planner.parse_flags(words) == requests
    assert tuple(planner.request_from_dict(planner.request_dict(r)) for r in requests) == requests


def test_parse_flags_names_what_is_not_a_placement_flag():
    with pytest.raises(ValueError, match="'--gpu' is not a placement flag"):
        planner.parse_flags(["--gpu", "1"])
    with pytest.raises(ValueError, match="--isolate-stage needs a value"):
        planner.parse_flags(["--isolate-stage"])


@pytest.mark.parametrize("mode", BOTH)
def test_json_carries_the_conflict_and_the_fix_as_data(mode):
    out = run_planner("solve", "qwen3-tts", "--isolate-stage", "preprocessing", "--format", "json",
                      in_process=mode == "in-process")
    assert out.returncode == 1
    d = json.loads(out.stdout)["diagnostics"][0]
    c = d["conflict"]
    assert c["kind"] == "UnsupportedHandoff" and c["edge"] == ["preprocessing", "tts_engine"]
    assert c["requests"] == [{"request": {"isolate": "preprocessing"}, "stage": "preprocessing",
                              "process": "preprocessing", "noop": False}]
    assert "_PREPARED_REQUESTS" in c["reason"]
    # The declared topology is valid: drop the flag; or replace it, moving the partner along.
    assert d["fix"]["drop"] == ["--isolate-stage preprocessing"] and d["fix"]["add"] == []
    assert d["fix"]["drop_requests"] == [{"isolate": "preprocessing"}]
    assert d["fix"]["otherwise"]["drop"] == ["--isolate-stage preprocessing"]
    assert d["fix"]["otherwise"]["add"] == ["--stage-process preprocessing=preprocessing",
                                           "--stage-process tts_engine=preprocessing"]
    assert c["along"] == [{"assign": {"stage": "preprocessing", "process": "preprocessing"}},
                          {"assign": {"stage": "tts_engine", "process": "preprocessing"}}]


def test_fraction_conflicts_carry_numbers_not_sentences():
    r = planner.solve("audar-tts", requests=[Isolate("vocoder")])
    c = planner.result_dict(r)["diagnostics"][0]["conflict"]
    assert c["kind"] == "MissingFraction" and c["gpu"] == 0
    assert c["missing"] == ["reference_encoder", "tts_engine", "vocoder"]
    assert sum(v for _, v in c["proposal"]) <= 1.0
    assert c["card"] == {"model": "audar-tts", "variant": "default"}


def test_every_conflict_kind_has_wording_and_serialises():
    # One request per card and stage: every diagnostic renders and its conflict is plain JSON.
    for card in planner.all_cards():
        for variant in card.variants:
            pl = planner.load(card.name, variant=variant)
            for stage in pl.stage_names:
                for req in (Isolate(stage), Assign(stage, "pipeline"), Assign(stage, "x_tp0")):
                    r = planner.solve_pipeline(pl, requests=[req])
                    json.dumps(planner.result_dict(r))
                    for d in r.diagnostics:
                        assert d.message and d.hint
