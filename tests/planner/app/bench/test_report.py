"""Tables, results.md, results.json and charts of finished benches built by hand."""

from __future__ import annotations

import io
import json
import re
import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from planner.app.bench import charts as C
from planner.app.bench import report as R
from planner.app.bench.load_results import Slo
from planner.app.bench.load_shapes import Open
from planner.app.bench.machine import environment
from tests.planner.app.bench import synthetic as S

PNG = b"\x89PNG\r\n\x1a\n"


def _unescaped_pipes(line: str) -> int:
    return len(re.findall(r"(?<!\\)\|", line))


# -- results.md ----------------------------------------------------------------------------------
def test_markdown_escapes_names_so_rows_keep_their_columns():
    bench = S.sweep((S.DECLARED, S.LONG))
    table = R.markdown_table(bench).splitlines()
    assert all(_unescaped_pipes(line) == _unescaped_pipes(table[0]) for line in table)
    assert r"preprocessing+reference\_encoder+tts\_engine \| vocoder" in table[-1]
    md = R.markdown(bench, ["overview.png"])
    assert "Test CPU (2 CPUs" in md and "torch 2.0, OR-Tools 9.15" in md
    profile = md.split("## Stage profile")[1].split("## Charts")[0].strip().splitlines()
    assert all(_unescaped_pipes(line) == 7 for line in profile)


def test_md_escape():
    assert R.md_escape("a|b_c*d`e<f>") == r"a\|b\_c\*d\`e\<f\>"


# -- console table -------------------------------------------------------------------------------
@pytest.mark.parametrize("width", [80, 120, 200])
def test_console_table_fits_the_width_and_never_cuts_a_number(width):
    bench = S.sweep((S.DECLARED, S.LONG), slo=Slo(ttfa_s=0.1, latency_s=0.5))
    out = io.StringIO()
    R.render_table(Console(file=out, width=width, color_system=None), bench)
    text = out.getvalue()
    tables = text.split("\nwinner ")[0]
    assert "…" not in tables
    assert all(len(line) <= width for line in tables.splitlines())
    headers, rows = R._grid(bench, screen=True)
    for _, cells in rows:
        for (cell, _best), header in zip(cells, headers):
            if header != "placement":
                assert re.search(rf"(?<![\w.]){re.escape(cell)}(?![\w.])", tables), (header, cell)
    # Every block starts with the placement and load, so each row is readable on its own.
    assert tables.count("planner bench: qwen3-tts") == len(R.console_tables(
        Console(file=io.StringIO(), width=width), bench))


def test_a_wide_console_gets_one_table():
    bench = S.closed()
    assert len(R.console_tables(Console(file=io.StringIO(), width=400), bench)) == 1


def test_columns_follow_the_load():
    closed = [c.header for c in R.columns(S.closed(stream=False))]
    assert "TTFA p50" not in closed and "late" not in closed and "goodput req/s" not in closed
    assert {"RTF p50", "RTF p90", "p50", "p90", "p99", "failed"} <= set(closed)
    sweep = [c.header for c in R.columns(S.sweep(slo=Slo(latency_s=0.5)))]
    assert {"TTFA p50", "TTFA p90", "TTFA p99", "streams stalled %", "late", "send lag p99",
            "offered req/s", "goodput req/s"} <= set(sweep)


def test_the_screen_keeps_what_a_comparison_is_read_by_and_results_md_every_figure():
    for bench in (S.closed(stream=False), S.closed(), S.sweep(slo=Slo(latency_s=0.5))):
        screen = [c.header for c in R.columns(bench, screen=True)]
        every = [c.header for c in R.columns(bench)]
        assert set(screen) < set(every)
        assert {"req/s", "× declared req/s", "p99", "failed", "bound req/s"} <= set(screen)
        assert not {"ideal", "ach/ ideal", "err"} & set(every)  # named for what they are
        md = R.markdown_table(bench).splitlines()[0]
        assert all(R.md_escape(h) in md for h in every)
    # one table at 100 columns for a closed loop, streamed or not
    for bench in (S.closed(stream=False, levels=(1, 4)), S.closed(levels=(1, 4))):
        assert len(R.console_tables(Console(file=io.StringIO(), width=100), bench)) == 1


def test_a_bound_measured_past_is_marked_and_said_to_be_wrong_there():
    bench = S.closed((S.DECLARED, S.SPLIT), ideal=3.0)  # both measured 4 req/s
    out = io.StringIO()
    R.render_table(Console(file=out, width=200, color_system=None), bench)
    text = out.getvalue()
    assert "3.00*" in text
    assert "* measured above its stage bound: `declared` at C=1 (4.00 > 3.00)" in text
    assert "so the bound was wrong there" in text
    below = S.closed((S.DECLARED, S.SPLIT), ideal=9.0)
    out = io.StringIO()
    R.render_table(Console(file=out, width=200, color_system=None), below)
    assert "9.00*" not in out.getvalue() and "above its stage bound" not in out.getvalue()


# -- results.json --------------------------------------------------------------------------------
def test_results_json_names_the_machine_versions_and_command():
    env = environment(["bench", "--model-path", "qwen3-tts", "--rate", "2"])
    assert env["command"] == "planner bench --model-path qwen3-tts --rate 2"
    machine, versions = env["machine"], env["versions"]
    assert machine["cpu"] and machine["cpu_count"] >= 1 and machine["usable_cpus"] >= 1
    assert versions["torch"] and versions["ortools"] and versions["python"]
    data = S.sweep(slo=Slo(ttfa_s=0.1)).to_dict()
    run = data["runs"][0]
    assert data["schema"] == "stage-planner-bench/2" and run["label"] == "2/s"
    load = run["load"]
    assert load["mode"] == "open-loop" and load["rate"] == 2.0 and load["concurrency"] is None
    assert {"ttfa_s", "rtf", "latency_s", "goodput_rps", "slo_attainment", "errors_by_kind",
            "stream_continuity", "schedule", "audio_seconds_per_s"} <= set(load)
    assert set(load["schedule"]) == {"lag_s", "late", "late_after_s", "not_sent",
                                     "sender_realtime"}
    json.dumps(data)  # serialisable as it is


# -- charts --------------------------------------------------------------------------------------
@pytest.mark.parametrize(("value", "text"), [
    (2180.0, "2,180"), (312.4, "312"), (41.53, "41.5"), (6.354, "6.35"), (1.0, "1"),
    (0.5, "0.5"), (0.01234, "0.0123"), (0.000123, "0.000123"), (0.0, "0"), (-2500.0, "-2,500"),
])
def test_plain_numbers(value, text):
    assert C.plain(value) == text


@given(st.floats(min_value=1e-7, max_value=1e12))
def test_plain_never_uses_scientific_notation(value):
    assert "e" not in C.plain(value).lower()


# The chart that shows each column of the table.
CHART_OF = {
    "offered req/s": "throughput.png", "procs": "overview.png", "req/s": "throughput.png",
    "goodput req/s": "throughput.png", "audio s/s": "audio_rate.png",
    "TTFA p50": "ttfa.png", "TTFA p90": "ttfa.png", "TTFA p99": "ttfa.png",
    "p50": "latency.png", "p90": "latency.png", "p99": "latency.png",
    "RTF p50": "rtf.png", "RTF p90": "rtf.png", "streams stalled %": "stalls.png",
    "failed": "errors.png", "late": "errors.png", "send lag p99": "schedule_lag.png",
    "start s": "startup.png", "RSS MiB": "memory.png", "bound req/s": "throughput.png",
    "of bound": "throughput.png", "× declared req/s": "vs_declared.png",
    "× declared p99": "vs_declared.png",
}


def _strict_charts(bench, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a matplotlib warning fails the test
        return C.write_charts(bench, tmp_path)


@pytest.mark.parametrize("make", [
    lambda: S.sweep((S.DECLARED, S.LONG), slo=Slo(ttfa_s=0.1, latency_s=0.5)),
    lambda: S.closed((S.DECLARED, S.SPLIT, S.LONG)),
    lambda: S.closed(levels=(1, 4), stream=False),
])
def test_a_chart_per_metric_the_table_shows(make, tmp_path):
    bench = make()
    names = _strict_charts(bench, tmp_path)
    assert names[0] == C.OVERVIEW_PNG and C.CDF_PNG in names
    for col in R.columns(bench)[R.KEYS:]:
        assert CHART_OF[col.header] in names, col.header
    for name in names:
        assert (tmp_path / name).read_bytes()[:8] == PNG


def test_every_request_failed_draws_without_a_warning(tmp_path):
    for bench in (S.all_failed(), S.all_failed(Open(2.0), stream=False)):
        names = _strict_charts(bench, tmp_path)
        assert all((tmp_path / n).stat().st_size > 0 for n in names)


def _legend_outside(fig, ax) -> None:
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legend = ax.get_legend().get_window_extent(renderer)
    assert not legend.overlaps(ax.get_window_extent(renderer))


@pytest.mark.parametrize("name", [
    "a+b | c", "preprocessing+reference_encoder+tts_engine | vocoder", "x" * 80, "one+" * 30])
def test_wrapped_names_keep_every_character_and_the_width(name):
    wrapped = C.wrap_name(name)
    assert all(len(line) <= C.LEGEND_WRAP for line in wrapped.splitlines())
    assert "".join(wrapped.split()) == "".join(name.split())


def test_long_names_are_indexed_wrapped_and_kept_off_the_data():
    bench = S.sweep((S.DECLARED, S.SPLIT, S.LONG))
    chart = next(c for c in C.CHARTS if c.file == "latency.png")
    fig = C.figure(bench, chart)
    ax = fig.axes[0]
    _legend_outside(fig, ax)
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert texts[:3] == ["P1: declared", "P2: isolate vocoder",
                         "P3: preprocessing+\n    reference_encoder+tts_engine\n    | vocoder"]
    assert all(len(line) <= C.LEGEND_WRAP for t in texts for line in t.splitlines())
    assert all(len(line) <= 70 for line in ax.get_title().splitlines())
    assert ax.yaxis.get_major_formatter()(2180.0, 0) == "2,180"
    plt.close(fig)


def test_bar_labels_sit_above_the_ideal_bound():
    bench = S.closed((S.DECLARED, S.LONG), ideal=9.0)  # the bound is above the bars (4 req/s)
    chart = next(c for c in C.CHARTS if c.file == "throughput.png")
    fig = C.figure(bench, chart)
    ax = fig.axes[0]
    _legend_outside(fig, ax)
    labels = [a for a in ax.texts if a.get_text()]
    assert [a.get_text() for a in labels] == ["4", "4"]
    assert all(a.xy[1] >= 9.0 for a in labels)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["P1", "P2"]
    plt.close(fig)
