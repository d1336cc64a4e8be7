"""A profile's audio lengths are in the card's own sample rate (piper-joe speaks at 22,050 Hz, the
stand-ins at the default), and the front door it measures sends as many samples as the model."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import planner

pytest.importorskip("torch", reason="planner.app.profiling needs the serve extra (torch)")

AUDIO_MS = 200.0


def _card(rate: int | None) -> dict:
    card = {"name": "rated", "stages": [
        {"name": "only", "process": "p", "terminal": True, "factory": "launcher.synthetic:stage",
         "args": {"gil_ms": 0.2, "audio_ms": AUDIO_MS,
                  **({"sample_rate": rate} if rate else {})}}]}
    return {**card, "sample_rate": rate} if rate else card


@pytest.mark.parametrize("rate", [22_050, None])
def test_a_profile_measures_audio_at_the_cards_sample_rate(rate, monkeypatch):
    from launcher import synthetic
    from planner.app.profiling import measure_profile
    from planner.tune.profile import HandoffCost

    plan = planner.solve(config=_card(rate)).plan
    assert plan.sample_rate == (rate or planner.DEFAULT_SAMPLE_RATE)
    seen = []

    def front_door(audio_ms, sample_rate, **_):
        seen.append((audio_ms, sample_rate))
        return 0.1, 0.1, HandoffCost()

    monkeypatch.setattr(measure_profile, "front_door", front_door)
    monkeypatch.setattr(measure_profile, "served_stage_ms", lambda *a, **k: {})
    measure_profile.measure(plan, requests=2, warmup=1)
    (audio_ms, sample_rate), = seen
    assert sample_rate == plan.sample_rate
    assert audio_ms == pytest.approx(AUDIO_MS, abs=1000.0 / sample_rate)  # within a sample
    # The front door's stand-in returns as many samples as the profiled stage did.
    served = synthetic.stage(audio_ms=audio_ms, sample_rate=sample_rate)({})["audio"]
    made = synthetic.stage(audio_ms=AUDIO_MS, sample_rate=sample_rate)({})["audio"]
    assert abs(served.numel() - made.numel()) <= 1


def test_the_default_sample_rate_is_written_once_in_the_planner_and_the_launcher():
    root = Path(__file__).resolve().parents[3]
    spelled = re.compile(r"\b24_?000\b")
    sources = [path for package in ("planner", "launcher")
               for path in sorted((root / package).rglob("*.py"))]
    found = [f"{path.relative_to(root)}:{n}" for path in sources
             for n, line in enumerate(path.read_text().splitlines(), 1) if spelled.search(line)]
    assert len(found) == 1, f"the default sample rate is spelled in {found}: import it instead"
