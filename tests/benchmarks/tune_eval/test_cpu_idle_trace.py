"""benchmarks/tune_eval/cpu_idle_trace.py: the scheduler-trace reading, on hand-written traces."""

import pytest

from benchmarks.tune_eval import cpu_idle_trace

A, B, P, M = 3100, 3105, 3106, 3095  # s0's thread, two of pipeline's, a client thread
PROCESSES = {A: "s0", B: "pipeline", P: "pipeline", M: "main"}


def switch(cpu: int, at: str, prev: int, state: str, nxt: int) -> str:
    """A sched_switch line as tracefs writes it (the TASK-PID column is the thread leaving)."""
    def comm(tid: int) -> str:
        return f"swapper/{cpu}" if tid == 0 else "python"
    task = "<idle>" if prev == 0 else "python"
    return (f"{task:>16}-{prev:<7} [{cpu:03}] d..2. {at:>12}: sched_switch: "
            f"prev_comm={comm(prev)} prev_pid={prev} prev_prio=120 prev_state={state} ==> "
            f"next_comm={comm(nxt)} next_pid={nxt} next_prio=120")


def wakeup(cpu: int, at: str, current: int, tid: int, target: int) -> str:
    task = "<idle>" if current == 0 else "python"
    return (f"{task:>16}-{current:<7} [{cpu:03}] d..3. {at:>12}: sched_wakeup: "
            f"comm=python pid={tid} prio=120 target_cpu={target:03}")


# CPU 0 runs P and CPU 1 runs A. P hands the interpreter lock to B, which is woken onto CPU 1 and
# preempts A there; P sleeps and CPU 0 idles 3 ms while A waits in CPU 1's queue, then takes A.
# CPU 1 idles 0.21 ms with nobody waiting (A runs on CPU 0 by then) until an interrupt wakes M.
SCENARIO = [
    wakeup(0, "459.000000", P, B, 1),
    switch(1, "459.000020", A, "R", B),
    switch(0, "459.000500", P, "S", 0),
    switch(0, "459.003500", 0, "R", A),
    switch(1, "459.004000", B, "S", 0),
    wakeup(1, "459.004200", 0, M, 1),
    switch(1, "459.004210", 0, "R", M),
    switch(0, "459.005000", A, "S", 0),
]


def test_the_line_format_is_tracefs_s():
    # the exact shape of a line of a real recording
    assert switch(1, "459.077680", 3095, "S", 3104) == (
        "          python-3095    [001] d..2.   459.077680: sched_switch: prev_comm=python "
        "prev_pid=3095 prev_prio=120 prev_state=S ==> next_comm=python next_pid=3104 "
        "next_prio=120")


def test_an_idle_cpu_beside_a_preempted_thread_is_counted_to_the_microsecond():
    f = cpu_idle_trace.idle_figures("\n".join(SCENARIO), PROCESSES, cpus=2, requests=4)
    assert f.span_s == pytest.approx(0.005, abs=1e-12)
    # CPU 0 idled 3 ms with A in CPU 1's queue; CPU 1 idled 0.21 ms with nobody waiting
    assert f.idle_waiting_elsewhere[0] * f.span_s == pytest.approx(0.003, abs=1e-12)
    assert f.idle_waiting_elsewhere[1] == 0
    assert f.idle[1] * f.span_s == pytest.approx(0.00021, abs=1e-12)
    # M's wakeup onto idle CPU 1 took 10 us to run it: the only idle beside its own queue
    assert f.idle_waiting_own[0] == 0
    assert f.idle_waiting_own[1] * f.span_s == pytest.approx(0.00001, abs=1e-12)
    assert f.cpus_idle_waiting_elsewhere == pytest.approx(0.6)
    # A left CPU 1 at 20 us: cache hot (not to be moved) for 0.5 ms, the first 20 us of CPU 0's
    # idle; the other 2.98 ms a balance pass would have moved it
    assert f.idle_waiting_elsewhere_hot[0] * f.span_s == pytest.approx(0.00002, abs=1e-12)
    assert f.idle_waiting_elsewhere_hot[1] == 0
    # both stretches began and ended in the window; CPU 0's last one ends with it: not counted
    assert f.gaps == 2 and f.long_gaps == 1 and f.gaps_long_share == 0.5
    assert f.gap_median_ms == pytest.approx((3 + 0.21) / 2)
    assert f.gap_p90_ms == pytest.approx(3)
    assert f.long_gap_waiters == (("s0", 1),)
    assert f.preemptions == (("s0", "pipeline", 1),)
    assert f.per_request(f.preemptions[0][2]) == 0.25
    assert f.pulls == 1 and f.lost_events == 0
    # B woken onto busy CPU 1 while CPU 0 ran P; M onto idle CPU 1: neither beside an idle CPU
    assert f.wakes_beside_idle == 0


def test_idle_beside_a_thread_that_left_a_cpu_within_half_a_ms_is_hot_and_wakes_beside_idle():
    # A, preempted on CPU 1 at 20 us, is taken by CPU 0 at 400 us: hot all that idle. Then B,
    # asleep since 1.0 ms, is woken onto busy CPU 0 at 1.2 ms while CPU 1 idles until 2.0 ms:
    # hot until 1.5 ms, cold after. M was never seen leaving a CPU: cold throughout.
    trace = [
        wakeup(0, "7.000000", P, B, 1),
        switch(1, "7.000020", A, "R", B),
        switch(0, "7.000030", P, "S", 0),
        switch(0, "7.000400", 0, "R", A),
        switch(1, "7.001000", B, "S", 0),
        wakeup(0, "7.001200", A, B, 0),
        switch(1, "7.002000", 0, "R", B),
        switch(0, "7.002500", A, "S", 0),
    ]
    f = cpu_idle_trace.idle_figures("\n".join(trace), PROCESSES, cpus=2, requests=1)
    assert f.idle_waiting_elsewhere[0] * f.span_s == pytest.approx(0.00037, abs=1e-12)
    assert f.idle_waiting_elsewhere_hot[0] == f.idle_waiting_elsewhere[0]
    assert f.idle_waiting_elsewhere[1] * f.span_s == pytest.approx(0.0008, abs=1e-12)
    assert f.idle_waiting_elsewhere_hot[1] * f.span_s == pytest.approx(0.0003, abs=1e-12)
    # B's second wake went to busy CPU 0 while CPU 1 idled; its first found both busy
    assert f.wakes_beside_idle == 1
    unseen = [switch(0, "5.000000", P, "S", 0), switch(1, "5.001000", A, "S", M),
              switch(0, "5.002000", 0, "R", P)]
    g = cpu_idle_trace.idle_figures("\n".join(unseen), PROCESSES, cpus=2, requests=1)
    assert g.idle_waiting_elsewhere[0] > 0 and g.idle_waiting_elsewhere_hot[0] == 0


def test_headers_other_events_and_lost_events_are_passed_over():
    header = [
        "# tracer: nop",
        "#",
        "# entries-in-buffer/entries-written: 8/8   #P:2",
        "#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION",
        "#              | |         |   |||||     |         |",
    ]
    noise = [
        ("          python-3106    [000] d..2.   459.000100: sched_migrate_task: comm=python "
         "pid=3105 prio=120 orig_cpu=0 dest_cpu=1"),
        "CPU:1 [LOST 3 EVENTS]",
        "",
        "not a trace line at all",
        ("          python-3106    [000] d..2.   459.000200: sched_switch: prev_comm=python "
         "garbled"),
    ]
    trace = "\n".join(header + SCENARIO[:2] + noise + SCENARIO[2:])
    f = cpu_idle_trace.idle_figures(trace, PROCESSES, cpus=2, requests=4)
    plain = cpu_idle_trace.idle_figures("\n".join(SCENARIO), PROCESSES, cpus=2, requests=4)
    assert f.lost_events == 3
    assert f == cpu_idle_trace.IdleFigures(**{**vars(plain), "lost_events": 3})


def test_any_number_of_cpus_and_what_each_thread_may_run_on():
    # CPUs 2 and 3 have no events: idle throughout, beside B's and M's wakeups (20 and 10 us in
    # CPU 1's queue) and A's wait from its preemption to CPU 0 taking it (3.48 ms)
    f = cpu_idle_trace.idle_figures("\n".join(SCENARIO), PROCESSES, cpus=4, requests=4)
    assert len(f.idle) == 4 and f.idle[2:] == (1.0, 1.0)
    assert f.idle_waiting_elsewhere[2] * f.span_s == pytest.approx(0.00351, abs=1e-12)
    # pinned to CPUs 0 and 1, no thread's wait was work CPUs 2 and 3 sat out
    pinned = cpu_idle_trace.idle_figures("\n".join(SCENARIO), PROCESSES, cpus=4, requests=4,
                                         affinity={t: {0, 1} for t in PROCESSES})
    assert pinned.idle_waiting_elsewhere[2:] == (0, 0)
    assert pinned.idle_waiting_elsewhere[0] == f.idle_waiting_elsewhere[0]


def test_a_thread_waiting_from_before_the_window_counts_as_waiting_elsewhere():
    # M's first appearance is being switched in: it was runnable, in a queue not named
    trace = [switch(0, "10.000000", P, "S", 0), switch(1, "10.001000", A, "S", M),
             switch(0, "10.002000", 0, "R", P)]
    f = cpu_idle_trace.idle_figures("\n".join(trace), PROCESSES, cpus=2, requests=1)
    assert f.idle_waiting_elsewhere[0] * f.span_s == pytest.approx(0.001, abs=1e-12)
    assert f.idle[0] == 1.0 and f.gaps == 1 and f.long_gap_waiters == (("main", 1),)


def test_an_empty_trace_gives_zeros_not_an_error():
    f = cpu_idle_trace.idle_figures("# tracer: nop\n", {}, cpus=2, requests=0)
    assert f.span_s == 0 and f.idle == (0.0, 0.0) and f.gaps == 0
    assert f.to_json()["gap_median_ms"] is None


@pytest.mark.parametrize("value, process, cpus", [
    ("pipeline=0", "pipeline", {0}),
    ("s0=0-1", "s0", {0, 1}),
    ("main=0,2", "main", {0, 2}),
    (" main = 1-3,0 ", "main", {0, 1, 2, 3}),
])
def test_pin_values(value, process, cpus):
    assert cpu_idle_trace.parse_pin(value, 4) == (process, frozenset(cpus))


@pytest.mark.parametrize("value, says", [
    ("pipeline", "not PROCESS=CPUS"),
    ("=0", "not PROCESS=CPUS"),
    ("pipeline=", "not PROCESS=CPUS"),
    ("pipeline=a", "not PROCESS=CPUS"),
    ("pipeline=0;1", "not PROCESS=CPUS"),
    ("pipeline=-1", "not PROCESS=CPUS"),
    ("pipeline=1-0", "is not PROCESS=CPUS"),
    ("pipeline=4", "no CPU 4"),
])
def test_bad_pin_values_name_the_value_and_the_fix(value, says):
    with pytest.raises(ValueError) as e:
        cpu_idle_trace.parse_pin(value, 4)
    assert repr(value) in str(e.value) and says in str(e.value)
    assert "e.g. pipeline=0" in str(e.value) and "CPUs 0-3" in str(e.value)


def test_a_bad_pin_exits_2_with_one_line(capsys):
    assert cpu_idle_trace.main(["--pipeline", "lock-bound", "--pin", "pipeline=0-"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'pipeline=0-'" in err


def test_without_tracefs_it_says_it_needs_root_and_what_to_run_instead(monkeypatch, capsys,
                                                                        tmp_path):
    monkeypatch.setattr(cpu_idle_trace, "TRACEFS", tmp_path / "not-mounted")
    assert cpu_idle_trace.main(["--pipeline", "lock-bound"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "root" in err and "cores_busy.py" in err
