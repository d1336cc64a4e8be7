"""profile.json: what older planners wrote still reads (a field added since takes its default),
and the profiler's arithmetic for the size of a native call."""

import json

import pytest

from planner.app.profiling.lock_sampling import Spinner
from planner.tune.profile import DEFAULT_NATIVE_CALL_MS, Profile, StageProfile


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
