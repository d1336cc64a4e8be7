"""The performance model on pipelines whose costs are known: the placement it recommends changes
with the load and with the machine, as the launcher's execution says it should."""

from dataclasses import replace

import pytest

import planner
from planner.flags import placement_only
from planner.tune.report import persistent_overlay
from planner.tune.choose import choose, why
from planner.tune.model import Workload, os_slice_ms, predict
from planner.tune.profile import HandoffCost, Profile, StageProfile


def chain(*names, process="p", stream_to=None):
    stages = [{"name": n, "process": process, **({"next": names[i + 1]} if i + 1 < len(names)
                                                  else {"terminal": True})}
              for i, n in enumerate(names)]
    for stage in stages:
        if stage["name"] in (stream_to or {}):
            stage["stream_to"] = [stream_to[stage["name"]]]
    return planner.load(config={"name": "chain", "stages": stages,
                                "process_safe_edges": [[a, b] for a, b in zip(names, names[1:])]})


def profile(stages, cores=2, handoff=HandoffCost(0.05, 5.0, 0.05), frontend_ms=0.0,
            native_call_ms=None):
    return Profile(model="chain", variant="default", cores=cores, cpu_model="test",
                   stages=tuple(StageProfile(n, *costs, native_call_ms=native_call_ms)
                                for n, costs in stages.items()),
                   handoff=handoff, frontend_ms=frontend_ms, process_rss_mib=100.0)


# Long enough that a closed loop's start and drain (part of a run of the bench's default 96
# requests, and of its prediction) hardly count: for a steady state's analytic bound.
STEADY = Workload(concurrency=8, requests=400)


def best_name(pipeline, prof, workload, cores=None):
    return choose(pipeline, prof, (workload,), cores=cores).best.name


def test_one_request_at_a_time_prefers_one_process_and_a_load_prefers_two():
    # Each stage holds the interpreter lock for 4 ms; a crossing costs 1 ms a side.
    pl = chain("a", "b")
    prof = profile({"a": (4.0, 0.0, 0.0), "b": (4.0, 0.0, 0.0)}, cores=4,
                   handoff=HandoffCost(1.0, 5.0, 0.01))
    assert best_name(pl, prof, Workload(concurrency=1)) == "declared"
    assert best_name(pl, prof, Workload(concurrency=8)) == "--isolate-stage b"
    declared = predict(planner.declared_plan(pl), prof, Workload(concurrency=8))
    assert declared.bottleneck[0] == "interpreter lock of p"
    # The lock's bound: 8 ms of stages plus receiving and sending a request, 1 ms each.
    assert declared.throughput_rps == pytest.approx(1000 / 10, rel=0.05)


def test_two_cores_keep_one_process_and_more_cores_split_it():
    # Half of every stage is native work, in one call (it needs the lock back only when done, so
    # it overlaps the other stages' Python freely): on 2 cores the CPU is the bound whatever the
    # split.
    pl = chain("a", "b", "c")
    prof = profile({n: (3.0, 3.0, 0.0) for n in "abc"}, native_call_ms=3.0)
    load = Workload(concurrency=8)
    two = choose(pl, prof, (load,), cores=2)
    # the declared topology is predicted within a tie of the pick: said as a tie, with --verify,
    # not settled by a rule (one that gave ties to fewer processes cost 20% on issue 26's pipeline)
    assert two.best.name == "declared" or "declared" in why(two)
    assert "equal by the model" in why(two) and "--verify" in why(two)
    many = best_name(pl, prof, load, cores=8)
    assert many != "declared"
    best = choose(pl, prof, (load,), cores=8).best
    assert best.predicted[0].throughput_rps > 1.3 * predict(
        planner.declared_plan(pl), prof, load, cores=8).throughput_rps


def test_device_time_overlaps_and_a_stage_thread_is_a_serial_resource():
    pl = chain("a", "b")
    prof = profile({"a": (1.0, 0.0, 9.0), "b": (1.0, 0.0, 0.0)})
    p = predict(planner.declared_plan(pl), prof, STEADY)
    # a's thread takes one request at a time: 10 ms each, whatever else is free.
    assert p.throughput_rps == pytest.approx(100, rel=0.05)
    assert p.bottleneck[0] == "stage thread a"
    one = predict(planner.declared_plan(pl), prof, Workload(concurrency=1))
    assert one.latency_p50_ms == pytest.approx(11, rel=0.05)


def test_open_loop_latency_grows_past_saturation_while_throughput_flattens():
    pl = chain("a", "b")
    prof = profile({"a": (5.0, 0.0, 0.0), "b": (5.0, 0.0, 0.0)})  # 100 req/s at most
    plan = planner.declared_plan(pl)
    low, high, over = (predict(plan, prof, Workload(rate=r, requests=400)) for r in (50, 95, 150))
    assert low.latency_p50_ms < high.latency_p50_ms < over.latency_p50_ms
    assert over.throughput_rps == pytest.approx(100, rel=0.08)


def device_stream():
    """A generator of 40 ms device time streaming 20 chunks to a 20 ms vocoder, in one process."""
    cfg = {"name": "s", "stages": [
        {"name": "gen", "process": "p", "next": "voc", "stream_to": ["voc"]},
        {"name": "voc", "process": "p", "terminal": True}],
        "process_safe_edges": [["gen", "voc"]]}
    prof = Profile(model="s", variant="default", cores=2, cpu_model="t", stages=(
        StageProfile("gen", 0.0, 0.0, 40.0, chunks_out=20), StageProfile("voc", 0.0, 0.0, 20.0)))
    return planner.declared_plan(planner.load(config=cfg)), prof


def test_streaming_time_to_first_audio_is_the_first_chunk_not_the_request():
    p = predict(*device_stream(), Workload(concurrency=1))
    # Two chunks of the generator (the launcher hands a chunk on once the next is out, to know
    # which is the last), then one of the vocoder.
    assert p.ttfa_p90_ms == pytest.approx(2 * 2.0 + 1.0, rel=0.1)
    assert p.latency_p50_ms == pytest.approx(40 + 1.0, rel=0.1)  # the rest overlaps


def test_a_new_requests_first_chunk_does_not_wait_behind_another_stream():
    # The launcher's stage threads take a request's first item before others' later ones and
    # give a stream one chunk a turn (planner.fair_queue); the model's must too. In first-come
    # order the second of two requests would wait for all 40 ms of the first one's chunks.
    two = predict(*device_stream(), Workload(concurrency=2, requests=200))
    assert two.ttfa_p90_ms < 20.0, two.ttfa_p90_ms
    # Turns change the order, not the work: the generator's thread stays the bound (40 ms a
    # request).
    assert two.throughput_rps == pytest.approx(1000 / 40, rel=0.1)


def test_constraints_and_the_reason_given():
    pl = chain("a", "b")
    prof = profile({"a": (4.0, 0.0, 0.0), "b": (4.0, 0.0, 0.0)}, cores=4)
    choice = choose(pl, prof, (Workload(concurrency=8),), max_processes=1)
    assert [c.name for c in choice.ranked] == ["declared"]
    assert "--max-processes 1" in choice.excluded[0][1]
    free = choose(pl, prof, (Workload(concurrency=8),))
    assert "interpreter lock of p" in why(free) and free.best.name in why(free)


def test_the_persistent_overlay_reproduces_the_chosen_plan():
    r = planner.solve("qwen3-tts", requests=[planner.Isolate("vocoder")])
    overlay = {"model": "qwen3-tts", "stages": persistent_overlay(r.plan, (planner.Isolate("vocoder"),))}
    again = planner.solve(config=overlay)
    assert again.ok and [(g.name, g.stages) for g in again.plan.groups] == [
        (g.name, g.stages) for g in r.plan.groups]
    assert [(s.name, s.fraction) for s in again.plan.stages] == [
        (s.name, s.fraction) for s in r.plan.stages]


# -- native work re-takes the interpreter lock between calls ---------------------------------------
def placement(pipeline, name):
    for p in planner.feasible_placements(pipeline):
        if (" ".join(planner.flags(p.requests)) or "declared") == name:
            return p.plan
    raise KeyError(name)


def mixed(call_ms, cores=4):
    """a: 4 ms of native work in calls of `call_ms` ms; b: 4 ms of pure Python."""
    return profile({"a": (0.0, 4.0, 0.0), "b": (4.0, 0.0, 0.0)}, cores=cores,
                   native_call_ms=call_ms)


def test_native_work_waits_for_the_lock_behind_its_process_pure_python_work():
    pl, load = chain("a", "b"), STEADY
    prof = mixed(0.05)  # a hashed block, a small torch op
    declared = predict(planner.declared_plan(pl), prof, load)
    split = predict(placement(pl, "--isolate-stage b"), prof, load)
    # Apart, each stage thread is the bound (4 ms and the handoffs it makes: under 250 req/s).
    # Together, a's thread needs the lock after every 0.05 ms call while b holds it for up to a
    # switch interval, so little of a's work overlaps b's: nearly 8 ms of serial work per request.
    assert split.throughput_rps == pytest.approx(240, rel=0.05)
    assert declared.throughput_rps == pytest.approx(1000 / 8, rel=0.15)
    assert best_name(pl, prof, load) == "--isolate-stage b"


def test_the_fewer_calls_native_work_makes_the_more_it_overlaps_pure_python():
    pl, load = chain("a", "b"), STEADY
    rps = [predict(planner.declared_plan(pl), mixed(call), load).throughput_rps
           for call in (0.05, 0.5, 2.0, 1e9)]
    assert rps == sorted(rps) and rps[0] < 0.7 * rps[-1]
    # One call per request: it needs the lock only when done, and b holds it 4 ms at most.
    assert rps[-1] > 0.9 * 250


def test_a_lone_native_thread_or_pure_python_predicts_as_before():
    # Nothing else in the process holds the lock for long: however small the calls, native work
    # runs as if it never needed the lock (the old model), and pure Python never makes calls.
    load = STEADY
    native = chain("a", "b")
    both_native = {"a": (0.0, 4.0, 0.0), "b": (0.0, 4.0, 0.0)}
    fine, coarse = (predict(planner.declared_plan(native), profile(both_native, cores=4,
                                                                   native_call_ms=c), load)
                    for c in (0.05, 1e9))
    assert fine.throughput_rps == pytest.approx(coarse.throughput_rps, rel=0.02)
    assert fine.throughput_rps == pytest.approx(240, rel=0.05)  # a stage thread's bound
    python = {"a": (4.0, 0.0, 0.0), "b": (4.0, 0.0, 0.0)}
    assert predict(planner.declared_plan(native), profile(python, native_call_ms=0.05), load) \
        == predict(planner.declared_plan(native), profile(python, native_call_ms=1e9), load)


def test_pure_python_holds_the_lock_a_switch_interval_at_a_time():
    # b runs 40 ms of pure Python per request; a's native work needs the lock after every 0.05 ms
    # call. CPython makes b drop the lock for a waiter after a switch interval, so a gets a call in
    # per interval while b works: the shorter the interval, the more of a overlaps b. An interval
    # as long as b's hold is the same as no slicing at all.
    pl, load = chain("a", "b"), Workload(concurrency=8, requests=40, warmup=8)
    stages = {"a": (0.0, 4.0, 0.0), "b": (40.0, 0.0, 0.0)}

    def rps(switch_ms, wake_ms=0.001):
        prof = replace(profile(stages, cores=4, native_call_ms=0.05,
                               handoff=HandoffCost(0.05, 5.0, wake_ms)),
                       switch_interval_ms=switch_ms)
        return predict(planner.declared_plan(pl), prof, load).throughput_rps

    assert rps(0.5) > rps(1.0) > rps(5.0) > rps(40.0) == rps(1000.0)
    # Each hand-over wakes the thread that waited (the profile's handoff latency): with wake-ups
    # of 0.1 ms, two per switch interval, a 0.5 ms interval loses more to them than it overlaps.
    assert rps(0.5, wake_ms=0.1) < rps(1.0, wake_ms=0.1)


def test_torch_like_stages_in_a_tie_get_a_process_each_while_cores_last():
    # Qwen3-TTS's shape: an engine and a vocoder of short native calls (torch ops), a tiny
    # preprocessing stage. The model predicts the engine bound either way (a tie); in one process
    # the two wait for each other's interpreter lock at every op, so the tie isolates the vocoder
    # while the machine has a core per process, and explains itself.
    pl = chain("pre", "engine", "vocoder")
    prof = profile({"pre": (0.05, 0.5, 0.0), "engine": (1.2, 260.0, 0.0),
                    "vocoder": (0.4, 40.0, 0.0)}, cores=2, native_call_ms=0.02,
                   handoff=HandoffCost(0.05, 15.0, 0.014))
    choice = choose(pl, prof, (Workload(concurrency=1), Workload(concurrency=8)))
    # (its other group gets a CPU of its own too: `planner.tune.pinning`)
    assert placement_only(choice.best.requests) == (planner.Isolate("vocoder"),)
    assert "equal by the model" in why(choice) and "interpreter lock" in why(choice)
    # On one core a second process has no core of its own: the tie keeps one process.
    assert choose(pl, prof, (Workload(concurrency=8),), cores=1).best.name == "declared"
    # Long native calls re-take the lock rarely: company costs them nothing, one process stays.
    # Nothing the model knows of tells them apart then: the higher prediction, said as a tie.
    rare = replace(prof, stages=tuple(replace(s, native_call_ms=5.0) for s in prof.stages))
    tie = choose(pl, rare, (Workload(concurrency=8),))
    assert "equal by the model" in why(tie) and "--verify" in why(tie)
    assert tie.ranked[0].predicted[0].throughput_rps >= tie.ranked[1].predicted[0].throughput_rps


def test_one_request_at_a_time_crowds_only_stages_that_stream_to_each_other():
    # The tie of the test above, at C=1: in a plain chain the engine and the vocoder never run at
    # once, so nothing crowds the engine and one process keeps the crossing's cost away; when the
    # engine streams to the vocoder they do run at once, and the tie isolates the vocoder.
    prof = profile({"pre": (0.05, 0.5, 0.0), "engine": (1.2, 260.0, 0.0),
                    "vocoder": (0.4, 40.0, 0.0)}, cores=2, native_call_ms=0.02,
                   handoff=HandoffCost(0.05, 15.0, 0.014))
    one = (Workload(concurrency=1),)
    assert choose(chain("pre", "engine", "vocoder"), prof, one).best.name == "declared"
    streaming = chain("pre", "engine", "vocoder", stream_to={"engine": "vocoder"})
    assert streaming.stage("engine").stream_to == ("vocoder",)
    assert choose(streaming, prof, one).best.name == "--isolate-stage vocoder"


def test_a_thread_handed_the_lock_runs_only_once_woken():
    # Two pure-Python stages share one lock; each request hands it from one to the other and back.
    # A thread that waited for the lock sleeps, and the lock is idle until it has woken (the
    # profile's handoff latency measures such a wake-up): the slower the wake-ups, the longer
    # each request holds the lock. Apart, nothing waits for a lock: wake-ups cost nothing.
    pl, load = chain("a", "b"), Workload(concurrency=8)
    stages = {"a": (4.0, 0.0, 0.0), "b": (4.0, 0.0, 0.0)}

    def rps(plan, wake_ms):
        prof = profile(stages, cores=4, handoff=HandoffCost(0.05, 5.0, wake_ms))
        return predict(plan, prof, load).throughput_rps

    declared, split = planner.declared_plan(pl), placement(pl, "--isolate-stage b")
    added_ms = 1000 / rps(declared, 0.2) - 1000 / rps(declared, 0.01)
    assert 1 * 0.19 < added_ms < 3 * 0.19  # about two hand-overs a request, 0.19 ms more each
    assert rps(split, 0.2) == pytest.approx(rps(split, 0.01), rel=0.01)


def test_more_busy_threads_than_cores_take_turns_on_them(monkeypatch):
    # native-device's shape (`benchmarks/tune_accuracy.py`) in three processes on two cores. The
    # OS gives each runnable thread a base slice in turn rather than its whole work: the serial
    # stage threads keep waiting for each other's turns, and the cores are busy far less than the
    # CPU per request would allow (measured: 84%; without slices the model said 99%, 23% high).
    pl, load = chain("a", "b", "c"), Workload(concurrency=8)
    prof = profile({"a": (0.0, 4.0, 4.0), "b": (2.0, 6.0, 0.0), "c": (1.0, 3.0, 0.0)},
                   cores=2, native_call_ms=0.07, handoff=HandoffCost(0.03, 10.0, 0.015))
    split = placement(pl, "--isolate-stage b --isolate-stage c")
    busy = dict(predict(split, prof, load).utilization)["cores"]
    assert busy < 0.9
    # run to the end
    monkeypatch.setattr("planner.tune.simulated_run.os_slice_ms", lambda cores: 1e9)
    assert dict(predict(split, prof, load).utilization)["cores"] > 0.97
    # Linux's default base slice, scaled with the CPUs up to 8.
    monkeypatch.undo()
    assert [os_slice_ms(n) for n in (1, 2, 4, 8, 64)] == [0.75, 1.5, 2.25, 3.0, 3.0]


@pytest.mark.parametrize("load", [Workload(concurrency=1, requests=40),
                                  Workload(concurrency=3, requests=40)])
def test_shortcuts_predict_what_stepping_every_event_does(load):
    # Torch-like stages: native calls shorter than a wake-up, so threads of one process convoy
    # at the lock (taken in turns without events), beside pure Python and a streaming handoff;
    # one client is put together from one simulation per request size.
    from planner.tune.simulated_run import SimulatedRun

    pl = chain("a", "b", "c", stream_to={"b": "c"})
    prof = replace(profile({"a": (0.5, 2.0, 0.0), "b": (1.0, 20.0, 0.5), "c": (0.3, 6.0, 0.0)},
                           native_call_ms=0.02, handoff=HandoffCost(0.05, 5.0, 0.03)),
                   request_scale=(0.8, 1.0, 1.3))
    prof = replace(prof, stages=tuple(replace(s, chunks_out=6.0 if s.name == "b" else 1.0)
                                      for s in prof.stages))
    for plan in (planner.declared_plan(pl), placement(pl, "--isolate-stage c")):
        fast = SimulatedRun(plan, prof, load, 2).run()
        slow = SimulatedRun(plan, prof, load, 2, shortcuts=False).run()
        assert fast.throughput_rps == pytest.approx(slow.throughput_rps, rel=1e-9)
        assert fast.latency_p50_ms == pytest.approx(slow.latency_p50_ms, rel=1e-9)
        assert fast.latency_p99_ms == pytest.approx(slow.latency_p99_ms, rel=1e-9)
        assert fast.ttfa_p90_ms == pytest.approx(slow.ttfa_p90_ms, rel=1e-9)
        assert dict(fast.utilization) == pytest.approx(dict(slow.utilization), abs=1e-4)


def test_a_thread_keeps_its_core_from_its_python_to_its_native_work():
    # One core, a time slice of 0.75 ms; thread a runs 1 ms of Python then 1 ms of native work in
    # one call, thread b of another process 10 ms of Python beside it. The OS takes the core from
    # a only at the end of a slice: 0.75 a, 0.75 b, then a's last 0.25 of Python and, on the same
    # core, 0.5 of native work (its slice's rest), 0.75 b, a's last 0.5: a is done at 3.5 ms. (Had
    # a given up its core between the two, it would queue behind b: done at 4.25 ms.)
    from planner.tune.simulator import NativeWork, PythonWork, Resource, Simulator

    sim = Simulator(Resource("cores", 1), os_slice_ms(1), switch_ms=5.0)
    done = {}

    def thread(name, lock, python, native):
        yield ("cpu", PythonWork(lock, python, NativeWork(lock, native, 1e9) if native else None))
        done[name] = sim.now

    sim.step(thread("a", Resource("lock a", 1), 1.0, 1.0))
    sim.step(thread("b", Resource("lock b", 1), 10.0, 0.0))
    sim.run()
    assert os_slice_ms(1) == 0.75
    assert done["a"] == pytest.approx(3.5)
    assert done["b"] == pytest.approx(12.0)


def streaming_pair(first_chunk_share):
    """A stage of 40 ms of native work handing 8 chunks per request on to a 20 ms vocoder, in one
    process, with the share of its work done before its first chunk given."""
    cfg = {"name": "s", "stages": [
        {"name": "gen", "process": "p", "next": "voc", "stream_to": ["voc"]},
        {"name": "voc", "process": "p", "terminal": True}],
        "process_safe_edges": [["gen", "voc"]]}
    prof = Profile(model="s", variant="default", cores=2, cpu_model="t", stages=(
        StageProfile("gen", 0.0, 40.0, 0.0, chunks_out=8, native_call_ms=40.0,
                     first_chunk_share=first_chunk_share),
        StageProfile("voc", 0.0, 20.0, 0.0, native_call_ms=2.5)))
    return planner.declared_plan(planner.load(config=cfg)), prof


def test_a_stage_that_computes_before_its_first_chunk_delays_the_next_stage_by_all_of_it():
    one = Workload(concurrency=1)
    plan, even = streaming_pair(None)
    bursty = predict(plan, streaming_pair(1.0)[1], one)
    spread = predict(plan, even, one)
    # All its work, then the vocoder's, one after the other; spread evenly, the vocoder starts
    # after two chunks' work (a chunk goes once the next is out) and the rest overlaps on the
    # second core, but for the last two chunks, handed on together at the end.
    assert bursty.latency_p50_ms == pytest.approx(40 + 20, rel=0.05)
    assert spread.latency_p50_ms == pytest.approx(40 + 2 * 20 / 8, rel=0.05)
    assert bursty.ttfa_p90_ms == pytest.approx(40 + 20 / 8, rel=0.05)
    # Measured as its even share, it is the even case exactly.
    assert predict(plan, streaming_pair(1 / 8)[1], one) == spread
    # Whatever the burst, the work per request is the same (the cores' busy time per request)...
    load = Workload(concurrency=8, requests=200)
    loaded = {name: predict(plan, prof, load) for name, prof in (
        ("bursty", streaming_pair(1.0)[1]), ("even", even))}

    def cpu_ms(p):
        return dict(p.utilization)["cores"] * 2 / p.throughput_rps * 1000

    assert cpu_ms(loaded["bursty"]) == pytest.approx(cpu_ms(loaded["even"]), rel=0.05)
    # ... but not the throughput, in the launcher's order (planner.fair_queue): new requests'
    # first items go first, so a burst-first stage, fed eight, opens every stream before it hands
    # on their later chunks, and it and the vocoder take turns being idle (gen's thread 71% busy
    # where spread evenly it is the bound, 100%). A prediction of the launcher's policy, not yet
    # served head to head.
    assert loaded["bursty"].throughput_rps < 0.9 * loaded["even"].throughput_rps


def test_work_fractions_keep_the_whole_and_the_chunks_handed_on():
    from planner.tune.simulated_run import _pieces, _work_fractions

    pieces = _pieces(20)  # the first chunk alone, the other 19 in 7 groups
    assert _work_fractions(pieces, None) == pieces
    burst = _work_fractions(pieces, 0.9)
    assert burst[0] == 0.9 and sum(burst) == pytest.approx(1.0)
    assert [b / 0.1 for b in burst[1:]] == pytest.approx([p / sum(pieces[1:]) for p in pieces[1:]])
    assert _work_fractions(pieces, 1 / 20) == pytest.approx(pieces)


def relay(mid_streams: bool):
    """8 ms of native work streamed in 8 chunks to a 16 ms stage that runs once per chunk, whose
    outputs go on to a 16 ms stage over a plain edge (`next` only) or a streaming one; each stage
    in a process of its own, on 4 cores."""
    cfg = {"name": "r", "stages": [
        {"name": "gen", "process": "a", "next": "mid", "stream_to": ["mid"]},
        {"name": "mid", "process": "b", "next": "voc",
         **({"stream_to": ["voc"]} if mid_streams else {})},
        {"name": "voc", "process": "c", "terminal": True}],
        "process_safe_edges": [["gen", "mid"], ["mid", "voc"]]}
    prof = Profile(model="r", variant="default", cores=4, cpu_model="t", stages=(
        StageProfile("gen", 0.0, 8.0, 0.0, chunks_out=8, native_call_ms=1.0),
        StageProfile("mid", 0.0, 16.0, 0.0, chunks_out=8, native_call_ms=2.0),
        StageProfile("voc", 0.0, 16.0, 0.0, chunks_out=8, native_call_ms=2.0)),
        handoff=HandoffCost(0.001, 50.0, 0.001))
    return planner.declared_plan(planner.load(config=cfg)), prof


def test_a_plain_edge_hands_on_a_chunked_output_only_once_it_is_complete():
    one = Workload(concurrency=1)
    held = predict(*relay(mid_streams=False), one)
    streamed = predict(*relay(mid_streams=True), one)
    # The launcher holds a plain edge's chunks until the request's last one: the last stage
    # starts when the middle one is done with all eight (the first reaches it after two of the
    # generator's, 2 ms; then 16 ms) and then runs its 16 ms.
    assert held.latency_p50_ms == pytest.approx(2 + 16 + 16, rel=0.05)
    # Streamed on, it works on each chunk as it comes and ends a chunk after the middle stage.
    assert streamed.latency_p50_ms == pytest.approx(2 + 16 + 2, rel=0.05)


def test_cpus_at_half_speed_take_twice_as_long_for_cpu_work_and_no_longer_for_device_time():
    # What a shared host does to a pipeline whose profile was taken at full speed: its CPU
    # costs, measured on CPU clocks, stretch; its device time (a GPU, a sleep) does not.
    cpu_bound = chain("a", "b")
    prof = profile({"a": (2.0, 6.0, 0.0), "b": (1.0, 3.0, 0.0)}, native_call_ms=0.5,
                   frontend_ms=1.0)
    slow = prof.at_cpu_speed(0.5)
    assert slow.stage("a").gil_ms == 4.0 and slow.stage("a").native_ms == 12.0
    assert slow.stage("a").native_call_ms == 1.0 and slow.frontend_ms == 2.0
    assert slow.handoff.fixed_ms == 2 * prof.handoff.fixed_ms
    assert prof.at_cpu_speed(1.0) is prof
    one = Workload(concurrency=1)
    full = predict(planner.declared_plan(cpu_bound), prof, one)
    half = predict(planner.declared_plan(cpu_bound), slow, one)
    assert half.latency_p50_ms == pytest.approx(2 * full.latency_p50_ms, rel=0.02)
    device = chain("g")
    asleep = profile({"g": (0.0, 0.0, 20.0)}, handoff=HandoffCost(0.0, 5.0, 0.05))
    assert predict(planner.declared_plan(device), asleep.at_cpu_speed(0.5), one).latency_p50_ms \
        == pytest.approx(predict(planner.declared_plan(device), asleep, one).latency_p50_ms)
    with pytest.raises(ValueError, match="share of full speed"):
        prof.at_cpu_speed(0.0)
