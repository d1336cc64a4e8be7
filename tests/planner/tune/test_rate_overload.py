"""A rate question never picks a plan that cannot keep up with the rate: its TTFA can look fine
under the launcher's fair order (a new request's first item goes first) while its backlog grows
for as long as it serves. Such a plan is told overloaded, and replicas are counted so that each
one's share of the rate is within its capacity."""

from dataclasses import replace

import pytest

import planner

from planner.tune import capacity
from planner.tune.model import predict
from planner.tune.rate_question import Target
from planner.tune.rate_report import rate_dict, unmet_paragraph
from tests.planner.tune.test_rate_question import PROFILE, ask

# PROFILE's two 30 ms pure-Python stages: in one process they share one interpreter lock, so the
# declared plan completes ~16 requests a second at most; apart, each lock ~32.
GENEROUS = (Target("ttfa", 99, 400),)


def test_a_plan_whose_first_audio_meets_but_that_cannot_keep_up_is_not_picked():
    _, a = ask(20, GENEROUS)
    declared = next(e for e in a.finalists if e.candidate.name == "declared")
    # the fair order keeps its first audio early, its latency tells the growing backlog
    assert declared.band("ttfa", 99).high <= 400
    assert declared.band("latency", 99).median > 10 * declared.band("ttfa", 99).median
    assert declared.capacity.median < 20 and declared.overloaded
    assert declared.verdict == "overloaded"
    assert a.pick is not None and a.pick.cpus == 2 and a.pick.capacity.low >= 20
    assert a.runner_up is declared
    d = rate_dict(a, ["qwen3-tts"])
    assert d["runner_up"]["verdict"] == "overloaded" and d["runner_up"]["overloaded"] is True
    cap = d["runner_up"]["capacity_rps"]
    assert cap["low"] <= cap["median"] <= cap["high"] < 20
    assert d["pick"]["overloaded"] is False and d["pick"]["capacity_rps"]["low"] >= 20


def test_the_same_plan_within_its_capacity_still_meets_and_is_picked():
    _, a = ask(12, GENEROUS)
    assert a.pick is not None and a.pick.candidate.name == "declared"
    assert a.pick.verdict == "meets" and not a.pick.overloaded
    assert 12 <= a.pick.capacity.low < 20  # the same capacity as at 20 req/s: not the rate's


def test_nothing_meets_counts_the_replicas_each_of_which_keeps_up():
    # At 70 req/s every plan is overloaded (~32 req/s at most), though one's first audio meets
    # under the fair order; two replicas of 35 req/s each would still be overloaded: three.
    _, a = ask(70, GENEROUS)
    assert not a.met and all(e.verdict == "overloaded" for e in a.finalists)
    assert any(e.band("ttfa", 99).high <= 400 for e in a.finalists)
    e = a.closest
    assert 70 / 3 <= e.capacity.low and e.capacity.median < 70 / 2
    assert a.replicas.count == 3
    text = unmet_paragraph(a, ["qwen3-tts"])
    assert f"The closest is `{e.candidate.name}`" in text and "overloaded: completes" in text
    assert "below the 70 req/s asked" in text
    assert "Split over 3 whole replicas of it, each taking 23.3 req/s, within the" in text
    assert "--replicas 3" in text


def test_capacity_is_the_lock_bound_and_not_the_run_length():
    """Declared, both stages' Python time takes turns on one lock: capacity is at most one
    request per their sum, and a run four times as long finds the same."""
    plan = planner.solve("qwen3-tts").plan
    short = capacity.capacities([plan], PROFILE, [0])[0][0]
    bound = 1000.0 / (30.0 + 30.0 + 0.5)
    assert 0.9 * bound <= short <= bound
    w = capacity.capacity_workload(plan, 0)
    longer = replace(w, requests=4 * w.requests)
    assert predict(plan, PROFILE, longer).steady_rps == pytest.approx(short, rel=0.02)


def test_more_replicas_than_tune_counts_are_said_to_be_needed_not_a_faster_target():
    # 300 req/s over 8 replicas is 37.5 each, above any plan's ~32: capacity, not first audio
    _, a = ask(300, GENEROUS)
    assert not a.met and a.replicas.count is None
    assert a.closest.capacity.low < 300 / 8
    text = unmet_paragraph(a, ["qwen3-tts"])
    assert "Even 8 whole replicas of it, each taking 37.5 req/s, would each get more" in text
    assert "not more replicas" not in text and "--replicas" not in text


@pytest.mark.parametrize("needs, chosen", [({"cheap": 2, "dear": 2}, "cheap"),
                                           ({"cheap": 3, "dear": 2}, "dear")])
def test_replicas_are_of_the_plan_needing_the_fewest_nodes_then_the_cheapest(
        monkeypatch, needs, chosen):
    """Each replica takes a node: two nodes of a 1-CPU plan beat two of a 2-CPU plan (though
    the dear one was closer to meeting on one machine), three nodes of it lose to two."""
    from planner.tune import rate_question as rq

    _, a = ask(20, GENEROUS)
    cheap = next(e for e in a.finalists if e.cpus == 1)
    dear = next(e for e in a.finalists if e.cpus == 2)
    name = {cheap.candidate.name: "cheap", dear.candidate.name: "dear"}
    asked = []

    def replicas(e, profile, workload, targets, cores, seeds, start=2, stop=rq.MAX_REPLICAS):
        asked.append((name[e.candidate.name], start, stop))
        count = needs[name[e.candidate.name]]
        return rq.Replicas(count if start <= count <= stop else None, e, stop)

    monkeypatch.setattr(rq, "_replicas", replicas)
    w = rq.Workload(rate=20, requests=150)
    found = rq._fewest_replicas([dear, cheap], dear, PROFILE, w, GENEROUS, 2, 3)
    assert name[found.per_replica.candidate.name] == chosen
    assert found.count == needs[chosen]
    assert asked[0][0] == "cheap"  # cheapest first among equal counts
    # the paragraph names the replicated plan when it is not the closest one
    _, over = ask(70, GENEROUS)
    other = next(e for e in over.finalists if e is not over.closest)
    text = unmet_paragraph(replace(over, replicas=rq.Replicas(3, other, 3)), ["qwen3-tts"])
    assert f"whole replicas of `{other.candidate.name}` (2 CPUs, 1 GPU; of the plans" in text
    assert "--replicas 3" in text
