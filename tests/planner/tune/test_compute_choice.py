"""`planner tune` choosing threads and copies: the search is bounded and pruned by the planner's
over-cpus rule, and what it recommends (flags, YAML overlay, JSON) solves to the plan it ranked."""

import planner
from planner.flags import parse
from planner.plan import Copies, Threads
from planner.tune import compute_search
from planner.tune.choose import WIDENED_PLACEMENTS, choose
from planner.tune.model import Workload
from planner.tune.profile import Profile, StageProfile
from planner.tune.report import choice_dict, overlay_yaml, persistent_overlay, persistent_processes
from tests.planner.tune.test_model import chain

LOAD = Workload(concurrency=4, requests=60, warmup=8)


def two_stage(cores, by_threads=None):
    """a: a little Python; b: 10 ms of native work (with `by_threads`: measured on threads)."""
    return Profile(model="chain", variant="default", cores=cores, cpu_model="t",
                   stages=(StageProfile("a", 1.0, 0.0, 0.0),
                           StageProfile("b", 0.5, 10.0, 0.0, native_ms_by_threads=by_threads)),
                   process_rss_mib=100.0)


def test_every_candidate_fits_the_cpus_and_their_number_is_bounded(monkeypatch):
    solved = []
    real = compute_search.accepted_plan

    def counting(*args, **kwargs):
        plan = real(*args, **kwargs)
        solved.append(plan is not None)
        return plan

    monkeypatch.setattr(compute_search, "accepted_plan", counting)
    for cores in (1, 2, 4):
        solved.clear()
        prof = two_stage(cores, {"1": 10.0, "2": 6.0, "3": 5.0, "4": 4.5})
        choice = choose(chain("a", "b"), prof, (LOAD,), cores=cores, compute=True)
        placements = len(planner.feasible_placements(chain("a", "b")))
        bound = WIDENED_PLACEMENTS * 2 * compute_search.MAX_WIDENED_STAGES * \
            compute_search.MAX_STEPS
        assert len(solved) <= bound and len(choice.ranked) <= placements + bound
        assert choice.refused == solved.count(False)
        for c in choice.ranked:  # the over-cpus rule held for each
            for s in c.plan.stages:
                assert s.threads * c.plan.copies_of(s.name) <= cores, (cores, c.name)
        if cores == 1:  # nothing more fits one CPU: the rule refused every step tried
            assert all(not c.compute for c in choice.ranked) and choice.refused > 0
        else:
            assert any(c.compute for c in choice.ranked)


def test_a_thread_is_offered_only_where_the_profile_measured_one_and_copies_only_under_load():
    unmeasured = choose(chain("a", "b"), two_stage(4), (LOAD,), compute=True)
    assert not any(isinstance(r, Threads) for c in unmeasured.ranked for r in c.compute)
    alone = choose(chain("a", "b"), two_stage(4, {"1": 10.0, "2": 5.5}),
                   (Workload(concurrency=1),), compute=True)
    assert not any(isinstance(r, Copies) for c in alone.ranked for r in c.compute)
    assert alone.best.compute == (Threads("b", 2),)  # one request: only a thread makes it faster


def test_without_compute_only_placements_are_ranked():
    choice = choose(chain("a", "b"), two_stage(2, {"1": 10.0, "2": 5.0}), (LOAD,))
    assert all(not c.compute for c in choice.ranked) and choice.refused == 0


def test_the_picks_flags_overlay_and_json_solve_to_the_plan_it_ranked(tmp_path):
    # qwen3-tts's vocoder: native work that a second thread speeds up; four clients on 4 CPUs
    prof = Profile(model="qwen3-tts", variant="default", cores=4, cpu_model="t", stages=(
        StageProfile("preprocessing", 0.5, 0.0, 0.0),
        StageProfile("tts_engine", 6.0, 2.0, 0.0, chunks_out=4, out_bytes=10_000),
        StageProfile("vocoder", 1.0, 20.0, 0.0, native_ms_by_threads={"1": 20.0, "2": 11.0})),
        process_rss_mib=280.0)
    pipeline = planner.load(model_path="qwen3-tts")
    choice = choose(pipeline, prof, (LOAD,), compute=True)
    best = choice.best
    assert best.compute, best.name
    assert {type(r) for r in best.compute} == {Threads, Copies}, best.name  # both, to round-trip

    def shape(plan):
        return ([(g.name, g.stages, g.copies) for g in plan.groups],
                [(s.name, s.threads) for s in plan.stages])

    # the flags, as printed, parsed back as `planner serve` and `planner solve` read them
    words = [w for f in planner.flags(best.requests) for w in f.split(" ", 1)]
    by_flags = planner.solve("qwen3-tts", requests=parse(words), cpus=4)
    assert by_flags.ok and shape(by_flags.plan) == shape(best.plan)
    # the overlay, as printed (YAML), given as --config
    text = overlay_yaml("qwen3-tts", "default", persistent_overlay(best.plan, best.requests),
                        persistent_processes(best.plan))
    (tmp_path / "o.yaml").write_text(text)
    by_overlay = planner.solve(config=str(tmp_path / "o.yaml"), cpus=4)
    assert by_overlay.ok and shape(by_overlay.plan) == shape(best.plan), text
    # the JSON's overlay and candidates
    data = choice_dict(choice, prof, "why")
    by_json = planner.solve(config=data["persist"]["overlay"], cpus=4)
    assert by_json.ok and shape(by_json.plan) == shape(best.plan)
    assert data["persist"]["flags"] == list(planner.flags(best.requests))
    top = data["candidates"][0]
    assert {g["name"]: g["copies"] for g in top["groups"]} == {
        g.name: g.copies for g in best.plan.groups}
    assert top["threads"] == {s.name: s.threads for s in best.plan.stages}


def test_threads_a_config_declares_are_where_the_search_starts():
    pl = planner.load(config={"name": "chain", "stages": [
        {"name": "a", "process": "p", "next": "b"},
        {"name": "b", "process": "p", "terminal": True, "threads": 2}],
        "process_safe_edges": [["a", "b"]]})
    prof = two_stage(4, {"1": 10.0, "2": 6.0, "3": 4.0})
    choice = choose(pl, prof, (Workload(concurrency=1),), compute=True)
    asked = [c.compute for c in choice.ranked if c.compute]
    # no request for the 2 threads it has; 3 is a step up from them
    assert (Threads("b", 3),) in asked and not any(Threads("b", 2) in a for a in asked)
    assert all(c.plan.stage("b").threads >= 2 for c in choice.ranked)
