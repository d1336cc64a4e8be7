"""`planner bench --url` end to end at smoke size: piper-joe served by bench itself, the same plan
served by `planner serve` outside bench (a --url target), and a stand-in for piper's own server
(piper's /synthesize), in one run, interleaved rounds and one table."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from planner.app.cli import main
from tests.planner.app.bench.fake_piper import FakePiper, audio_seconds
from tests.processes import interrupt

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[4]


@pytest.fixture(scope="module")
def served():
    """`planner serve piper-joe` on a free port, as a user would run it; its URL."""
    proc = subprocess.Popen([sys.executable, "-m", "planner", "serve", "piper-joe", "--port", "0"],
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen = []
    try:
        for line in proc.stdout:  # ends if the server exits
            seen.append(line)
            if m := re.search(r"ready: piper-joe on (http://127\.0\.0\.1:\d+)", line):
                # what it prints from now on is read, so that a full pipe never blocks it
                threading.Thread(target=proc.stdout.read, daemon=True).start()
                yield m.group(1)
                break
        else:
            pytest.fail("planner serve piper-joe did not get ready:\n" + "".join(seen[-20:]))
    finally:
        interrupt(proc)


def test_bench_serves_a_plan_and_measures_running_servers_in_one_table(served, tmp_path,
                                                                        capsys):
    out = tmp_path / "out"
    with FakePiper() as piper:
        code = main(["bench", "piper-joe", "--placement", "declared=", "--without-declared",
                     "--url", f"served={served},model=piper-joe,voice=joe,format=pcm",
                     "--url", f"piper=piper+{piper.url}", "--requests", "2", "--rounds", "2",
                     "--warmup", "1", "--input-chars", "40", "--stream", "--output", str(out)])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    data = json.loads((out / "results.json").read_text())
    assert [p["name"] for p in data["placements"]] == ["declared", "served", "piper"]
    runs = {r["placement"]: r for r in data["runs"]}
    for run in runs.values():
        load = run["load"]
        assert (load["requests"], load["ok"]) == (2, 2), load["error_messages"]
        assert len(run["round_throughput_rps"]) == 2  # each took its turn in both rounds
        assert load["ttfa_s"]["p50"] > 0 and load["rtf"]["p50"] > 0
    # The same plan gives the same audio whoever started it; bench knows only its own server.
    same = [[s["audio_s"] for s in runs[name]["load"]["samples"]] for name in ("declared",
                                                                               "served")]
    assert same[0] == pytest.approx(same[1]) and min(same[0]) > 0.5
    assert runs["declared"]["startup_s"] > 0 and runs["declared"]["peak_rss_total_bytes"] > 0
    assert runs["served"]["startup_s"] is None and runs["served"]["peak_rss_total_bytes"] is None
    assert runs["served"]["vs_baseline"]["throughput"] > 0  # a ratio to the plan bench served
    # piper's audio is the length its WAV headers gave, for the texts it was sent
    sent = {round(audio_seconds(b["text"]), 9) for path, b in piper.requests
            if path == "/synthesize"}
    assert len(piper.requests) == 1 + 2 + 2  # the check, a warm-up per round, two measured
    assert {round(s["audio_s"], 9) for s in runs["piper"]["load"]["samples"]} <= sent
    rows = [line.replace("★", "").split()[0] for line in printed.out.splitlines()
            if " C=1 " in line]
    assert rows[:3] == ["declared", "served", "piper"]  # one table, a row each
    assert "running outside bench" in printed.out
