"""Bounded inputs: sizes and numbers a config, a cluster file, a profile or a load flag may hold.
Each out-of-range value is one paragraph naming it and exit 2, before any long work starts (the
audit saw hangs past 300 s, 6.4 GB of memory and OverflowError tracebacks)."""

from __future__ import annotations

import json

import pytest
import yaml

import planner
from planner.app.cli import main
from planner.tune.profile import Profile, StageProfile

QWEN3 = {
    "name": "qwen3-bounds",
    "stages": [
        {"name": "preprocessing", "process": "pipeline", "next": "tts_engine"},
        {"name": "tts_engine", "process": "pipeline", "gpu": 0, "next": "vocoder"},
        {"name": "vocoder", "process": "pipeline", "gpu": 0, "terminal": True},
    ],
}


def run(capsys, *argv: str) -> tuple[int, str]:
    try:
        code = main(list(argv))
    except SystemExit as exit_:  # argparse's own usage errors
        code = exit_.code
    said = capsys.readouterr()
    err = said.err + said.out  # `solve` renders its result, errors too, on stdout
    assert "Traceback" not in err
    return code, " ".join(err.split())  # rich wraps long lines


def config(tmp_path, change) -> str:
    data = json.loads(json.dumps(QWEN3))
    change(data)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def huge_fraction(data):
    data["process_edge_resources"] = [{"edge": ["tts_engine", "vocoder"],
                                       "fractions": {"tts_engine": 10 ** 400, "vocoder": 0.1}}]


@pytest.mark.parametrize("change, named", [
    (lambda d: d["stages"][1].update(tp_size=100_000, gpu=0), "tp_size: got 100000"),
    (lambda d: d["stages"][1].update(tp_size=4, gpu=None), "lists no GPUs"),
    (lambda d: d["stages"][1].update(gpu=10 ** 6), "GPU id 1000000 is above 1023"),
    (huge_fraction, "(401 characters) is outside (0, 1]"),
    (lambda d: d.update(placement={"max_total_gpu_memory_fraction_per_gpu": float("nan")}),
     "fraction nan is outside (0, 1]"),
])
def test_a_config_out_of_bounds_is_one_paragraph_and_exit_2(tmp_path, capsys, change, named):
    code, err = run(capsys, "solve", "--config", config(tmp_path, change))
    assert code == 2 and named in err


def test_planner_solve_reports_a_400_digit_fraction_instead_of_raising():
    data = json.loads(json.dumps(QWEN3))
    huge_fraction(data)
    result = planner.solve(config=data)
    assert result.status == "error" and "is outside (0, 1]" in result.diagnostics[0].message


def test_a_solver_out_of_time_is_a_diagnostic_naming_the_limit(monkeypatch):
    import planner.solver

    monkeypatch.setattr(planner.solver, "SOLVER_TIME_LIMIT_S", 0.0)
    result = planner.solve("qwen3-tts")
    assert result.status == "error"
    assert "CP-SAT found no answer within its limit of 0 s" in result.diagnostics[0].message


@pytest.mark.parametrize("nodes, named", [
    ([{"name": "a", "gpus": 10 ** 6}], "nodes[0].gpus: got 1000000; a whole number from 0 to 64"),
    ([{"name": "a", "gpus": 256}], "from 0 to 64"),
    ([{"name": "a", "gpus": 1, "cpus": 10 ** 9}], "nodes[0].cpus"),
    ([{"name": f"n{i}", "gpus": 1} for i in range(300)], "lists 300 nodes; at most 256"),
    ([{"name": f"n{i}", "gpus": 64} for i in range(40)], "2560 GPUs in all; at most 2048"),
])
def test_a_cluster_file_out_of_bounds_is_one_paragraph_and_exit_2(tmp_path, capsys, nodes,
                                                                   named):
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump({"nodes": nodes}))
    code, err = run(capsys, "solve", "qwen3-tts", "--cluster", str(path), "--replicas", "max")
    assert code == 2 and named in err


@pytest.mark.parametrize("command", ["bench", "tune"])
@pytest.mark.parametrize("flags, named", [
    (["--rate", "inf"], "argument --rate: 'inf' is not a finite positive number"),
    (["--rate", "1e-300"], "1e-300 is out of range: give a number from 0.01 to 10000"),
    (["--rate", "nan"], "'nan' is not a finite positive number"),
    (["--concurrency", "99999"], "99999 is out of range: give a number at most 4096"),
    (["--slo-p99-ms", "nan"], "argument --slo-p99-ms: 'nan' is not a finite positive number"),
    (["--requests", "1e9"], "'1e9' is not a finite positive whole number"),
])
def test_load_flags_out_of_bounds_are_one_paragraph_and_exit_2(capsys, command, flags, named):
    # bench and tune read these flags from one declaration each, checked by its argparse type
    code, err = run(capsys, command, "-m", "qwen3-tts", *flags)
    assert code == 2 and err.startswith("error:") and named in err


@pytest.mark.parametrize("flags, named", [
    (["--duration", "nan"], "argument --duration: 'nan' is not a finite positive number"),
    (["--duration", "1e308"], "1e308 is out of range: give a number at most 86400"),
])
def test_bench_duration_out_of_bounds_is_one_paragraph_and_exit_2(capsys, flags, named):
    code, err = run(capsys, "bench", "-m", "qwen3-tts", *flags)
    assert code == 2 and named in err


def good_profile() -> dict:
    return Profile(model="qwen3-tts", variant="default", cores=2, cpu_model="test", stages=(
        StageProfile("preprocessing", 0.5, 0.0, 0.0),
        StageProfile("tts_engine", 120.0, 20.0, 0.0, chunks_out=25),
        StageProfile("vocoder", 30.0, 10.0, 0.0, chunks_out=25))).to_dict()


def nan_cost(p):
    p["stages"][1]["gil_ms"] = float("nan")


def text_cost(p):
    p["stages"][2]["native_ms"] = "fast"


def huge_costs(p):
    for s in p["stages"]:
        s["gil_ms"] = 1e308


def no_copy(p):
    p["handoff"]["copy_gbps"] = 0


@pytest.mark.parametrize("change, named", [
    (lambda p: [p], "it holds a list, not a profile"),
    (nan_cost, "stages[1].gil_ms is nan"),
    (text_cost, "stages[2].native_ms is a string, not a number"),
    (huge_costs, "stages[0].gil_ms is 1e+308; it must be a finite number from 0 up to 1e+09"),
    (no_copy, "handoff.copy_gbps is 0; it must be a finite number above 0"),
    (lambda p: p.update(cores=0), "cores is 0"),
])
def test_a_profile_out_of_bounds_is_one_paragraph_and_exit_2(tmp_path, capsys, change, named):
    data = good_profile()
    data = change(data) or data
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(data))  # NaN goes out as the NaN token Python's json reads back
    code, err = run(capsys, "tune", "qwen3-tts", "--profile", str(path), "--output",
                    str(tmp_path / "out"))
    assert code == 2 and named in err and "not a profile this planner can read" in err


@pytest.mark.parametrize("value, named", [("0", "0 is outside 1..1000000"),
                                          ("nan", "'nan' is not a whole number")])
def test_serve_max_queued_is_a_whole_number_in_range(capsys, value, named):
    code, err = run(capsys, "serve", "qwen3-tts", "--max-queued", value)
    assert code == 2 and named in err


def test_a_ray_cluster_has_the_limits_of_a_cluster_file():
    from planner.cluster import Node, _within_limits
    from planner.errors import ConfigError

    _within_limits([Node("a", 8, 64)], "ray")
    with pytest.raises(ConfigError, match="ray: a: 100 GPUs; at most 64 a node"):
        _within_limits([Node("a", 100, 8)], "ray")
