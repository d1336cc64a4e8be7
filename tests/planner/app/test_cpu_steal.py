"""The machine's stolen CPU time, read from /proc/stat: what a profile adds to its wait for a
core, since no per-thread clock sees it."""

from __future__ import annotations

from planner.app.cpu_steal import (BurstSpeed, burst_speed, running_ticks, steal_ticks,
                                    stolen_of_running, stolen_share)


def test_stolen_share_is_the_steal_column_over_all_time(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 0 50 800 10 0 0 40 0 0\ncpu0 50 0 25 400 5 0 0 20 0 0\n")
    before = steal_ticks(stat)
    assert before == (40, 1000)
    stat.write_text("cpu  150 0 70 900 10 0 0 70 0 0\n")
    after = steal_ticks(stat)
    assert stolen_share(before, after) == 30 / 200


def test_an_unreadable_or_old_format_stat_means_nothing_stolen(tmp_path):
    assert steal_ticks(tmp_path / "missing") is None
    old = tmp_path / "stat"
    old.write_text("cpu  100 0 50 800\n")  # a kernel before the steal column
    assert steal_ticks(old) is None
    assert stolen_share(None, (1, 2)) == stolen_share((5, 10), (5, 10)) == 0.0


def test_stolen_of_running_is_the_steal_over_the_time_the_cpus_were_not_idle(tmp_path):
    stat = tmp_path / "stat"
    # user nice system idle iowait irq softirq steal
    stat.write_text("cpu  100 0 50 800 10 0 0 40 0 0\n")
    before = running_ticks(stat)
    assert before == (40, 190)
    stat.write_text("cpu  150 0 70 900 20 0 0 70 0 0\n")  # 70 ran, 30 stolen, 110 idle
    assert stolen_of_running(before, running_ticks(stat)) == 30 / 100
    assert stolen_of_running(before, before) is None  # nothing ran
    assert stolen_of_running(None, before) is None


def test_slow_bursts_are_said_with_their_speed_and_what_it_means():
    quiet = BurstSpeed(0.98, 0.93, 0.01)
    assert not quiet.slow
    busy = BurstSpeed(0.62, 0.45, 0.41)
    assert busy.slow
    note = busy.note()
    assert "62% of full speed" in note and "45%" in note and "41% of the CPUs' running time" in note
    assert "ask again when the machine is quiet" in note
    assert busy.as_dict() == {"burst_speed_median": 0.62, "burst_speed_slow_tenth": 0.45,
                              "stolen_of_running": 0.41}


def test_the_burst_probe_measures_a_speed_no_faster_than_full():
    got = burst_speed(bursts=4, work_ms=2.0, pause_ms=2.0)
    assert 0.0 < got.slow_tenth <= got.median <= 1.0
