"""`--verify`: what the served placements say of the predicted pick, and what tune then tells
the operator to run."""

import io
import json

from rich.console import Console

from planner.tune.report import choice_dict, render_choice
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
    buf = io.StringIO()
    render_choice(Console(file=buf, width=200), choice, prof, "why", measured, judged)
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
    assert "within a tie: keep the pick" in out and "run it: --isolate-stage b" in out


def test_a_clear_measured_winner_is_what_tune_recommends():
    choice, prof = a_choice()
    measured = Measured({0: served(100.0), 1: served(130.0)})
    v = verdict(choice, measured)
    assert v.best == 1 and v.overturned and abs(v.gain - 1.3) < 1e-9
    out = rendered(choice, prof, measured, v)
    assert "declared measured x1.30 better by throughput than the predicted pick" in out
    assert "keep the declared topology" in out and "run it:" not in out
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


def test_no_verdict_without_a_measurement_of_the_pick():
    choice, _ = a_choice()
    assert verdict(choice, Measured({1: served(100.0)})) is None


def test_verify_serves_its_placements_in_interleaved_rounds():
    import argparse
    from pathlib import Path

    from planner.app.tune_verify import bench_command

    choice, _ = a_choice()
    args = argparse.Namespace(model_path=None, config="p.yaml", variant=None, requests=96,
                              seed=0, device="cpu", stand_in_size=None, rounds=3)
    cmd = bench_command(args, choice, [0], Path("out"))
    assert cmd[cmd.index("--rounds") + 1] == "3"
    # named by its flags, so the bench's own table says which placement each row is
    assert cmd[cmd.index("--placement") + 1] == "isolate:b=--isolate-stage b"
    # never more rounds than requests: each round sends at least one
    few = bench_command(argparse.Namespace(**{**vars(args), "requests": 2}), choice, [0],
                        Path("out"))
    assert few[few.index("--rounds") + 1] == "2"


def _bench_runs(pipeline, cmd):
    """What `planner bench` serves for this command (its own choice of placements, so a command
    that names none gets bench's default comparison), as results.json lists them, all measured."""
    from planner.app.bench.placements import choose as bench_choose

    options = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--placement"]
    names = [p.name for p in bench_choose(pipeline, options, None)[0]]
    return names, {"baseline": "declared", "runs": [
        {"placement": n, "load": {"concurrency": 1, "rate": None, "throughput_rps": 10.0,
                                  "latency_s": {"p50": 0.1, "p99": 0.2}, "errors": 0}}
        for n in names]}


def test_verify_reports_every_placement_it_serves(tmp_path):
    import argparse
    import json

    from planner.app.tune_verify import bench_command, read_results, to_serve
    from tests.planner.tune.test_model import chain, profile

    # at C=1 the declared topology is predicted best: --verify 1 must serve it alone, not fall
    # back to bench's default comparison (every isolation) and report only one of them
    pl = chain("a", "b", "c")
    prof = profile({"a": (2.0, 0.0, 0.0), "b": (6.0, 0.0, 0.0), "c": (3.0, 0.0, 0.0)}, cores=2)
    choice = choose(pl, prof, (Workload(concurrency=1),))
    assert choice.ranked[0].name == "declared"
    args = argparse.Namespace(model_path=None, config="p.yaml", variant=None, requests=96,
                              seed=0, device="cpu", stand_in_size=None, rounds=3)
    for k in range(1, len(choice.ranked) + 1):
        picked = to_serve(choice, k)
        cmd = bench_command(args, choice, picked, tmp_path)
        names, results = _bench_runs(pl, cmd)
        (tmp_path / "results.json").write_text(json.dumps(results))
        measured = read_results(tmp_path / "results.json", choice, picked)
        assert measured.excluded_baseline is None  # the declared topology is ranked here
        served = {i for i, rows in measured.ranked.items() if rows[0]["throughput_rps"]}
        # every placement bench serves is reported, and it is the top k (plus the declared)
        assert len(served) == len(names)
        assert served == set(range(k)) | {choice.ranked.index(choice.declared)}
        assert verdict(choice, measured).served == len(names)


def test_a_pick_served_alone_is_not_said_to_have_beaten_anything():
    from tests.planner.tune.test_model import chain, profile

    pl = chain("a", "b", "c")
    prof = profile({"a": (2.0, 0.0, 0.0), "b": (6.0, 0.0, 0.0), "c": (3.0, 0.0, 0.0)}, cores=2)
    choice = choose(pl, prof, (Workload(concurrency=1),))
    v = verdict(choice, Measured({0: served(100.0)}))
    out = rendered(choice, prof, Measured({0: served(100.0)}), v)
    assert "only declared was served, so nothing was compared" in out
    assert "measured best" not in out


def test_the_declared_topology_served_while_excluded_is_reported(tmp_path):
    import argparse
    import json

    from planner.app.tune_verify import bench_command, read_results, to_serve
    from tests.planner.tune.test_model import chain, profile

    # an SLO the declared topology misses leaves it out of the ranking, yet bench serves it as
    # its baseline
    pl = chain("a", "b")
    prof = profile({"a": (4.0, 0.0, 0.0), "b": (4.0, 0.0, 0.0)}, cores=4)
    choice = choose(pl, prof, (Workload(concurrency=1),))
    split = next(c for c in choice.ranked if c.requests)
    choice = choice.__class__(**{**choice.__dict__, "ranked": (split,),
                                 "excluded": ((choice.declared, "p99 over the SLO"),)})
    args = argparse.Namespace(model_path=None, config="p.yaml", variant=None, requests=96,
                              seed=0, device="cpu", stand_in_size=None, rounds=3)
    picked = to_serve(choice, 1)
    cmd = bench_command(args, choice, picked, tmp_path)
    names, results = _bench_runs(pl, cmd)
    assert "declared" in names
    (tmp_path / "results.json").write_text(json.dumps(results))
    measured = read_results(tmp_path / "results.json", choice, picked)
    assert len(measured) == len(names)  # every served placement is in what tune reads back
    assert set(measured.ranked) == {0}  # the baseline is told apart, not ranked
    v = verdict(choice, measured)
    assert v.served == 1 and v.best == 0  # the excluded one is reported, never recommended
    out = rendered(choice, prof, measured, v)
    assert "excluded: declared (p99 over the SLO); served as the bench's baseline: C=1 10.00" in out
    data = choice_dict(choice, prof, "why", measured, v)
    assert data["excluded"][0]["measured_by_workload"][0]["throughput_rps"] == 10.0


def test_each_served_row_carries_how_much_of_the_cpus_the_host_stole(tmp_path):
    """So that a judge can set apart the measurements the host slowed (bench records the share
    per placement and load)."""
    from planner.app.tune_verify import bench_name, read_results

    choice, _ = a_choice()
    split = bench_name(choice.ranked[0])

    def run(name, rps, stolen):
        return {"placement": name, "load": {"concurrency": 8, "rate": None,
                                            "throughput_rps": rps, "errors": 0,
                                            "latency_s": {"p50": 0.1, "p99": 0.2},
                                            "cpu_stolen_of_running": stolen}}

    results = tmp_path / "results.json"
    results.write_text(json.dumps({"baseline": "declared", "runs": [
        run(split, 200.0, 0.02), run("declared", 120.0, 0.31)]}))
    measured = read_results(results, choice, [0])
    assert [measured.ranked[i][0]["cpu_stolen_of_running"] for i in (0, 1)] == [0.02, 0.31]
    assert measured.ranked[0][0]["throughput_rps"] == 200.0
