"""Every model card, as the planner places it, served over HTTP: the declared topology and each
single-stage isolation the planner accepts all return the same WAV, of the expected length."""

from __future__ import annotations

import io
import warnings
import wave

import pytest

from launcher import launch, standins
from launcher.serving.http import create_app
from planner import all_cards, result_dict, solve

from tests.launcher.conftest import DEVICE, TINY

with warnings.catch_warnings():
    warnings.simplefilter("ignore", UserWarning)  # Starlette's note about httpx2
    from starlette.testclient import TestClient

pytestmark = pytest.mark.slow
TEXT = "Card check."
# The stand-in cards; piper-joe and hibari-heart run real models, tested in tests/models.
STANDIN_CARDS = [c for c in all_cards() if c.name not in ("piper-joe", "hibari-heart")]
CARDS = [(c.name, (c.model_paths or (c.name,))[0]) for c in STANDIN_CARDS]


def _speech(plan, topology) -> bytes:
    with launch(plan, device=DEVICE, factory_defaults=TINY) as d:
        client = TestClient(create_app(d, topology))
        r = client.post("/v1/audio/speech", json={"model": plan.model, "input": TEXT,
                                                  "voice": "alice", "response_format": "wav"})
        assert r.status_code == 200, r.text
        return r.content


@pytest.mark.parametrize("model", [m for _, m in CARDS], ids=[n for n, _ in CARDS])
def test_card_serves_identical_audio_in_every_accepted_single_isolation(model):
    declared = solve(model_path=model)
    assert declared.ok, [d.message for d in declared.diagnostics]
    results = [declared]
    for stage in declared.plan.stages:
        result = solve(model_path=model, isolate_stages=[stage.name])
        if result.ok and result.plan.process_count() != declared.plan.process_count():
            results.append(result)
    bodies = [_speech(r.plan, result_dict(r)) for r in results]
    with wave.open(io.BytesIO(bodies[0])) as w:
        assert w.getframerate() == standins.SAMPLE_RATE and w.getnchannels() == 1
        assert w.getnframes() == standins.expected_samples(TEXT)
    for other in bodies[1:]:
        assert other == bodies[0]


VARIANTS = [(c.name, v) for c in STANDIN_CARDS for v in c.variants]


@pytest.mark.parametrize("card,variant", VARIANTS, ids=[f"{c}-{v}" for c, v in VARIANTS])
def test_every_card_and_variant_serves_its_declared_topology(card, variant):
    # The declared topology is what `planner serve MODEL --variant V` runs with no flag: it must
    # both pass the planner and really serve (a variant that splits process-local state did not).
    declared = solve(model_path=card, variant=variant)
    assert declared.ok, [d.message for d in declared.diagnostics]
    body = _speech(declared.plan, result_dict(declared))
    with wave.open(io.BytesIO(body)) as w:
        assert w.getnframes() == standins.expected_samples(TEXT)
