"""benchmarks/request_costs.py's pure parts: reading each thread's CPU from the kernel, and the
report that pairs a checkout with its baseline batch by batch. The benchmark itself serves a real
voice for minutes, so it is not run here."""

import os
import threading

from benchmarks import request_costs


def test_each_threads_cpu_is_read_in_nanoseconds_and_grows_with_work():
    worked, release, tid = threading.Event(), threading.Event(), []

    def work():
        tid.append(threading.get_native_id())
        sum(range(3_000_000))
        worked.set()
        release.wait(30)  # alive while it is read: an ended thread leaves /proc

    worker = threading.Thread(target=work)
    before = request_costs.thread_cpu([os.getpid()])
    worker.start()
    try:
        assert worked.wait(30)
        after = request_costs.thread_cpu([os.getpid()])
    finally:
        release.set()
        worker.join(30)
    grown = request_costs.delta(before, after)
    assert grown[os.getpid(), tid[0]] > 1_000_000  # its sum took a millisecond at least
    assert request_costs.thread_cpu([2 ** 22 + 7]) == {}  # no such process: nothing, no error


def _serve(root, front, stages):
    batches = [{"front door": front + d, "worker, other threads": 0.2, "stage threads": stages}
               for d in (-0.01, 0.0, 0.01)]
    return {"root": root, "requests": 30, "wall_s": 1.5, "client_cpu_per_request_s": 0.0005,
            "batches": batches, "threads": [
                {"process": "front door", "thread": "MainThread", "cpu_per_request_s": 0.0012,
                 "idle_cpu_per_s": 0.0028},
                {"process": "worker pipeline", "thread": "acoustic", "cpu_per_request_s": 0.024,
                 "idle_cpu_per_s": 0.0}]}


def test_the_report_pairs_this_checkout_with_its_baseline_and_with_the_library():
    mine, before = _serve("/here", 1.75, 37.0), _serve("/before", 2.25, 37.0)
    text = "\n".join(request_costs.report({"library: G2P": 0.0009}, [mine, before],
                                          [36.0, 36.0, 36.0], {"acoustic": 0.025}))
    assert "library: G2P" in text and "0.900 ms" in text
    assert "front door             MainThread" in text and "1.200" in text and "2.800" in text
    assert "served tree 38.950 ms/request" in text
    assert "served tree from /here / the library's own call" in text and "x1.082" in text
    assert "this checkout / /before" in text
    assert "front door               1.750 against   2.250 ms: x0.778" in text
    assert "acoustic 25.00 ms" in text
