"""The model of a plan's compute: a stage's intra-op threads share its native work out over free
cores, and copies of a process group serve requests side by side."""

import pytest

import planner
from planner.plan import Copies, Threads
from planner.tune.model import Workload, predict
from planner.tune.profile import HandoffCost, Profile, StageProfile
from planner.tune.simulated_run import SimulatedRun
from tests.planner.tune.test_model import chain

QUIET = HandoffCost(0.0, 1e6, 0.0)  # no handoff costs: the stage alone sets the figures


def one_stage(gil=0.0, native=0.0, by_threads=None, cores=2):
    return Profile(model="chain", variant="default", cores=cores, cpu_model="test",
                   stages=(StageProfile("a", gil, native, 0.0, native_call_ms=1e9,
                                        native_ms_by_threads=by_threads),),
                   handoff=QUIET, process_rss_mib=100.0)


def plan(*requests, cpus=4):
    result = planner.solve_pipeline(chain("a"), requests=requests, cpus=cpus)
    assert result.ok, result.diagnostics
    return result.plan


ALONE = Workload(concurrency=1, requests=8, warmup=0)


def test_a_perfect_second_thread_halves_a_call_on_two_free_cores_and_gains_nothing_on_one():
    prof = one_stage(native=10.0, by_threads={"1": 10.0, "2": 5.0})
    one, two = plan(), plan(Threads("a", 2))
    assert two.stage("a").threads == 2
    on2 = [predict(p, prof, ALONE, cores=2).latency_p50_ms for p in (one, two)]
    assert on2[0] == pytest.approx(10.0, rel=0.01)
    assert on2[1] == pytest.approx(5.0, rel=0.01)
    # one core: the two halves take turns on it
    on1 = [predict(p, prof, ALONE, cores=1).latency_p50_ms for p in (one, two)]
    assert on1[1] == pytest.approx(on1[0], rel=0.01)


def test_a_second_thread_gains_only_what_the_profile_measured():
    half_way = one_stage(native=10.0, by_threads={"1": 10.0, "2": 7.5})
    unmeasured = one_stage(native=10.0)
    two = plan(Threads("a", 2))
    assert predict(two, half_way, ALONE, cores=2).latency_p50_ms == pytest.approx(7.5, rel=0.01)
    assert predict(two, unmeasured, ALONE, cores=2).latency_p50_ms == pytest.approx(10.0,
                                                                                  rel=0.01)


LOAD = Workload(concurrency=4, requests=200, warmup=20)


@pytest.mark.parametrize("costs", [{"gil": 10.0}, {"native": 10.0}], ids=["python", "native"])
def test_two_copies_of_the_bottleneck_nearly_double_throughput_only_where_cores_allow(costs):
    prof = one_stage(**costs)
    one, two = plan(), plan(Copies("p", 2))
    assert two.groups[0].copies == 2
    on2 = [predict(p, prof, LOAD, cores=2).throughput_rps for p in (one, two)]
    assert on2[0] == pytest.approx(100.0, rel=0.03)  # one 10 ms stage: 100 req/s
    assert on2[1] / on2[0] > 1.85
    on1 = [predict(p, prof, LOAD, cores=1).throughput_rps for p in (one, two)]
    assert on1[1] / on1[0] == pytest.approx(1.0, abs=0.03)


def test_requests_go_to_the_copy_with_fewest_in_flight_and_stay_there():
    prof = one_stage(native=10.0)
    run = SimulatedRun(plan(Copies("p", 3)), prof, LOAD, 4)
    for _ in range(4):
        run._submit()
    # four clients on three copies: one each, then the fourth to the lowest of the tied
    assert [run.bound[r]["p"] for r in range(4)] == [0, 1, 2, 0]
    run.sim.run()
    # every copy served its share
    assert set(run.thread_busy) == {f"a (copy {k})" for k in range(3)}
    assert min(run.thread_busy.values()) > 0.25 * sum(run.thread_busy.values())
