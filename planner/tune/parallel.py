"""Predict many placements at once on the machine's cores.

Each simulation is independent, CPU-bound pure Python, so the interpreter lock keeps threads from
helping; forked worker processes do, and they start in milliseconds because they inherit the
planner already imported (a fresh interpreter would spend half a second importing it again). A
process that already runs threads is not forked (a lock one of them holds would stay held in the
child), and neither is a batch too small to repay the workers' start: those run here.
"""

from __future__ import annotations

import gc
import multiprocessing
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager

from planner.cpus import usable_cpus
from planner.plan import Plan
from planner.tune.model import Prediction, Workload, predict
from planner.tune.profile import Profile

# Fewer simulations of several clients than this run in this process (forking costs a few
# milliseconds a worker; one client's simulation takes about as long).
MIN_PARALLEL = 4

# What the forked workers inherit: the batch being predicted (set only while one is).
_batch: tuple[Sequence[Plan], Profile, Sequence[Workload], int | None] | None = None


def _one(task: tuple[int, int]) -> Prediction:
    assert _batch is not None
    plans, profile, workloads, cores = _batch
    i, j = task
    return predict(plans[i], profile, workloads[j], cores)


def usable_cores() -> int:
    return usable_cpus()


@contextmanager
def frozen_gc() -> Iterator[None]:
    """Fork inside this: the children never collect what they inherit. Garbage waiting for the
    cycle collector here (an onnxruntime session a stage left, say) would be freed in a child
    whose native threads were not forked with it, and its destructor would wait for them for
    ever. Frozen, it stays this process's to collect."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _can_fork() -> bool:
    return ("fork" in multiprocessing.get_all_start_methods()
            and threading.active_count() == 1)


def predict_many(plans: Sequence[Plan], profile: Profile, workloads: Sequence[Workload],
                 cores: int | None = None, jobs: int | None = None
                 ) -> list[tuple[Prediction, ...]]:
    """`predict` for every plan under every workload: one tuple per plan, a prediction per
    workload in the order given. `jobs`: processes to use (default: the cores this process may
    run on); the answers do not depend on it."""
    tasks = [(i, j) for i in range(len(plans)) for j in range(len(workloads))]
    found = dict(zip(tasks, _predict(plans, profile, workloads, tasks, cores, jobs)))
    return [tuple(found[(i, j)] for j in range(len(workloads))) for i in range(len(plans))]


def predict_pairs(pairs: Sequence[tuple[Plan, Workload]], profile: Profile,
                  cores: int | None = None, jobs: int | None = None) -> list[Prediction]:
    """`predict` for each (plan, workload) given, in order: for workloads that differ from plan
    to plan (a closed loop sized to each plan), at the cost of only the pairs asked."""
    plans = [p for p, _ in pairs]
    workloads = [w for _, w in pairs]
    return _predict(plans, profile, workloads, [(i, i) for i in range(len(pairs))], cores, jobs)


def _predict(plans: Sequence[Plan], profile: Profile, workloads: Sequence[Workload],
             tasks: list[tuple[int, int]], cores: int | None, jobs: int | None
             ) -> list[Prediction]:
    """`predict` of plans[i] under workloads[j] for each task (i, j), in the tasks' order."""
    global _batch
    # One client costs a dozen requests to simulate, any other load all of them: hand those out
    # first, so that no worker is left with a long one at the end.
    order = sorted(tasks, key=lambda t: workloads[t[1]].concurrency == 1)
    heavy = sum(workloads[j].concurrency != 1 for _, j in order)
    jobs = min(jobs or usable_cores(), heavy)
    _batch = (plans, profile, workloads, cores)
    try:
        results = None
        if jobs >= 2 and heavy >= MIN_PARALLEL and _can_fork():
            try:
                with frozen_gc(), ProcessPoolExecutor(
                        jobs, mp_context=multiprocessing.get_context("fork")) as ex:
                    results = list(ex.map(_one, order))
            except (BrokenProcessPool, OSError):  # no fork here, or a worker killed: go on here
                results = None
        if results is None:
            results = [_one(t) for t in order]
    finally:
        _batch = None
    found = dict(zip(order, results))
    return [found[t] for t in tasks]
