"""Every model card, as the planner places it: the declared topology and each single-stage
isolation the planner accepts all serve audio, identical to the declared topology's."""

from __future__ import annotations

import glob
import os

import pytest
import torch
import yaml

from launcher import launch, standins

from .conftest import DEVICE, TINY

pytestmark = pytest.mark.slow
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CARDS = sorted(glob.glob(os.path.join(ROOT, "models", "*.yaml")))
TEXT = "Card check."


def _model_path(card: str) -> str:
    with open(card) as f:
        data = yaml.safe_load(f)
    return (data.get("model_paths") or [data["name"]])[0]


@pytest.mark.parametrize("card", CARDS, ids=[os.path.basename(c)[:-5] for c in CARDS])
def test_card_serves_identical_audio_in_every_accepted_single_isolation(card):
    from planner import solve

    model = _model_path(card)
    declared = solve(model_path=model)
    assert declared.ok, [d.message for d in declared.diagnostics]
    plans = [declared.plan]
    for stage in declared.plan.stages:
        result = solve(model_path=model, isolate_stages=[stage.name])
        if result.ok and result.plan.process_count() != declared.plan.process_count():
            plans.append(result.plan)
    audio = []
    for plan in plans:
        with launch(plan, device=DEVICE, factory_defaults=TINY) as d:
            audio.append(d.synthesize(TEXT, voice="alice", timeout=60).samples)
    assert audio[0].numel() == standins.expected_samples(TEXT)
    for other in audio[1:]:
        assert torch.equal(audio[0], other)
