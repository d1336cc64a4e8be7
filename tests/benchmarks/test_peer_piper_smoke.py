"""benchmarks/peer_piper.py and url_vs_served.py's pure parts: their arguments, the one
`planner bench` run each asks for, and the arithmetic of their ratios over interleaved rounds on a
synthetic results.json. The benchmarks themselves need piper-tts in a venv of its own (or a served
plan) and minutes of CPU, so they are not run here."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import peer_piper, process_tree, url_vs_served
from benchmarks.peer_piper_report import PIPER, machine_limit, report
from benchmarks.round_ratios import summarise

ROOT = Path(__file__).resolve().parents[2]


def test_defaults_compare_the_declared_placement_at_c1_and_c4(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    args = peer_piper.parse_args([])
    assert args.ours == [("declared", [])]
    assert args.concurrency == [1, 4]
    assert args.rounds >= 4  # the bar
    assert args.peer_venv == tmp_path / "stage-planner" / "peer-piper"


def test_quick_shortens_the_run_but_explicit_counts_win():
    quick = peer_piper.parse_args(["--quick"])
    assert (quick.rounds, quick.requests) == (2, 8)
    assert peer_piper.parse_args(["--quick", "--rounds", "3"]).rounds == 3


def test_one_bench_run_serves_ours_and_loads_pipers_server_beside_them():
    args = peer_piper.parse_args(["--ours", "declared=", "--ours",
                                  "tuned=--stage-threads vocoder=2 --isolate-stage 'vocoder'",
                                  "--concurrency", "4", "--concurrency", "1", "--concurrency",
                                  "4", "--peer-venv", "/x/venv"])
    argv = peer_piper.bench_argv(args, "http://127.0.0.1:5000")
    assert argv[1:5] == ["-m", "planner", "bench", "piper-joe"]
    assert argv[5:10] == ["--without-declared", "--placement", "declared=", "--placement",
                          "tuned=--stage-threads vocoder=2 --isolate-stage vocoder"]
    words = " ".join(argv)
    assert "--url piper=piper+http://127.0.0.1:5000" in words
    assert "--concurrency 1 --concurrency 4" in words and "--stream" in words
    assert "--stream" not in peer_piper.bench_argv(peer_piper.parse_args(["--whole"]), "x")


@pytest.mark.parametrize("argv, culprit", [
    (["--ours", "no-equals-sign"], "NAME=FLAGS"),
    (["--ours", "=--isolate-stage vocoder"], "NAME=FLAGS"),
    (["--ours", "a=", "--ours", "a=--isolate-stage vocoder"], "must differ"),
    (["--ours", "piper="], "taken"),
    (["--ours", "a=--flag 'unclosed"], "quotes"),
    (["--concurrency", "0"], "at least 1"),
    (["--rounds", "two"], "at least 1"),
    (["--rounds", "5", "--requests", "4"], "fewer than --rounds"),
])
def test_bad_arguments_exit_2_naming_the_culprit(argv, culprit, capsys):
    with pytest.raises(SystemExit) as exited:
        peer_piper.parse_args(argv)
    assert exited.value.code == 2
    assert culprit in capsys.readouterr().err


def test_summary_pairs_rounds_and_leaves_out_a_missing_one():
    s = summarise([2.0, 3.0, 0.0, 4.0], [1.0, 2.0, 1.0, 2.0])
    assert s.ratios == (2.0, 1.5, None, 2.0)
    assert s.median == 2.0
    assert s.geomean == pytest.approx((2.0 * 1.5 * 2.0) ** (1 / 3))
    low, high = s.interval
    assert low < s.geomean < high and not s.holds(1.0)
    assert summarise([1.0], [2.0]).interval is None and summarise([1.0], [2.0]).holds() is None
    assert summarise([0.0], [2.0]) is None
    assert summarise([3.0, 3.0], [1.5, 1.5]).interval == pytest.approx((2.0, 2.0))
    assert summarise([1.1, 0.9, 1.0], [1.0, 1.0, 1.0]).holds(1.0)


def _run(name, label, rounds, p50, ttfa=None, requests=4):
    total = sum(rounds) / len(rounds)
    return {"placement": name, "label": label, "round_throughput_rps": rounds,
            "load": {"requests": requests, "ok": requests, "errors": 0, "throughput_rps": total,
                     "audio_seconds_per_s": 3.0 * total,
                     "latency_s": {"p50": p50, "p90": p50 * 1.5},
                     "ttfa_s": None if ttfa is None else {"p50": ttfa, "p90": ttfa}}}


def synthetic(stream=True):
    runs = [_run("declared", "C=4", [3.0, 3.3], 1.2, 0.2), _run(PIPER, "C=4", [2.0, 2.2], 2.0, 2.0),
            _run("declared", "C=1", [1.5, 1.5], 0.6, 0.1), _run(PIPER, "C=1", [1.0, 1.0], 1.0, 1.0)]
    return {"settings": {"stream": stream, "warmup": 4, "rounds": 2},
            "machine": {"cpu_count": 2},
            "placements": [{"name": "declared"}, {"name": PIPER}], "runs": runs}


def test_the_report_is_ours_over_piper_round_by_round():
    peer = {"graph_cpu_per_request_s": [0.5, 0.5],
            "piper_tree": {"cpu_per_request_s": 0.7, "requests": 25, "memory": {
                "after start-up": {"pss_mib": 100.0, "threads": 4},
                "after the run": {"pss_mib": 150.0, "threads": 4}}}}
    text = "\n".join(report(synthetic(), peer))
    assert "4.00 req/s" in text  # the machine's limit: 2 cores / 0.5 s per request
    assert "700 ms CPU per request over its 25 requests" in text
    assert "| declared | 3.15 | 1200 | 1800 | 200 | 3.00 | 0 |" in text
    # C=4: req/s 1.5 both rounds, p50 0.6, first audio 0.2 / piper's 2.0, 3.15 / 4.00 the limit
    assert "| declared | x1.500 (1.500, 1.50-1.50) | x0.600 | x0.100 | x0.787 |" in text
    assert "| declared | x1.500 (1.500, 1.50-1.50) | x0.600 | x0.100 | - |" in text  # C=1
    assert "| declared | 1.500 1.500 |" in text
    assert "first audio" not in "\n".join(report(synthetic(stream=False), peer)).split(
        "ours / piper, requests/s paired")[1].splitlines()[1]
    assert machine_limit(2, []) is None


def test_pipers_requests_count_its_warm_ups_and_benchs_check():
    assert peer_piper.piper_requests(synthetic()) == (4 + 4) + 4 * 2 * 2 + 1


def test_url_vs_served_asks_for_the_same_plan_twice_and_says_whether_they_agree():
    args = url_vs_served.parse_args(["qwen3-tts", "--flags", "--isolate-stage vocoder",
                                     "--quick"])
    assert args.serve_flags == ["--isolate-stage", "vocoder"]
    argv = url_vs_served.bench_argv(args, "http://127.0.0.1:8000")
    assert argv[argv.index("--placement") + 1] == "bench=--isolate-stage vocoder"
    assert argv[argv.index("--url") + 1] == "url=http://127.0.0.1:8000,format=pcm"
    results = {"runs": [_run("bench", "C=1", [1.0, 1.2], 0.5, 0.1),
                        _run("url", "C=1", [1.1, 1.1], 0.5, 0.1),
                        _run("bench", "C=4", [2.0, 2.0], 1.0), _run("url", "C=4", [3.0, 3.1], 1.0)]}
    lines = url_vs_served.verdicts(results)
    assert lines[0].startswith("C=1: url / bench req/s x1.008") and "agree" in lines[0]
    assert "first audio p50 x1.000" in lines[0]
    assert "differ by more than the rounds' noise" in lines[1]


def test_process_tree_includes_a_child():
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE)
    try:
        assert child.pid in process_tree.tree(os.getpid())
        assert process_tree.tree_cpu_s(os.getpid()) > 0
        memory = process_tree.tree_memory(os.getpid())
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
