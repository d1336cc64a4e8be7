"""profile.json: what older planners wrote still reads (a field added since takes its default),
and the profiler's arithmetic for the size of a native call."""

import json

import pytest

from planner.tune.profile import DEFAULT_NATIVE_CALL_MS, Profile, StageProfile


def profiler():
    """The measuring half (`planner.app.profiling`), which runs stages with torch: with only the
    core installed, the tests of it skip."""
    pytest.importorskip("torch", reason="planner.app.profiling needs the serve extra (torch)")
    import planner.app.profiling.lock_sampling
    import planner.app.profiling.thread_scaling

    return planner.app.profiling


def test_a_profile_without_native_call_sizes_reads_with_the_defaults(tmp_path):
    prof = Profile(model="m", variant="default", cores=2, cpu_model="t",
                   stages=(StageProfile("a", 1.0, 2.0, 0.0, native_call_ms=0.25),))
    data = prof.to_dict()
    assert Profile.from_dict(json.loads(json.dumps(data))) == prof
    # As the previous planner wrote it: no call size per stage, no switch interval.
    del data["switch_interval_ms"]
    del data["stages"][0]["native_call_ms"]
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(data))
    old = Profile.load(path)
    assert old.switch_interval_ms == 5.0
    assert old.stage("a").native_call_ms is None
    assert old.stage("a").call_ms == DEFAULT_NATIVE_CALL_MS
    assert prof.stage("a").call_ms == 0.25


@pytest.mark.parametrize(("alone", "contended", "gil", "native", "expected"), [
    # 10 ms alone, 2 ms of it holding the lock: 2 ms of the slowdown is sharing that with the
    # spinner, the other 10 ms are 20 waits of 0.5 ms, so 8 ms of native work in 20 calls.
    (10.0, 22.0, 2.0, 8.0, 8.0 / 20),
    (10.0, 12.1, 2.0, 8.0, 8.0),  # no wait to speak of: one call, the whole native part
    (10.0, 30.0, 10.0, 0.0, None),  # no native work: no call size
])
def test_the_call_size_is_native_time_over_the_waits_beside_a_busy_thread(
        alone, contended, gil, native, expected):
    Spinner = profiler().lock_sampling.Spinner
    assert Spinner.INTERVAL == 0.0005  # the rows are worked out for a 0.5 ms interval
    got = Spinner.call_ms(alone, contended, gil, native)
    assert got == (pytest.approx(expected) if expected is not None else None)


def test_the_share_before_the_first_chunk_is_saved_and_read_and_older_profiles_lack_it(tmp_path):
    prof = Profile(model="m", variant="default", cores=2, cpu_model="t",
                   stages=(StageProfile("a", 1.0, 2.0, 0.0, chunks_out=8.0,
                                        first_chunk_share=0.93),))
    path = tmp_path / "profile.json"
    prof.save(path)
    assert Profile.load(path) == prof
    data = prof.to_dict()
    del data["stages"][0]["first_chunk_share"]  # as the previous planner wrote it
    path.write_text(json.dumps(data))
    assert Profile.load(path).stage("a").first_chunk_share is None
    data["stages"][0]["first_chunk_share"] = 1.5
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=r"stages\[0\]\.first_chunk_share is 1\.5; it is a "
                                         r"fraction"):
        Profile.load(path)


def test_native_time_by_threads_is_saved_and_read_and_older_profiles_lack_it(tmp_path):
    stage = StageProfile("a", 1.0, 8.0, 0.0, native_ms_by_threads={"1": 8.0, "2": 5.0})
    prof = Profile(model="m", variant="default", cores=4, cpu_model="t", stages=(stage,))
    path = tmp_path / "profile.json"
    prof.save(path)
    assert Profile.load(path) == prof
    data = json.loads(path.read_text())
    del data["stages"][0]["native_ms_by_threads"]  # as planners before it wrote it
    path.write_text(json.dumps(data))
    old = Profile.load(path).stage("a")
    assert old.native_ms_by_threads is None and old.native_speedup(2) == 1.0


def test_a_thread_count_not_measured_gains_what_the_one_below_it_did():
    stage = StageProfile("a", 1.0, 8.0, 0.0, native_ms_by_threads={"1": 8.0, "2": 5.0})
    assert stage.native_speedup(1) == 1.0
    assert stage.native_speedup(2) == pytest.approx(5.0 / 8.0)
    assert stage.native_speedup(4) == pytest.approx(5.0 / 8.0)
    assert stage.measured_threads == (2,)
    # a measured gain past an even split is noise: no stage beats dividing its work evenly
    fast = StageProfile("a", 1.0, 8.0, 0.0, native_ms_by_threads={"1": 8.0, "2": 1.0})
    assert fast.native_speedup(2) == 0.5


@pytest.mark.parametrize("by_threads", [{"two": 1.0}, {"0": 1.0}, {"2": -1.0}, [1.0, 2.0]])
def test_a_malformed_native_time_by_threads_is_named(tmp_path, by_threads):
    data = Profile(model="m", variant="default", cores=2, cpu_model="t",
                   stages=(StageProfile("a", 1.0, 2.0, 0.0),)).to_dict()
    data["stages"][0]["native_ms_by_threads"] = by_threads
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=r"stages\[0\]\.native_ms_by_threads"):
        Profile.load(path)


def test_the_profiler_takes_what_the_wall_time_gained_off_the_native_part():
    thread_scaling = profiler().thread_scaling
    native_by_threads, thread_counts = thread_scaling.native_by_threads, thread_scaling.thread_counts

    # 10 ms per request, 8 of them native: 2 threads took 6 ms (4 off the native part), 3 took
    # 6.5 (slower than 2: kept at 2's), 4 took 1 (past an even split of the native part: 2 ms)
    got = native_by_threads(10.0, 8.0, {1: 10.0, 2: 6.0, 3: 6.5, 4: 1.0})
    assert got == {"1": 8.0, "2": 4.0, "3": 4.0, "4": 2.0}
    assert thread_counts(1) == () and thread_counts(2) == (2,) and thread_counts(64) == (2, 3, 4)
