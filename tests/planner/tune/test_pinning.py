"""tune pins, under a load of several requests at once, the one group whose lock hand-overs would
otherwise wake threads onto other processes' CPUs (`planner.tune.pinning`): the group of several
single-thread stages needing the most of one CPU, within bounds, on the last CPU; a plan that is
one such group in a copy per CPU, each copy on a CPU of its own; and its answer runs with that
pin, flags and overlay alike."""

from __future__ import annotations

import yaml

import planner
from planner.flags import command_line
from planner.plan import Pin
from planner.tune.choose import _several_in_flight, choose, why
from planner.tune.model import Workload
from planner.tune.pinning import MAX_SHARE, MAX_WAIT_SHARE, MIN_SHARE, pin_for
from planner.tune.report import overlay_yaml, persistent_processes
from tests.planner.tune.test_model import chain, profile


def plan_of(pl, *flags):
    r = planner.solve_pipeline(pl, requests=planner.parse_flags(list(flags)), cpus=2)
    assert r.ok, r.diagnostics
    return r.plan


def prediction(rps):
    return planner.tune.workload.Prediction(throughput_rps=rps, latency_p50_ms=1.0,
                                            latency_p99_ms=1.0, ttfa_p90_ms=None,
                                            utilization=())


PL = chain("a", "b", "c", "d")
# pure Python a-d: 2, 3, 2, 1.5 ms a request (the group b+c+d: 6.5 ms)
PROF = profile({"a": (2.0, 0.0, 0.0), "b": (3.0, 0.0, 0.0), "c": (2.0, 0.0, 0.0),
                "d": (1.5, 0.0, 0.0)}, cores=2)


def test_the_busiest_group_of_several_stages_goes_on_the_last_cpu():
    plan = plan_of(PL, "--isolate-stage", "a")
    # at 100 req/s b+c+d needs 0.65 of a CPU, a alone (one stage) is not pinned
    assert pin_for(plan, PROF, [prediction(100.0)], (0, 1)) == Pin("p", (1,))
    assert pin_for(plan, PROF, [prediction(100.0)], (2, 5, 3)) == Pin("p", (5,))


def test_no_pin_without_load_a_second_cpu_or_a_group_that_fits_the_bounds():
    plan = plan_of(PL, "--isolate-stage", "a")
    assert pin_for(plan, PROF, [], (0, 1)) is None  # nothing in flight beside anything
    assert pin_for(plan, PROF, [prediction(100.0)], (0,)) is None
    need = 6.5 / 1000.0  # CPU-seconds a request
    assert pin_for(plan, PROF, [prediction(0.9 * MIN_SHARE / need)], (0, 1)) is None
    assert pin_for(plan, PROF, [prediction(1.05 * MAX_SHARE / need)], (0, 1)) is None
    # the heaviest load decides: a group that would need more than a CPU there is not held to one
    assert pin_for(plan, PROF, [prediction(100.0), prediction(150.0)], (0, 1)) is None


def test_copies_fewer_than_the_cpus_are_not_pinned():
    three_cpus = planner.solve_pipeline(PL, requests=planner.parse_flags(
        ["--isolate-stage", "a", "--process-copies", "p=2"]), cpus=3)
    assert pin_for(three_cpus.plan, PROF, [prediction(100.0)], (0, 1, 2)) is None


def test_a_group_in_a_copy_per_cpu_gets_each_copy_its_own_cpu():
    copied = plan_of(PL, "--process-copies", "p=2")
    assert pin_for(copied, PROF, [prediction(100.0)], (0, 1)) == Pin("p", (0, 1))
    assert pin_for(copied, PROF, [prediction(100.0)], (3, 1)) == Pin("p", (1, 3))
    assert pin_for(copied, PROF, [], (0, 1)) is None  # one request at a time: nothing to share
    # not a copy per CPU, or not one group, or a stage of more threads than one: unpinned
    three_cpus = planner.solve_pipeline(PL, requests=planner.parse_flags(
        ["--process-copies", "p=2"]), cpus=3)
    assert pin_for(three_cpus.plan, PROF, [prediction(100.0)], (0, 1, 2)) is None
    # beside another group, the copied one still: b+c+d's copies, a alone unpinned
    assert pin_for(plan_of(PL, "--process-copies", "p=2", "--isolate-stage", "a"), PROF,
                   [prediction(100.0)], (0, 1)) == Pin("p", (0, 1))
    # of two copied groups, the one with more work (c+d: 3.5 ms against a+b's 5 ms)
    two = plan_of(PL, "--stage-process", "a=x", "--stage-process", "b=x",
                  "--process-copies", "p=2", "--process-copies", "x=2")
    assert pin_for(two, PROF, [prediction(100.0)], (0, 1)) == Pin("x", (0, 1))
    wide = planner.solve_pipeline(PL, requests=planner.parse_flags(
        ["--process-copies", "p=2", "--stage-threads", "b=2"]), cpus=4)
    assert wide.ok
    assert pin_for(wide.plan, PROF, [prediction(100.0)], (0, 1)) is None


def test_copies_that_wait_on_a_device_for_much_of_their_work_are_not_pinned():
    copied = plan_of(PL, "--process-copies", "p=2")
    work = 2.0 + 3.0 + 2.0 + 1.5  # the group's CPU work a request, ms

    def with_device(ms):
        return profile({"a": (2.0, 0.0, ms), "b": (3.0, 0.0, 0.0), "c": (2.0, 0.0, 0.0),
                        "d": (1.5, 0.0, 0.0)}, cores=2)

    assert pin_for(copied, with_device(0.9 * MAX_WAIT_SHARE * work), [prediction(100.0)],
                   (0, 1)) == Pin("p", (0, 1))  # piper-joe's frontend waits on espeak-ng so
    assert pin_for(copied, with_device(1.1 * MAX_WAIT_SHARE * work), [prediction(100.0)],
                   (0, 1)) is None


def test_tunes_c4_pick_for_piper_runs_each_copy_on_a_cpu_of_its_own_and_says_so():
    from planner.tune.answer import changes
    from planner.tune.profile import Profile
    from tests.planner.tune.test_answer import PIPER_WHOLE

    busy = choose(planner.load(model_path="piper-joe"), Profile.load(PIPER_WHOLE),
                  (Workload(concurrency=4),), compute=True, cpu_ids=(0, 1))
    pick = busy.ranked[0]
    assert command_line(pick.requests) == ("--process-copies pipeline=2 "
                                           "--process-cpus pipeline=0-1")
    assert [g.cpus for g in pick.plan.groups] == [(0, 1)]
    assert [g.copy_cpus() for g in pick.plan.groups] == [((0,), (1,))]
    assert changes(pick) == ("runs 2 copies of pipeline and pins pipeline's copies one to a "
                             "CPU each (0,1)")
    # tune.json's account gives the copies' reason, not the one-group pin's
    assert "one copy of pipeline on each of CPUs 0,1 lets its stages take turns" in why(busy)
    assert "lock hand-overs of pipeline" not in why(busy)


def test_tune_runs_its_plans_pinned_at_c4_and_unpinned_at_c1():
    busy = choose(PL, PROF, (Workload(concurrency=4),), cpu_ids=(0, 1))
    pinned = [c for c in busy.ranked if any(isinstance(r, Pin) for r in c.requests)]
    assert pinned and all(c.plan.groups and any(g.cpus == (1,) for g in c.plan.groups)
                          for c in pinned)
    assert not any(isinstance(r, Pin) for r in busy.declared.requests)  # declared stays as declared
    lone = choose(PL, PROF, (Workload(concurrency=1),), cpu_ids=(0, 1))
    assert not any(isinstance(r, Pin) for c in lone.ranked for r in c.requests)
    off = choose(PL, PROF, (Workload(concurrency=4),), cpu_ids=(0, 1), pins=False)
    assert not any(isinstance(r, Pin) for c in off.ranked for r in c.requests)
    # the same predictions either way: the model shares the cores as one queue
    def unpinned(c):
        return command_line(tuple(r for r in c.requests if not isinstance(r, Pin)))

    by_plan = {unpinned(c): c.predicted[0].throughput_rps for c in off.ranked}
    assert {unpinned(c): c.predicted[0].throughput_rps for c in busy.ranked} == by_plan


def test_a_rate_question_keeps_its_plans_unpinned():
    # Pins were measured on closed loops; the rate question's tails were judged without them.
    # 140 req/s overlaps requests here (the group b+c+d alone needs 0.91 of a CPU at that rate).
    at_rate = choose(PL, PROF, (Workload(rate=140.0),), "ttfa", cpu_ids=(0, 1))
    assert _several_in_flight(at_rate.ranked[0].predicted[0])
    assert not any(isinstance(r, Pin) for c in at_rate.ranked for r in c.requests)
    closed = choose(PL, PROF, (Workload(concurrency=4),), cpu_ids=(0, 1))
    assert any(isinstance(r, Pin) for c in closed.ranked for r in c.requests)


def test_the_overlay_pins_as_the_flags_do():
    plan = plan_of(PL, "--isolate-stage", "a", "--process-cpus", "p=1")
    processes = persistent_processes(plan)
    assert processes == {"p": {"cpus": "1"}}
    text = overlay_yaml("m", "default", [], processes)
    assert "  p: {cpus: '1'}" in text
    # read back as a config reads it, it pins the same group to the same CPU
    stages = [{"name": n, "process": "a" if n == "a" else "p",
               **({"next": nxt} if nxt else {"terminal": True})}
              for n, nxt in (("a", "b"), ("b", "c"), ("c", "d"), ("d", None))]
    config = {"name": "chain", "stages": stages, "process_safe_edges": [["a", "b"]],
              **yaml.safe_load(text)}
    del config["model"]
    again = planner.solve_pipeline(planner.load(config=config), cpus=2)
    assert again.ok and [g.cpus for g in again.plan.groups] == [(), (1,)]
