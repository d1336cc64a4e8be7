"""Admission control: a deployment takes at most `max_queued` requests in flight; the next one is
refused at once with 429 and `Retry-After`, counted on /metrics, and no stage turns load into a
500 (the stand-ins' prepared-request registry holds whatever admission lets in)."""

from __future__ import annotations

import warnings
from concurrent.futures import ThreadPoolExecutor

import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore", UserWarning)
    from starlette.testclient import TestClient

from launcher import launch, standins
from launcher.control.admission import default_max_queued, registry_size
from launcher.errors import Overloaded
from launcher.serving.http import create_app

from tests.launcher import plans
from tests.launcher.conftest import DEVICE, TINY

PACED = "tests.launcher.factories:paced_generator"


def test_the_default_bound_grows_with_the_plan_and_the_registry_holds_twice_it():
    assert default_max_queued(plans.qwen3("vocoder")) == 2 * default_max_queued(plans.qwen3())
    assert registry_size(300) >= 300


def test_a_stand_in_registry_grows_to_what_it_is_offered_never_shrinks():
    before = standins._PREPARED_CAP[0]
    standins.preprocessing(prepared_requests="process_local", max_prepared=before + 10)
    assert standins._PREPARED_CAP[0] == before + 10
    standins.preprocessing(prepared_requests="process_local", max_prepared=1)
    assert standins._PREPARED_CAP[0] == before + 10


def test_an_entry_dropped_from_its_own_process_says_so_not_a_process_split():
    import os

    gen = standins.codec_generator(size="tiny", prepared_requests="process_local")
    with pytest.raises(RuntimeError) as err:
        list(gen({"prepared_request": "0" * 32, "prepared_by": "here",
                  "prepared_pid": os.getpid()}))
    assert "no longer in its registry" in str(err.value) and "same process" not in str(err.value)
    assert "--max-queued" in str(err.value)


@pytest.mark.slow
def test_a_burst_beyond_the_bound_gets_429_with_retry_after_and_never_a_500():
    plan = plans.qwen3(generator_factory=PACED, generator_args=(("delay", 0.05),))
    with launch(plan, device=DEVICE, factory_defaults=TINY, max_queued=3) as d:
        held = [d.submit("one two three four five six", None) for _ in range(3)]
        with pytest.raises(Overloaded):
            d.submit("refused", None)
        client = TestClient(create_app(d, plans.topology(plan)))
        r = client.post("/v1/audio/speech", json={"input": "refused at the door"})
        assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
        assert r.json()["error"]["code"] == "Overloaded"
        for h in held:
            assert h.result(60).samples.numel() > 0
        metrics = client.get("/metrics").text
        assert 'stage_planner_requests_refused_total{reason="queue_full"} 2.0' in metrics

        # A burst of three times the bound at once: every answer is a 200 or a 429.
        def post(i):
            return client.post("/v1/audio/speech", json={"input": f"request number {i}"}).status_code

        with ThreadPoolExecutor(9) as pool:
            codes = list(pool.map(post, range(9)))
        assert set(codes) <= {200, 429} and 200 in codes, codes
