"""benchmarks/peer_hibari.py's pure parts (its arguments, its held-out texts, how rounds and the
library's shared closed loop deal requests, the ratios and bars it reports) and, slow, its
`--quick` mode end to end on a small plan and load."""

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from benchmarks import peer_hibari
from benchmarks.peer_hibari_library import INDEX, STOP, closed_loop, count_taker, pipe_taker
from benchmarks.peer_hibari_report import peers_at, report, verdict
from benchmarks.round_ratios import summarise
from planner.app.bench.texts import request_texts

from tests.models import needs

ROOT = Path(__file__).resolve().parents[2]


def test_defaults_put_the_declared_plan_and_tunes_picks_beside_the_library_at_c1_and_c4():
    args = peer_hibari.parse_args([])
    assert [name for name, _ in args.ours] == ["declared", "c1", "c4"]
    assert args.ours[0] == ("declared", [])
    assert args.concurrency == [1, 4] and args.library_threads == [1, 2]
    assert args.rounds >= 4 and args.requests >= args.rounds
    quick = peer_hibari.parse_args(["--quick", "--rounds", "3"])
    assert (quick.rounds, quick.requests) == (3, 8)


@pytest.mark.parametrize("argv, culprit", [
    (["--ours", "no-equals-sign"], "NAME=FLAGS"),
    (["--ours", "a=", "--ours", "a=--isolate-stage vocoder"], "must differ"),
    (["--ours", "threads-t1="], "library's rows"),
    (["--library-threads", "0"], "at least 1"),
    (["--rounds", "5", "--requests", "4"], "fewer than --rounds"),
])
def test_bad_arguments_exit_2_naming_the_culprit(argv, culprit, capsys):
    with pytest.raises(SystemExit) as exited:
        peer_hibari.parse_args(argv)
    assert exited.value.code == 2
    assert culprit in capsys.readouterr().err


def test_its_texts_are_held_out_from_the_suite_and_from_benchs_generator():
    assert len(set(peer_hibari.TEXTS)) == len(peer_hibari.TEXTS) == 16
    generated = set(request_texts(0, 500, 100))
    here = Path(__file__).name
    suite = "".join(p.read_text(errors="replace") for p in (ROOT / "tests").rglob("*.py")
                    if p.name != here)
    for text in peer_hibari.TEXTS:
        assert text not in generated and text[:40] not in suite, text


def test_rounds_split_the_requests_and_rotate_who_goes_first():
    assert peer_hibari.per_round(10, 4) == [3, 3, 2, 2]
    assert sum(peer_hibari.per_round(384, 8)) == 384
    systems = ["a", "b", "c"]
    assert [peer_hibari.rotated(systems, r)[0] for r in range(4)] == ["a", "b", "c", "a"]
    args = peer_hibari.parse_args(["--ours", "x=", "--library-threads", "1"])
    assert peer_hibari.systems_at(args, 1) == ["x", "loop-t1"]
    assert peer_hibari.systems_at(args, 4) == ["x", "server-t1", "threads-t1", "processes-t1"]


def _fake_tts(text):
    import numpy as np

    return np.zeros(len(text) * 10, np.float32)


def _fake_write(out, audio):
    out.write(b"RIFF" + bytes(2 * audio.size))


def test_processes_sharing_the_take_pipe_take_each_request_once():
    """Readers of one pipe of 4-byte indices (as the library's processes read it) take every
    request exactly once and each stops at its own stop mark."""
    r, w = os.pipe()
    try:
        readers = 3
        os.write(w, b"".join(INDEX.pack(i) for i in [*range(50), *[STOP] * readers]))
        taken: list[list[float]] = []

        def reader():
            taken.append(closed_loop(_fake_tts, _fake_write, ["ab", "cde"], 1, pipe_taker(r))
                         ["latencies_s"])

        threads = [threading.Thread(target=reader) for _ in range(readers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert sum(len(x) for x in taken) == 50 and len(taken) == readers
    finally:
        os.close(r)
        os.close(w)
    done = closed_loop(_fake_tts, _fake_write, ["ab"], 4, count_taker(9))
    assert len(done["latencies_s"]) == 9 and done["end"] >= done["start"]


def _run(system, label, round_, rps, requests=8, cpu=0.04):
    return {"system": system, "label": label, "round": round_, "requests": requests,
            "errors": 0, "wall_s": requests / rps, "latencies_s": [1 / rps] * requests,
            "cpu_s": cpu * requests, "client_cpu_s": None}


def synthetic():
    runs = []
    for r, (ours4, threads4, procs4, ours1, loop1) in enumerate(
            [(40, 30, 44, 24, 26), (42, 31, 45, 25, 27)]):
        runs += [_run("c4", "C=4", r, ours4), _run("threads-t1", "C=4", r, threads4),
                 _run("server-t1", "C=4", r, threads4), _run("server-t2", "C=4", r, 20),
                 _run("processes-t1", "C=4", r, procs4), _run("c4", "C=1", r, ours1),
                 _run("loop-t1", "C=1", r, loop1), _run("threads-t2", "C=4", r, 20),
                 _run("processes-t2", "C=4", r, 30), _run("loop-t2", "C=1", r, 30)]
    return {"ours": {"c4": ["--process-copies", "pipeline=2"]}, "library": {"threads": [1, 2]},
            "settings": {"concurrency": [1, 4]}, "runs": runs}


def test_the_report_pairs_rounds_and_judges_each_bar_on_its_interval():
    text = "\n".join(report(synthetic()))
    # merged: 16 requests over 8/40 + 8/42 s; p90 interpolated between the two rounds' latencies
    assert "| c4 | 40.98 | 24.4 | 25.0 | 40.0 | - | 0 |" in text
    assert "| c4 | threads-t1 | x1.344 (1.344, " in text
    assert "1.333 1.355" in text  # each round's ratio
    # the x1.0 bar is judged against the server a user writes; in-process threads are tabled
    assert "C=4 c4 / server-t1 >= x1: x1.344 (1.344, 1.28-1.41): met" in text
    assert "c4 / threads-t1 >=" not in text
    assert "C=4 c4 / processes-t1 >= x0.9: x0.921 (0.921, 0.85-1.00): undecided" in text
    assert "| c4 | threads-t2 | x2.050 (2.049, 1.76-2.39) | 2.000 2.100 |" in text  # tabled too
    # a bar is judged against the library's strongest thread count at its load
    assert "C=1 c4 / loop-t2 >= x0.8: x0.817 (0.816, 0.72-0.93): undecided" in text
    assert "c4 / threads-t2 >=" not in text and "c4 / processes-t2 >=" not in text
    assert peers_at(4, [1, 2]) == ("server-t1", "server-t2", "threads-t1", "threads-t2",
                                   "processes-t1", "processes-t2")
    assert verdict(summarise([0.5, 0.51], [1.0, 1.0]), 0.9) == "missed"
    assert verdict(summarise([0.8, 1.0], [1.0, 1.0]), 0.9).startswith("undecided")
    assert verdict(summarise([1.0], [1.0]), 0.9) == "met (one round: no interval)"
    assert verdict(None, 0.9) == "not measured"


@pytest.mark.slow
@needs.hibari
def test_quick_mode_runs_ours_and_the_library_end_to_end(tmp_path):
    raw = tmp_path / "raw.json"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.peer_hibari", "--quick", "--ours", "declared=",
         "--library-threads", "1", "--concurrency", "1", "--concurrency", "2", "--requests",
         "4", "--json", str(raw)], cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert "machine: " in out and "command: " in out and "cores, load average" in out
    for row in ("| declared |", "| loop-t1 |", "| server-t1 |", "| threads-t1 |",
                "| processes-t1 |"):
        assert row in out, out
    assert "C=4" not in out and "C=2 declared / processes-t1" not in out  # bars are C=1, C=4
    assert "C=1 declared / loop-t1 >= x0.8: x" in out
    import json

    runs = json.loads(raw.read_text())["runs"]
    assert {r["system"] for r in runs} == {"declared", "loop-t1", "server-t1", "threads-t1",
                                           "processes-t1"}
    assert all(len(r["latencies_s"]) == r["requests"] - r["errors"] for r in runs)
