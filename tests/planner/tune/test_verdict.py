"""`--verify`: what the served placements say of the predicted pick, and what tune then tells
the operator to run."""

import io

from rich.console import Console

from planner.tune.answer import Commands
from planner.tune.report import choice_dict
from planner.tune.screen import render_answer
from planner.tune.choose import TIE, choose
from planner.tune.model import Workload
from planner.tune.verify import Measured, verdict
from tests.planner.tune.test_model import chain, profile


def a_choice():
    # a and b of 4 ms pure Python each: at C=8 tune predicts the split best, declared second
    pl, prof = chain("a", "b"), profile({"a": (4.0, 0.0, 0.0), "b": (4.0, 0.0, 0.0)}, cores=4)
    choice = choose(pl, prof, (Workload(concurrency=8),))
    assert [c.name for c in choice.ranked] == ["--isolate-stage b", "declared"]
    return choice, prof


def served(rps, p50=100.0, errors=0):
    return [{"throughput_rps": rps, "latency_p50_ms": p50, "latency_p99_ms": 2 * p50,
             "ttfa_p90_ms": None, "errors": errors}]


def rendered(choice, prof, measured, judged):
    from planner.flags import flags
    from planner.tune.answer import recommended

    run = recommended(choice, judged)
    words = [w for f in flags(run.requests) for w in f.split(" ", 1)]
    buf = io.StringIO()
    render_answer(Console(file=buf, width=200), choice, prof, Commands(("serve", "m", *words)),
                  measured, judged)
    return buf.getvalue()


def test_the_pick_measured_best_is_confirmed():
    choice, prof = a_choice()
    measured = Measured({0: served(200.0), 1: served(120.0)})
    v = verdict(choice, measured)
    assert (v.best, v.overturned, v.served) == (0, False, 2)
    assert "measured best of the 2 served" in rendered(choice, prof, measured, v)


def test_a_lead_within_a_tie_keeps_the_pick():
    choice, prof = a_choice()
    measured = Measured({0: served(100.0), 1: served(100.0 * (1 + TIE / 2))})
    v = verdict(choice, measured)
    assert v.best == 1 and not v.overturned
    out = rendered(choice, prof, measured, v)
    assert "within a tie: keep the pick" in out
    assert out.rstrip().endswith("planner serve m --isolate-stage b")


def test_a_clear_measured_winner_is_what_tune_recommends():
    choice, prof = a_choice()
    measured = Measured({0: served(100.0), 1: served(130.0)})
    v = verdict(choice, measured)
    assert v.best == 1 and v.overturned and abs(v.gain - 1.3) < 1e-9
    out = rendered(choice, prof, measured, v)
    assert "declared measured x1.30 better by throughput than the predicted pick" in out
    assert "loop): run declared" in out and "the declared topology: no flag" in out
    assert out.rstrip().endswith("planner serve m")
    data = choice_dict(choice, prof, "why", measured, v)
    assert data["best"] == 0  # candidates stay ranked by prediction
    assert data["verified"] == {"best": 1, "gain": 1.3, "overturned": True}
    assert data["persist"]["flags"] == []  # the declared topology needs no flag


def test_a_placement_that_failed_requests_cannot_win():
    choice, prof = a_choice()
    v = verdict(choice, Measured({0: served(100.0), 1: served(300.0, errors=3)}))
    assert v.best == 0 and v.served == 1


def test_lower_latency_wins_when_the_objective_is_latency():
    pl, prof = chain("a", "b"), profile({"a": (4.0, 0.0, 0.0), "b": (4.0, 0.0, 0.0)}, cores=4)
    choice = choose(pl, prof, (Workload(concurrency=1),), objective="latency")
    measured = Measured({0: served(50.0, p50=20.0), 1: served(50.0, p50=10.0)})
    v = verdict(choice, measured)
    assert v.best == 1 and v.overturned and abs(v.gain - 2.0) < 1e-9


def test_a_latency_lead_within_a_tie_is_not_blamed_on_a_round():
    # 3.05 ms of the pick's 103.05: within the tie of the pick's latency (the verdict's measure),
    # though more than 3% of the rival's 100 ms; latency has no rounds to contradict a lead
    pl, prof = chain("a", "b"), profile({"a": (4.0, 0.0, 0.0), "b": (4.0, 0.0, 0.0)}, cores=4)
    choice = choose(pl, prof, (Workload(concurrency=1),), objective="latency")
    measured = Measured({0: served(50.0, p50=103.05), 1: served(50.0, p50=100.0)})
    v = verdict(choice, measured)
    assert v.best == 1 and not v.beyond_tie and not v.overturned
    out = rendered(choice, prof, measured, v)
    assert "within a tie: keep the pick" in out and "a round" not in out


def test_no_verdict_without_a_measurement_of_the_pick():
    choice, _ = a_choice()
    assert verdict(choice, Measured({1: served(100.0)})) is None


def test_a_pick_served_alone_is_not_said_to_have_beaten_anything():
    from tests.planner.tune.test_model import chain, profile

    pl = chain("a", "b", "c")
    prof = profile({"a": (2.0, 0.0, 0.0), "b": (6.0, 0.0, 0.0), "c": (3.0, 0.0, 0.0)}, cores=2)
    choice = choose(pl, prof, (Workload(concurrency=1),))
    v = verdict(choice, Measured({0: served(100.0)}))
    out = rendered(choice, prof, Measured({0: served(100.0)}), v)
    assert "only declared was served, so nothing was compared" in out
    assert "measured best" not in out


def test_a_lead_that_a_round_contradicts_keeps_the_pick():
    choice, prof = a_choice()

    def rounds(rps, *each):
        return [{**served(rps)[0], "round_throughput_rps": list(each)}]

    # merged 30% ahead, but the pick served more in the second round: the machine's drift
    split = Measured({0: rounds(100.0, 90.0, 110.0), 1: rounds(130.0, 150.0, 105.0)})
    v = verdict(choice, split)
    assert v.best == 1 and not v.overturned
    assert "but a round measured the pick ahead" in rendered(choice, prof, split, v)
    agreed = Measured({0: rounds(100.0, 90.0, 110.0), 1: rounds(130.0, 120.0, 140.0)})
    assert verdict(choice, agreed).overturned
