"""A pinned process's stages take turns on its CPUs (`core_turns`): while one stage computes on
the only CPU, another waits for its turn instead of cutting in; a later stage of the pipeline
goes first; the wait counts as the stage's wait for a core; and a process with nothing to share
(unpinned, or CPUs enough, or a GPU stage) takes no turns.

In-process, threads and events; the waits are bounded, never timed."""

from __future__ import annotations

import threading

import pytest

from launcher.off_cpu import off_cpu
from launcher.worker.core_turns import CoreTurns, core_turns
from launcher.worker.join import Envelope
from launcher.worker.stages import StageRunner
from launcher.wire.specs import CLIENT, StageSpec, Successor, WorkerSpec

from tests.launcher.worker.runner_fakes import STOP, RecordingChannel, StoppableQueue
from tests.waiting import wait_until

BOUND_S = 30.0


def _stage(name: str, threads: int = 1, device: str = "cpu", nxt: str | None = None) -> StageSpec:
    succ = (Successor(nxt, True, "p"),) if nxt else ()
    return StageSpec(name, "toy", (), (), (CLIENT,), succ, device, threads=threads)


def _spec(*stages: StageSpec, cpus: tuple[int, ...] = (0,)) -> WorkerSpec:
    return WorkerSpec("p", stages, None, None, "sptest", cpus=cpus)


PIPELINE = (_stage("frontend"), _stage("acoustic"), _stage("vocoder"))


@pytest.mark.parametrize(("stages", "cpus", "taking_turns"), [
    (PIPELINE, (0,), {"frontend", "acoustic", "vocoder"}),  # a copy of pipeline=2 on 0-1
    (PIPELINE, (), set()),  # unpinned: the OS shares the machine's CPUs
    (PIPELINE, (0, 1, 2), set()),  # a CPU for every stage thread: nothing to share
    ((_stage("a"), _stage("b", device="cuda:0"), _stage("c")), (0,), {"a", "c"}),
    ((_stage("a"), _stage("b", device="cuda:0")), (0,), set()),  # one CPU stage alone
    ((_stage("a", threads=2), _stage("b")), (0, 1), {"a", "b"}),  # 3 threads on 2 CPUs
])
def test_which_stages_take_turns(stages, cpus, taking_turns):
    assert core_turns(_spec(*stages, cpus=cpus)).stages == taking_turns


class Step(threading.Thread):
    """One step of `stage` in its turn: tells when it is inside, and stays until `leave`."""

    def __init__(self, turns: CoreTurns, stage: str, order: list[str] | None = None) -> None:
        super().__init__(daemon=True)
        self.turns, self.stage, self.order = turns, stage, order
        self.inside, self.leave = threading.Event(), threading.Event()
        self.waited = None

    def run(self) -> None:
        with self.turns.turn(self.stage):
            if self.order is not None:
                self.order.append(self.stage)
            self.inside.set()
            assert self.leave.wait(BOUND_S)
        self.waited = self.turns.waited()

    def done(self) -> None:
        self.leave.set()
        self.join(BOUND_S)
        assert not self.is_alive()


def _turns(cpus: int = 1, **widths: int) -> CoreTurns:
    widths = widths or {"frontend": 1, "acoustic": 1, "vocoder": 1}
    return CoreTurns(cpus, widths, {name: i for i, name in enumerate(widths)})


def test_a_stage_waits_for_the_cpu_while_another_computes_and_counts_the_wait():
    turns = _turns()
    first, second = Step(turns, "acoustic"), Step(turns, "vocoder")
    first.start()
    assert first.inside.wait(BOUND_S)
    second.start()
    wait_until(lambda: turns.waiting == 1, BOUND_S, "the vocoder to wait for its turn")
    assert not second.inside.is_set()
    first.done()
    assert second.inside.wait(BOUND_S)
    second.done()
    assert second.waited > 0 and first.waited == 0
    assert turns.waiting == 0


def test_when_a_turn_ends_the_later_stage_goes_first():
    turns, order = _turns(), []
    holder = Step(turns, "frontend", order)
    holder.start()
    assert holder.inside.wait(BOUND_S)
    early, late = Step(turns, "frontend", order), Step(turns, "vocoder", order)
    early.start()  # queued first ...
    wait_until(lambda: turns.waiting == 1, BOUND_S, "the frontend's second step to wait")
    late.start()  # ... but the vocoder carries a request further
    wait_until(lambda: turns.waiting == 2, BOUND_S, "the vocoder to wait")
    holder.done()
    assert late.inside.wait(BOUND_S)
    assert not early.inside.is_set()
    late.done()
    assert early.inside.wait(BOUND_S)
    early.done()
    assert order == ["frontend", "vocoder", "frontend"]


def test_a_stage_of_two_threads_takes_both_cpus_and_two_single_ones_share_them():
    turns = _turns(2, wide=2, a=1, b=1)
    a, b = Step(turns, "a"), Step(turns, "b")
    a.start(), b.start()
    assert a.inside.wait(BOUND_S) and b.inside.wait(BOUND_S)  # two CPUs: both at once
    wide = Step(turns, "wide")
    wide.start()
    wait_until(lambda: turns.waiting == 1, BOUND_S, "the two-thread stage to wait")
    a.done()
    assert turns.waiting == 1 and not wide.inside.is_set()  # one CPU free is not enough
    b.done()
    assert wide.inside.wait(BOUND_S)
    wide.done()


def test_a_stage_that_takes_no_turns_never_waits():
    turns = _turns()
    holder = Step(turns, "acoustic")
    holder.start()
    assert holder.inside.wait(BOUND_S)
    with turns.turn("on-the-gpu"):  # not among the stages: enters at once
        pass
    holder.done()


def test_a_pinned_workers_stage_computes_only_in_its_turn_and_reports_the_wait():
    gen, sink = _stage("gen", nxt="sink"), _stage("sink")
    called = threading.Event()

    def stage(payload):
        called.set()
        return {"said": payload["text"]}

    r = StageRunner(_spec(gen, sink), {"gen": stage, "sink": dict}, RecordingChannel(), None,
                    None, lambda *_: None, lambda: None)
    r.inboxes["gen"].raw = StoppableQueue()
    thread = threading.Thread(target=r._loop, args=(gen,), daemon=True)
    thread.start()
    try:
        with r.turns.turn("sink"):  # the next stage computes on the process's only CPU
            r.put("gen", Envelope(1, CLIENT, None, True, {"text": "hi"}))
            wait_until(lambda: r.turns.waiting == 1, BOUND_S, "the stage to wait for its turn")
            assert not called.is_set()
        env = r.inboxes["sink"].raw.get(timeout=BOUND_S)
        assert env.data["said"] == "hi"
        wait_until(lambda: r.latencies["gen"], BOUND_S, "the call to be recorded")
        assert r.core_waits["gen"] > 0
    finally:
        r.inboxes["gen"].put(STOP)
        thread.join(BOUND_S)


def test_a_stage_that_waits_off_the_cpu_leaves_the_turns():
    turns = _turns()
    away, back, finished = threading.Event(), threading.Event(), threading.Event()

    def device_step():
        with turns.turn("acoustic"):
            with off_cpu():  # e.g. a stand-in for a device: no CPU of the process taken
                away.set()
                assert back.wait(BOUND_S)
            finished.set()  # goes on at once: it does not wait for a turn again

    step = threading.Thread(target=device_step, daemon=True)
    step.start()
    assert away.wait(BOUND_S)
    other = Step(turns, "vocoder")
    other.start()
    assert other.inside.wait(BOUND_S)  # the CPU is free while the acoustic step waits
    back.set()
    assert finished.wait(BOUND_S)  # beside the vocoder's turn, as the kernel shares them
    assert turns.stages == {"frontend", "vocoder"}  # its later steps take no turns either
    with turns.turn("acoustic"):
        pass
    other.done()
    step.join(BOUND_S)
    assert not step.is_alive() and turns.waiting == 0
    with off_cpu():  # outside any turn: nothing to leave
        pass


def test_a_synthetic_stages_device_time_leaves_the_cpu_to_the_others(monkeypatch):
    import time
    import types

    from launcher import synthetic

    on_device, done = threading.Event(), threading.Event()

    def device(seconds):  # the stand-in's device wait, held open until the test is done
        on_device.set()
        assert done.wait(BOUND_S)

    monkeypatch.setattr(synthetic, "time", types.SimpleNamespace(
        sleep=device, thread_time=time.thread_time, perf_counter=time.perf_counter))
    turns, sleeper = _turns(device=1, other=1), synthetic.stage(device_ms=5.0)

    def step():
        with turns.turn("device"):
            sleeper({})

    stepping = threading.Thread(target=step, daemon=True)
    stepping.start()
    assert on_device.wait(BOUND_S)
    other = Step(turns, "other")
    other.start()
    assert other.inside.wait(BOUND_S)  # computes while the device stage waits
    other.done()
    done.set()
    stepping.join(BOUND_S)
    assert not stepping.is_alive()
