"""The generated-pipeline benchmark's parts that need no server: the seeded generator makes
pipelines the planner accepts, of every shape and cost kind it promises, the same ones for the same
seed; the judge reads measurements only (never tune's tie rules) and sums them up as reported."""

import ast
import json
from dataclasses import asdict
from pathlib import Path

import pytest

import planner

from benchmarks.tune_eval import generated as tg
from benchmarks.tune_eval import generator as gp
from benchmarks.tune_eval import judge as gj

ROOT = Path(__file__).resolve().parents[3]


def test_the_same_seed_gives_the_same_pipeline_and_it_solves():
    for seed in (1, 2, 3):
        cfg = gp.generate(seed, max_placements=6)
        assert cfg == gp.generate(seed, max_placements=6)
        result = planner.solve(config=cfg)
        assert result.ok, result.diagnostics
        assert 1 <= gp.count_placements(cfg) <= 6


def test_the_seeds_cover_chains_branches_streaming_and_every_cost_kind():
    cfgs = [gp.generate(seed, max_placements=6) for seed in range(1, 16)]
    described = " ".join(gp.describe(c) for c in cfgs)
    assert "chain:" in described and "branch:" in described and "streams" in described
    for kind in gp.KINDS:
        assert f" {kind} " in described
    sizes = {len(c["stages"]) for c in cfgs}
    assert sizes <= {3, 4, 5} and len(sizes) >= 2


@pytest.mark.parametrize("seed", [41, 42, 43, 44, 45, 46])
def test_without_device_stages_a_seed_gives_the_pipeline_its_judging_run_served(seed, saved_set):
    import yaml

    judged = saved_set("2026-12-02-judge3") / "quiet-judge3-seeds-41-46"
    served = yaml.safe_load((judged / f"generated-{seed}" / "pipeline.yaml").read_text())
    assert gp.generate(seed, max_placements=5) == served


def _device_ms_per_request(cfg):
    chunks = {t: s["args"]["chunks"] for s in cfg["stages"] for t in s.get("stream_to", [])}
    return {s["name"]: s["args"]["device_ms"] * chunks.get(s["name"], 1)
            for s in cfg["stages"] if "device_ms" in s["args"]}


def test_device_stages_hold_4_to_30_ms_asleep_per_request_in_every_pipeline_asked_for():
    cfgs = [gp.generate(seed, max_placements=6, device=True) for seed in range(1, 11)]
    for cfg in cfgs:
        held = _device_ms_per_request(cfg)
        assert held, cfg  # at least one device stage in each
        assert all(4.0 - 0.01 <= ms <= 30.0 + 0.01 for ms in held.values()), held
        for s in cfg["stages"]:
            if s["name"] in held:
                assert 0.2 <= s["args"]["gil_ms"] <= 1.0 and "native_ms" not in s["args"]
        assert planner.solve(config=cfg).ok
    assert gp.generate(7, device=True) == gp.generate(7, device=True)
    assert any(len(_device_ms_per_request(c)) < len(c["stages"]) for c in cfgs)  # CPU ones too
    assert " device " in gp.describe(cfgs[0])


def test_fewer_placements_allowed_leave_fewer_edges_process_safe():
    cfg = gp.generate(5, max_placements=2)
    assert gp.count_placements(cfg) <= 2


def answer(measured):
    """A tune --verify answer with one candidate per (flags, [(predicted, measured) per load])."""
    return {"candidates": [
        {"flags": flags,
         "predicted_by_workload": [{"throughput_rps": p} for p, _ in loads],
         "measured_by_workload": [{"throughput_rps": m, "errors": 0} for _, m in loads]}
        for flags, loads in measured]}


def test_errors_and_best_measured_come_from_the_measurements():
    a = answer([([], [(100.0, 80.0), (110.0, 100.0)]),
                (["--isolate-stage s1"], [(90.0, 90.0), (150.0, 120.0)])])
    assert gj.measured_at(a, 1) == {"declared": 100.0, "--isolate-stage s1": 120.0}
    assert sorted(round(e, 3) for e in gj.errors(a)) == [0.0, 0.1, 0.25, 0.25]


def test_quiet_errors_leave_out_what_the_host_slowed_and_what_does_not_say():
    a = answer([([], [(100.0, 80.0), (110.0, 100.0)]),
                (["--isolate-stage s1"], [(90.0, 90.0), (150.0, 120.0)])])
    rows = [a["candidates"][0]["measured_by_workload"], a["candidates"][1]["measured_by_workload"]]
    rows[0][0]["cpu_stolen_of_running"] = 0.30  # 100 vs 80 measured while the host took 30%
    rows[0][1]["cpu_stolen_of_running"] = 0.02
    rows[1][0]["cpu_stolen_of_running"] = 0.09
    # rows[1][1] says nothing (a run from before tune recorded it): left out
    assert sorted(round(e, 3) for e in gj.errors(a, quiet_only=True)) == [0.0, 0.1]
    figures = gj.summary([], gj.errors(a), gj.errors(a, quiet_only=True))
    assert (figures["errors"], figures["quiet_errors"]) == (4, 2)
    # planner.stats.percentile: p90 of [0, 0.1] interpolates to 0.09
    assert figures["quiet_p90_error"] == 0.09 and figures["p90_error"] == 0.25
    assert "quiet_errors" not in gj.summary([], gj.errors(a))


def test_quiet_is_the_bound_rate_answers_note_past():
    from planner.tune.rate_report import STOLEN_NOTE_SHARE

    assert gj.QUIET == STOLEN_NOTE_SHARE


def test_the_summary_counts_picks_within_5_percent_of_the_best_head_to_head():
    judged = [gj.Judged(1, "C=1", "a", "a", 10.0, 10.0, False),
              gj.Judged(1, "C=4", "a", "b", 96.0, 100.0, True),
              gj.Judged(2, "C=4", "a", "b", 80.0, 100.0, True),
              gj.Judged(2, "40 req/s", "a", "b", 105.0, 100.0, True)]  # above the best: as good as it
    s = gj.summary(judged, [0.05, -0.1, 0.2, 0.02])
    assert s["picks"] == 4 and s["within_5pct"] == 3 and s["share_within_5pct"] == 0.75
    assert abs(s["mean_pick_over_best"] - (1 + 0.96 + 0.8 + 1) / 4) < 1e-4
    assert s["median_error"] == 0.075 and s["p90_error"] == 0.17  # |errors| interpolated
    assert s["lowest"] == 0.8


def _saved_run(root, name, judged, answers):
    run = root / name
    for seed, a in answers.items():
        (run / f"generated-{seed}").mkdir(parents=True)
        (run / f"generated-{seed}" / "answer.json").write_text(json.dumps(a))
    per_seed = [{"seed": seed, "judged": [asdict(j) | {"ratio": j.ratio} for j in judged
                                          if j.seed == seed]} for seed in answers]
    (run / "summary.json").write_text(json.dumps({"per_seed": per_seed}))
    return run


def test_overall_counts_a_pick_judged_again_by_its_new_head_to_head(tmp_path):
    a = answer([([], [(100.0, 80.0), (110.0, 100.0)])])
    set1 = _saved_run(tmp_path, "quiet-judge-seeds-1", [
        gj.Judged(1, "C=1", "a", "a", 10.0, 10.0, False),
        gj.Judged(1, "C=4", "a", "b", 90.0, 100.0, True)], {1: a})
    set2 = _saved_run(tmp_path, "quiet-judge-seeds-2", [
        gj.Judged(2, "C=1", "a", "b", 99.0, 100.0, True)], {2: a})
    again = tmp_path / "rejudged" / set1.name
    again.mkdir(parents=True)
    (again / "rejudge.json").write_text(json.dumps({"rejudged": set1.name, "pairs": [
        {"seed": 1, "load": "C=4", "pick_rps": 98.0, "best_rps": 100.0,
         "interval_90": [0.95, 1.01]}]}))

    before = gj.overall([set1, set2])["all"]
    assert before["picks"] == 3 and before["within_5pct"] == 2 and before["lowest"] == 0.9
    after = gj.overall([set1, set2, again])
    assert after["all"]["within_5pct"] == 3 and after["all"]["lowest"] == 0.98
    assert after["sets"][set1.name]["rejudged"] and not after["sets"][set2.name]["rejudged"]
    assert after["all"]["errors"] == 4  # each set's answer: two measured loads


def test_overall_refuses_a_rejudge_without_the_run_it_judged(tmp_path):
    again = tmp_path / "rejudged"
    again.mkdir()
    (again / "rejudge.json").write_text(json.dumps({"rejudged": "quiet-x", "pairs": []}))
    with pytest.raises(SystemExit, match="give that run's directory too"):
        gj.overall([again])


@pytest.mark.parametrize("script", ["generated.py", "judge.py", "generator.py"])
def test_the_judge_never_imports_tunes_ranking(script):
    tree = ast.parse((ROOT / "benchmarks" / "tune_eval" / script).read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not any(m and m.startswith("planner.tune") for m in imported), imported


def test_loads_are_passed_as_the_commands_take_them():
    assert tg.load_args([("--concurrency", 4), ("--rate", 37.5)]) == [
        "--concurrency", "4", "--rate", "37.5"]
    assert [tg.load_label(x) for x in [("--concurrency", 4), ("--rate", 37.5)]] == [
        "C=4", "37.5 req/s"]


def test_the_judges_interval_is_tight_for_steady_rounds_and_wide_for_noisy_ones():
    steady = [(36.0 * k, 40.0 * k) for k in (0.9, 1.0, 1.1, 0.95)]  # x0.9 in every round
    low, high = gj.ratio_interval(steady)
    assert 0.899 < low <= 0.9 <= high < 0.901
    noisy = [(32.0, 40.0), (44.0, 40.0), (30.0, 40.0), (46.0, 40.0)]
    low, high = gj.ratio_interval(noisy)
    assert low < 0.85 and high > 1.05  # the judge cannot tell these two apart
    assert gj.ratio_interval([(30.0, 40.0)]) is None  # one round says nothing of its spread
