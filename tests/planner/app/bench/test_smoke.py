"""`planner bench` end to end at smoke size: two placements of qwen3-tts, tiny stand-ins."""

from __future__ import annotations

import ctypes
import json
import math
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.image as mpimg  # noqa: E402
import pytest  # noqa: E402

from planner.app.cli import main  # noqa: E402
from tests.launcher.conftest import leftovers  # noqa: E402
from tests.waiting import wait_until

pytestmark = pytest.mark.slow
PR_SET_CHILD_SUBREAPER = 36
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _subreaper(on: bool) -> None:
    """Orphaned grandchildren are re-parented here instead of to init, so a worker that outlives
    its server still shows up as left behind."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0)


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    _subreaper(True)
    started = time.monotonic()
    try:
        code = main(["bench", "--model-path", "Qwen/Qwen3-TTS-12Hz-0.6B-Base", "--requests", "4",
                     "--concurrency", "2", "--warmup", "1", "--input-chars", "40", "--stream",
                     "--stand-in-size", "tiny", "--device", "cpu", "--seed", "7",
                     "--output", str(out)])
        wait_until(lambda: leftovers() == (set(), []), 5.0, fail=False)
        left = leftovers()
    finally:
        _subreaper(False)
    return {"code": code, "out": out, "left": left, "seconds": time.monotonic() - started,
            "data": json.loads((out / "results.json").read_text()) if code == 0 else None}


def test_exits_zero_and_leaves_nothing_running(bench):
    assert bench["code"] == 0
    procs, segments = bench["left"]
    assert not procs, f"processes left running: {sorted(procs)}"
    assert not segments, f"shared-memory segments left: {segments}"


def test_results_json_schema(bench):
    data = bench["data"]
    assert data["schema"] == "stage-planner-bench/2"
    assert {"date", "command", "machine", "versions", "settings", "baseline", "placements",
            "runs"} <= set(data)
    assert data["command"].startswith("planner bench --model-path Qwen/Qwen3-TTS-12Hz-0.6B-Base")
    assert data["machine"]["cpu"] and data["machine"]["cpu_count"] >= 1
    assert data["versions"]["torch"] and data["versions"]["ortools"]
    assert data["settings"]["load_mode"] == "closed-loop" and data["settings"]["seed"] == 7
    assert [(p["name"], p["flags"], p["process_count"]) for p in data["placements"]] == [
        ("declared", [], 1), ("isolate vocoder", ["--isolate-stage vocoder"], 2)]
    assert [(r["placement"], r["label"], r["load"]["concurrency"]) for r in data["runs"]] == [
        ("declared", "C=2", 2), ("isolate vocoder", "C=2", 2)]
    for run in data["runs"]:
        load = run["load"]
        assert (load["requests"], load["ok"], load["errors"]) == (4, 4, 0)
        assert load["mode"] == "closed-loop" and load["stream"] is True
        assert load["throughput_rps"] > 0 and load["audio_seconds_per_s"] > 0
        assert 0 < load["ttfa_s"]["p50"] <= load["latency_s"]["p50"]
        assert load["rtf"]["p50"] > 0 and load["stream_continuity"]["stalled_share"] is not None
        assert load["schedule"] is None  # closed loop has no schedule to fall behind
        assert load["latency_s"]["p50"] <= load["latency_s"]["p90"] <= load["latency_s"]["p99"]
        assert len(load["samples"]) == 4 and all(s["status"] == 200 for s in load["samples"])
        assert run["startup_s"] > 0 and run["device"] == "cpu"
        workers = [p for p in run["processes"] if p["name"] != "(supervisor)"]
        assert len(workers) == run["process_count"]
        assert all(p["peak_rss_bytes"] > 0 for p in run["processes"])
        stages = {s["stage"]: s for s in run["stage_profile"]}
        assert set(stages) == {"preprocessing", "tts_engine", "vocoder"}
        assert all(s["per_request_s"] > 0 for s in stages.values())
        busiest = max(sum(stages[s]["per_request_s"] for s in g["stages"])
                      for g in next(p for p in data["placements"]
                                    if p["name"] == run["placement"])["groups"])
        assert math.isclose(run["ideal_rps"], 1 / busiest)
        assert math.isclose(run["achieved_over_ideal"], load["throughput_rps"] / run["ideal_rps"])
    split = next(r for r in data["runs"] if r["placement"] == "isolate vocoder")
    assert {s["stage"]: s["process"] for s in split["stage_profile"]}["vocoder"] == "vocoder"


def test_ratios_are_against_the_declared_topology(bench):
    data = bench["data"]
    assert data["baseline"] == "declared"
    declared, split = data["runs"]
    assert declared["vs_baseline"]["throughput"] == 1.0 and declared["vs_baseline"]["p99"] == 1.0
    assert math.isclose(split["vs_baseline"]["throughput"],
                        split["load"]["throughput_rps"] / declared["load"]["throughput_rps"])
    assert math.isclose(split["vs_baseline"]["p99"],
                        split["load"]["latency_s"]["p99"] / declared["load"]["latency_s"]["p99"])
    assert math.isclose(split["vs_baseline"]["ttfa_p99"],
                        split["load"]["ttfa_s"]["p99"] / declared["load"]["ttfa_s"]["p99"])
    # The declared topology has the fewest processes, so it is always on the front.
    assert declared["pareto"] is True


def test_charts_are_valid_pngs(bench):
    for name in ("overview.png", "throughput.png", "latency.png", "ttfa.png", "rtf.png",
                 "latency_cdf.png"):
        path = bench["out"] / name
        assert path.read_bytes()[:8] == PNG_SIGNATURE
        height, width, _ = mpimg.imread(path).shape
        assert height > 100 and width > 100


def test_markdown_has_the_table(bench):
    md = (bench["out"] / "results.md").read_text()
    assert "| placement |" in md and "isolate vocoder" in md and "overview.png" in md
    assert bench["data"]["command"] in md
