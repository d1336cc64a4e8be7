"""Predictions spread over forked workers are the ones made in this process."""

import gc
import os
import threading

import pytest

import planner
from planner.tune import parallel
from planner.tune.model import Workload, predict
from planner.tune.parallel import predict_many
from planner.tune.profile import HandoffCost, Profile, StageProfile

from tests.planner.tune.test_model import chain


def _profile() -> Profile:
    return Profile(model="chain", variant="default", cores=2, cpu_model="test",
                   stages=(StageProfile("a", 0.5, 3.0, 0.0, native_call_ms=0.02),
                           StageProfile("b", 2.0, 0.0, 1.0),
                           StageProfile("c", 0.2, 4.0, 0.0, native_call_ms=0.05)),
                   handoff=HandoffCost(0.05, 5.0, 0.03), frontend_ms=0.5,
                   process_rss_mib=100.0, request_scale=(0.9, 1.1))


def _plans():
    return [f.plan for f in planner.feasible_placements(chain("a", "b", "c"))]


LOADS = (Workload(concurrency=4, requests=24), Workload(concurrency=1, requests=24),
         Workload(rate=150.0, requests=24))


def test_workers_predict_what_this_process_does_in_the_order_asked(monkeypatch):
    pools, real = [], parallel.ProcessPoolExecutor

    def pool(*args, **kwargs):
        pools.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(parallel, "ProcessPoolExecutor", pool)
    monkeypatch.setattr(parallel, "_can_fork", lambda: True)  # whatever else the test run runs
    plans, prof = _plans(), _profile()
    here = predict_many(plans, prof, LOADS, jobs=1)
    assert not pools
    forked = predict_many(plans, prof, LOADS, jobs=2)
    assert pools == [(2,)]
    assert forked == here
    assert here[2][1] == predict(plans[2], prof, LOADS[1])  # per plan, per load as given


def test_a_process_running_threads_is_not_forked(monkeypatch):
    def no_pool(*_a, **_k):
        raise AssertionError("forked a process that runs threads")

    monkeypatch.setattr(parallel, "ProcessPoolExecutor", no_pool)
    release = threading.Event()
    worker = threading.Thread(target=release.wait)
    worker.start()
    try:
        out = predict_many(_plans(), _profile(), LOADS[:1], jobs=2)
    finally:
        release.set()
        worker.join()
    assert len(out) == len(_plans())


@pytest.mark.parametrize("jobs", [1, 2])
def test_no_plans_no_predictions(jobs):
    assert predict_many([], _profile(), LOADS, jobs=jobs) == []


def test_a_pool_that_cannot_start_leaves_the_work_to_this_process(monkeypatch):
    def no_fork(*_a, **_k):
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(parallel, "ProcessPoolExecutor", no_fork)
    monkeypatch.setattr(parallel, "_can_fork", lambda: True)
    plans, prof = _plans(), _profile()
    assert predict_many(plans, prof, LOADS, jobs=2) == predict_many(plans, prof, LOADS, jobs=1)


class _FreedInAChild:
    """Garbage (a reference cycle) that says in which process the cycle collector freed it."""

    def __init__(self, parent: int, said: int) -> None:
        self.parent, self.said, self.me = parent, said, self

    def __del__(self) -> None:
        if os.getpid() != self.parent:
            os.write(self.said, b"x")


def test_forked_workers_never_collect_the_garbage_they_inherit(monkeypatch):
    """An object freed in a forked worker may wait for a native thread that was not forked with
    it (an onnxruntime session's destructor did: the worker hung, and tune with it)."""
    monkeypatch.setattr(parallel, "_can_fork", lambda: True)  # whatever else the test run runs
    plans, profile = _plans(), _profile()
    read, write = os.pipe()
    try:
        gc.collect()
        _FreedInAChild(os.getpid(), write)  # unreachable at once: the collector's to free
        predict_many(plans, profile, LOADS, jobs=2)
        os.set_blocking(read, False)
        try:
            freed_in_a_child = os.read(read, 64)
        except BlockingIOError:
            freed_in_a_child = b""
        assert freed_in_a_child == b""
    finally:
        gc.collect()
        os.close(read)
        os.close(write)
