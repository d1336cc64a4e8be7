"""The machine's stolen CPU time, read from /proc/stat: what a profile adds to its wait for a
core, since no per-thread clock sees it."""

from __future__ import annotations

from planner.app.profiling.cpu_steal import steal_ticks, stolen_share


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
