"""benchmarks/peer_piper.py's pure parts: its arguments, its sentences and the arithmetic of its
ratios, on synthetic cells. The benchmark itself needs piper-tts in a venv of its own and minutes
of CPU, so it is not run here."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import peer_piper
from benchmarks.peer_piper_report import (
    GRAPH, PIPER, STREAM, WAV, Cell, percentile, ratio_columns, report, stolen_of_cells,
    summarise)

ROOT = Path(__file__).resolve().parents[2]


def test_defaults_compare_the_declared_placement_at_c1_and_c4(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    args = peer_piper.parse_args([])
    assert args.ours == [("declared", [])]
    assert args.concurrency == [1, 4]
    assert args.rounds >= 4  # the issue's bar
    assert args.requests % len(peer_piper.SENTENCES) == 0  # every sentence equally in each cell
    assert args.peer_venv == tmp_path / "stage-planner" / "peer-piper"


def test_quick_shortens_the_run_but_explicit_counts_win():
    assert (peer_piper.parse_args(["--quick"]).rounds,
            peer_piper.parse_args(["--quick"]).requests) == (2, 4)
    args = peer_piper.parse_args(["--quick", "--rounds", "3"])
    assert (args.rounds, args.requests) == (3, 4)


def test_ours_flags_are_split_as_a_shell_would_and_passed_through():
    args = peer_piper.parse_args(["--ours", "declared=", "--ours",
                                  "tuned=--stage-threads vocoder=2 --isolate-stage 'vocoder'",
                                  "--concurrency", "4", "--concurrency", "1", "--concurrency",
                                  "4", "--peer-venv", "/x/venv"])
    assert args.ours == [("declared", []),
                         ("tuned", ["--stage-threads", "vocoder=2", "--isolate-stage", "vocoder"])]
    assert args.concurrency == [1, 4]
    assert args.peer_venv == Path("/x/venv")


@pytest.mark.parametrize("argv, culprit", [
    (["--ours", "no-equals-sign"], "NAME=FLAGS"),
    (["--ours", "=--isolate-stage vocoder"], "NAME=FLAGS"),
    (["--ours", "a=", "--ours", "a=--isolate-stage vocoder"], "must differ"),
    (["--ours", "piper="], "taken"),
    (["--ours", "a=--flag 'unclosed"], "quotes"),
    (["--concurrency", "0"], "at least 1"),
    (["--rounds", "two"], "at least 1"),
    (["--json", "/no/such/dir/peer.json"], "no directory /no/such/dir"),
])
def test_bad_arguments_exit_2_naming_the_culprit(argv, culprit, capsys):
    with pytest.raises(SystemExit) as exited:
        peer_piper.parse_args(argv)
    assert exited.value.code == 2
    assert culprit in capsys.readouterr().err


def test_twelve_distinct_english_sentences_of_5_to_40_words():
    sentences = peer_piper.SENTENCES
    assert len(sentences) == 12 == len(set(sentences))
    for s in sentences:
        assert 5 <= len(s.split()) <= 40, s
        assert s[0].isupper() and s[-1] in ".?!", s


def test_each_round_starts_elsewhere_and_runs_every_cell():
    cells = ["a", "b", "c"]
    orders = [peer_piper.rotated(cells, r) for r in range(4)]
    assert [o[0] for o in orders] == ["a", "b", "c", "a"]
    assert all(sorted(o) == cells for o in orders)


def test_percentile_is_the_planners_one():
    from planner.stats import percentile as planners

    values = [0.4, 0.1, 0.3, 0.2, 0.5]
    assert percentile is planners
    assert percentile(values, 50) == 0.3
    assert percentile(values, 90) == pytest.approx(0.46)  # interpolated between 0.4 and 0.5
    assert percentile([7.0], 90) == 7.0


def test_summary_pairs_rounds_and_leaves_out_a_missing_one():
    s = summarise([2.0, 3.0, 0.0, 4.0], [1.0, 2.0, 1.0, 2.0])
    assert s.ratios == (2.0, 1.5, None, 2.0)
    assert s.median == 2.0
    assert s.geomean == pytest.approx((2.0 * 1.5 * 2.0) ** (1 / 3))
    low, high = s.interval
    assert low < s.geomean < high
    assert summarise([1.0], [2.0]).interval is None
    assert summarise([0.0], [2.0]) is None
    same = summarise([3.0, 3.0], [1.5, 1.5])
    assert same.interval == pytest.approx((2.0, 2.0))


def cell(system, variant, c, r, *, rps, latency, first_byte=None, cpu_per_request=0.5, n=4):
    return Cell(system, variant, c, r, wall_s=n / rps, cpu_s=cpu_per_request * n,
                latencies_s=[latency] * n, first_byte_s=[first_byte or latency] * n,
                audio_s=3.0 * n)


def synthetic(rounds=2):
    cells = []
    for r in range(rounds):
        cells += [
            cell(PIPER, WAV, 4, r, rps=2.0, latency=2.0, cpu_per_request=1.0),
            cell("ours:declared", WAV, 4, r, rps=3.0, latency=1.2, cpu_per_request=0.6),
            cell("ours:declared", STREAM, 4, r, rps=2.5, latency=1.5, first_byte=0.2,
                 cpu_per_request=0.7),
            cell(GRAPH, WAV, 1, r, rps=2.0, latency=0.5, cpu_per_request=0.5),
        ]
    return cells


def test_ratios_are_the_issues_comparisons():
    cols = ratio_columns(synthetic(), "ours:declared", 4, cores=2, rounds=2)
    assert cols["req/s wav"].median == pytest.approx(1.5)
    assert cols["p50 wav"].median == pytest.approx(0.6)
    assert cols["TTFA stream / piper p50"].median == pytest.approx(0.1)
    assert cols["req/s stream"].median == pytest.approx(1.25)
    assert cols["CPU/req wav"].median == pytest.approx(0.6)
    assert cols["CPU/req wav / graph"].median == pytest.approx(1.2)
    # the machine's limit: 2 cores / 0.5 s per request = 4 req/s
    assert cols["req/s wav / limit"].median == pytest.approx(0.75)
    assert cols["req/s stream / limit"].median == pytest.approx(0.625)


def test_the_limit_is_compared_only_where_requests_overlap():
    cells = [cell(s.system, s.variant, 1, s.round, rps=s.metric("rps"), latency=1.0)
             for s in synthetic()]
    cols = ratio_columns(cells, "ours:declared", 1, cores=2, rounds=2)
    assert cols["req/s wav"].median == pytest.approx(1.5)
    assert not any("limit" in name for name in cols)


def test_report_prints_absolute_figures_and_ratios_per_round():
    memory = {PIPER: {"after warm-up": {"pss_mib": 100.0, "rss_mib": 110.0,
                                        "peak_rss_mib": 120.0, "processes": 1, "threads": 5}},
              "ours:declared": {"after warm-up": {"pss_mib": 250.0, "rss_mib": 400.0,
                                                  "peak_rss_mib": 420.0, "processes": 4,
                                                  "threads": 20}}}
    text = "\n".join(report(synthetic(), ["ours:declared"], [4], 2, 2, memory))
    assert "machine limit (cores 2 / in-process CPU per request), median over rounds: 4.00" in text
    assert "| ours:declared wav | 3.00 | 1200 | 1200 | 1200 | 600 | 3.00 | - | 0 |" in text
    assert "| ours:declared pcm-stream | 2.50 | 1500 | 1500 | 200 | 700 | 3.00 | - | 0 |" in text
    assert text.count("| 1 | 1.500 | 0.600 | 0.100 |") == 1
    assert "| median | 1.500 |" in text and "| 90% | 1.500-1.500 |" in text
    assert "| ours:declared | after warm-up | 250 | 400 | 420 | 4 | 20 | 2.50 |" in text


def test_the_cpu_stolen_is_the_share_of_the_cells_running_time_together():
    cells = synthetic(rounds=2)
    ours = [c for c in cells if (c.system, c.variant) == ("ours:declared", WAV)]
    ours[0].cpu_ticks, ours[1].cpu_ticks = (10, 100), (50, 300)
    assert stolen_of_cells(ours) == pytest.approx(60 / 400)  # not the mean of 10% and 17%
    assert "| ours:declared wav | 3.00 | 1200 | 1200 | 1200 | 600 | 3.00 | 15% | 0 |" in "\n".join(
        report(cells, ["ours:declared"], [4], 2, 2, {}))
    ours[1].cpu_ticks = None  # a reading missing: unknown, not the other round's share
    assert stolen_of_cells(ours) is None


def test_a_cell_with_no_answer_counts_as_missing_not_zero():
    failed = Cell(PIPER, WAV, 1, 0, 1.0, 0.0, [], [], ["HTTP 500, 10 bytes"])
    assert failed.metric("rps") == 0.0
    assert summarise([failed.metric("rps")], [1.0]) is None


def test_process_tree_includes_a_child():
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE)
    try:
        assert child.pid in peer_piper.tree(os.getpid())
        assert peer_piper.tree_cpu_s(os.getpid()) > 0
        memory = peer_piper.tree_memory(os.getpid())
        assert memory["processes"] >= 2 and memory["pss_mib"] > 0
        assert memory["peak_rss_mib"] >= memory["rss_mib"] > 0
        assert memory["threads"] >= memory["processes"]
    finally:
        child.stdin.close()
        child.wait(10)


def test_piper_is_never_imported_only_run_as_a_program():
    """piper-tts is GPL-3.0: the benchmark may run it as a separate program, never import it."""
    import ast

    scripts = sorted((ROOT / "benchmarks").glob("peer_piper*.py"))
    assert len(scripts) == 3
    for script in scripts:
        for node in ast.walk(ast.parse(script.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(n == "piper" or n.startswith("piper.") for n in names), script.name
    assert "piper.http_server" in (ROOT / "benchmarks" / "peer_piper.py").read_text()
