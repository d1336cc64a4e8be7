"""A rate question's pick, served (`planner tune --rate R --ttfa-p99-ms X --verify K`): which
plans are served, each target met or missed by what was measured, beside its predicted band, and
the verdict: does the pick meet when served, does the cheaper plan miss."""

import functools
import json

import pytest

import planner
from planner import Profile, StageProfile
from planner.tune.choose import choose
from planner.tune.rate_question import RateAnswer, Target, estimate
from planner.tune.rate_report import verdict_text, verified_dict
from planner.tune.rate_verify import judge, to_serve
from planner.tune.workload import Workload

PROFILE = Profile(model="qwen3-tts", variant="default", cores=2, cpu_model="test", stages=(
    StageProfile("preprocessing", 0.5, 0.0, 0.0),
    StageProfile("tts_engine", 30.0, 0.0, 0.0, chunks_out=4, out_bytes=1000),
    StageProfile("vocoder", 30.0, 0.0, 0.0, chunks_out=4)),
    frontend_ms=0.5, client_ms=0.5, process_rss_mib=100.0)
P99 = Target("ttfa", 99, 150.0)
LATENCY = Target("latency", 99, 400.0)


@functools.cache
def answer(targets=(P99,)) -> RateAnswer:
    """The declared plan (1 CPU) as the cheaper miss, the vocoder apart (2 CPUs) as the pick, and
    the rest as finalists: estimates of real candidates, with the answer's roles given here."""
    choice = choose(planner.load(model_path="qwen3-tts"), PROFILE,
                    (Workload(rate=12, requests=40),), "ttfa", compute=True)
    est = {c.name: estimate(c, c.predicted[:1], targets) for c in choice.ranked}
    pick = next(e for e in est.values() if e.candidate.requests and e.cpus == 2)
    cheaper = est["declared"]
    finalists = tuple(sorted(est.values(), key=lambda e: (e.cpus, e.candidate.name)))
    return RateAnswer(12.0, targets, True, 2, 1, len(est), finalists, pick, cheaper, None, None)


def run(ttfa_p99_ms, latency_p99_ms=300.0, errors=0, ok=300, stolen=None):
    return {"requests": ok + errors, "ok": ok, "errors": errors, "ttfa_p99_ms": ttfa_p99_ms,
            "latency_p99_ms": latency_p99_ms, "stalled_share": 0.01,
            "cpu_stolen_of_running": stolen}


def served(a, k, measured):
    plans = to_serve(a, k)
    return judge(a, plans, {e.candidate.name: measured.get(role) for role, e in plans}, True)


def test_the_pick_the_cheaper_plan_and_k_minus_1_more_finalists_are_served():
    a = answer()
    others = [e for e in a.finalists if e is not a.pick and e is not a.runner_up]
    assert others  # the fixture has finalists besides the two
    plans = to_serve(a, 2)
    assert [r for r, _ in plans] == ["pick", "cheaper", "finalist"]
    assert plans[0][1] is a.pick and plans[1][1] is a.runner_up and plans[2][1] is others[0]
    assert [r for r, _ in to_serve(a, 1)] == ["pick", "cheaper"]
    assert [e for _, e in to_serve(a, 100)[2:]] == others  # no more than there are


def test_a_pick_that_meets_and_a_cheaper_plan_that_misses_confirm_the_answer():
    v = served(answer(), 1, {"pick": run(120.0), "cheaper": run(480.0)})
    assert v.pick_meets is True and v.cheaper_misses is True and v.confirmed
    pick, cheaper = v.served
    assert pick.checks[0].met and pick.checks[0].predicted == answer().pick.band("ttfa", 99)
    assert cheaper.checks[0].met is False and cheaper.checks[0].measured_ms == 480.0
    text = verdict_text(v)
    assert "the pick" in text and "meets when served: TTFA p99 120 ms <= 150 ms" in text
    assert "misses when served: TTFA p99 480 ms > 150 ms" in text and "as predicted" in text


def test_a_pick_that_misses_when_served_is_said_and_a_served_plan_that_met_named():
    v = served(answer(), 2, {"pick": run(190.0), "cheaper": run(480.0), "finalist": run(100.0)})
    assert v.pick_meets is False and not v.confirmed
    assert "misses when served: TTFA p99 190 ms > 150 ms" in verdict_text(v)
    assert "met: the model was optimistic" in verdict_text(v)


def test_a_cheaper_plan_that_meets_when_served_overturns_the_answer():
    v = served(answer(), 1, {"pick": run(120.0), "cheaper": run(140.0)})
    assert v.pick_meets and v.cheaper_misses is False and not v.confirmed
    assert "cautious" in verdict_text(v)


def test_failed_requests_miss_and_an_unmeasured_plan_is_not_judged():
    v = served(answer(), 1, {"pick": run(120.0, errors=3), "cheaper": None})
    assert v.pick_meets is False and v.cheaper_misses is None
    assert v.served[1].checks[0].met is None
    assert "3 of 303 requests failed" in verdict_text(v) and "unmeasured" in verdict_text(v)


def test_every_target_is_judged_and_the_json_carries_predicted_beside_measured():
    a = answer((P99, LATENCY))
    v = served(a, 1, {"pick": run(120.0, latency_p99_ms=450.0), "cheaper": run(480.0)})
    assert [c.met for c in v.served[0].checks] == [True, False] and v.pick_meets is False
    data = json.loads(json.dumps(verified_dict(v, 300)))
    assert data["pick_meets"] is False and data["cheaper_misses"] is True
    assert data["requests"] == 300 and data["stream"] is True
    pick = data["plans"][0]
    assert pick["role"] == "pick"
    assert pick["flags"] == list(planner.flags(a.pick.candidate.requests))
    assert [(t["target"], t["measured_ms"], t["met"]) for t in pick["targets"]] == [
        ("ttfa_p99_ms", 120.0, True), ("latency_p99_ms", 450.0, False)]
    assert pick["targets"][0]["predicted"]["median"] == pytest.approx(
        a.pick.band("ttfa", 99).median, abs=0.01)


def test_a_run_that_lost_its_cpus_to_other_guests_says_so_beside_its_verdict():
    from rich.console import Console

    from planner.tune.rate_report import render_verified, stolen_note

    quiet = served(answer(), 1, {"pick": run(120.0, stolen=0.02), "cheaper": run(480.0)})
    assert stolen_note(quiet) is None  # 2%, and one run not known
    busy = served(answer(), 1, {"pick": run(190.0, stolen=0.41), "cheaper": run(480.0, stolen=0.3)})
    assert [s.stolen_of_running for s in busy.served] == [0.41, 0.3]
    assert verified_dict(busy, 300)["plans"][0]["cpu_stolen_of_running"] == 0.41
    note = stolen_note(busy)
    assert "up to 41% of the CPUs' running time" in note and "when the machine is quiet" in note
    console = Console(record=True, width=200)
    render_verified(console, busy, 300)
    text = console.export_text()
    assert "CPU stolen" in text and "41%" in text and "note: the hypervisor" in text


def test_a_whole_response_s_first_audio_is_its_end():
    a = answer()
    plans = to_serve(a, 1)
    v = judge(a, plans, {e.candidate.name: {**run(None, latency_p99_ms=130.0)}
                         for _, e in plans}, False)
    assert v.served[0].checks[0].measured_ms == 130.0


def nothing_meets() -> RateAnswer:
    """As `answer()`, but no plan meets on one machine: the closest is the declared plan, and
    three replicas of the vocoder-apart plan are what would meet."""
    from dataclasses import replace

    from planner.tune.rate_question import Replicas

    a = answer()
    return replace(a, pick=None, runner_up=None, closest=a.runner_up,
                   replicas=Replicas(3, a.pick, 3))


def test_with_nothing_meeting_one_of_the_replicas_is_judged_at_its_share_of_the_rate():
    from planner.tune.rate_verify import replica_to_serve

    a = nothing_meets()
    assert replica_to_serve(answer()) is None  # a pick: nothing replicated to serve
    count, e = replica_to_serve(a)
    assert (count, e) == (3, a.replicas.per_replica)
    plans = to_serve(a, 1)
    assert [r for r, _ in plans] == ["closest"]
    for measured, recommended in ((120.0, True), (180.0, False)):
        v = judge(a, plans, {e.candidate.name: run(400.0) for _, e in plans}, True,
                  (count, e, run(measured)))
        assert v.pick_meets is None and v.replicas == 3 and v.replica_rate == pytest.approx(4.0)
        assert v.recommended_meets is recommended and v.confirmed is recommended
        text = verdict_text(v)
        assert "one of the 3 replicas, served alone at its share (4 req/s)" in text
        assert ("optimistic" in text) is (not recommended)
        got = json.loads(json.dumps(verified_dict(v, 300)))
        assert (got["replicas"], got["replica_rate"], got["recommended_meets"]) == (
            3, 4.0, recommended)
        assert [p["role"] for p in got["plans"]] == ["closest", "replica"]
    # unmeasured (the replica's run failed): neither met nor missed
    v = judge(a, plans, {}, True, (count, e, None))
    assert v.recommended_meets is None and not v.confirmed
