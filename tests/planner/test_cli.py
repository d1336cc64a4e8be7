"""`planner` as a user runs it (in this process, and as a subprocess in the slow lane): exit codes, JSON shape, readable tables and errors."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests.cli import BOTH, run_planner

ENV = {**os.environ, "COLUMNS": "120", "NO_COLOR": "1"}
IN_PROCESS = True


@pytest.fixture(params=BOTH)
def cli_mode(request, monkeypatch):
    """`planner` in this process (fast lane) and as a subprocess (slow lane), for the tests of
    what only a real process shows: each way out (0, 1, 2, argparse's own exits) with its output
    flushed and no traceback. The rest run in this process only: the same code, without an
    interpreter's start-up each."""
    monkeypatch.setattr(sys.modules[__name__], "IN_PROCESS", request.param == "in-process")


def run(*args, cwd=None):
    return run_planner(*args, env=ENV, cwd=cwd, in_process=IN_PROCESS, timeout=60)


def test_models_lists_the_twelve_cards_and_variants():
    out = run("models", "--format", "json")
    assert out.returncode == 0
    cards = {c["name"]: c["variants"] for c in json.loads(out.stdout)}
    assert len(cards) == 12  # ten stand-in cards, piper-joe and hibari-heart
    assert cards["moss-tts-local"] == ["default", "colocated", "split"]
    assert cards["ming-omni-tts"] == ["default", "tp2"] and cards["zonos2"] == ["default", "multi-gpu"]
    table = run("models").stdout
    assert "qwen3-tts" in table and "Qwen/Qwen3-TTS-12Hz-0.6B-Base" in table


def test_show_higgs_json():
    out = run("show", "bosonai/higgs-tts-3-4b", "--format", "json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert [(g["name"], g["stages"]) for g in data["groups"]] == [
        ("tts_frontend", ["preprocessing", "audio_encoder"]), ("pipeline", ["tts_engine"]),
        ("vocoder", ["vocoder"])]
    assert data["gpus"] == [{"id": 0, "total": 0.98, "limit": 1.0,
                             "processes": ["tts_frontend", "pipeline", "vocoder"],
                             "missing_fraction": []}]
    assert all(h["safe"] for h in data["handoffs"])


def test_show_table_names_unsafe_reasons():
    out = run("show", "qwen3-tts")
    assert out.returncode == 0
    assert "unsupported: prepared requests live in _PREPROCESSING_CONTEXT" in out.stdout
    assert "0.980" in run("show", "--model-path", "higgs-tts").stdout


@pytest.mark.usefixtures("cli_mode")
def test_solve_ok_json_shape():
    out = run("solve", "--model-path", "Qwen/Qwen3-TTS-12Hz-0.6B-Base", "--isolate-stage", "vocoder",
              "--format", "json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert set(data) >= {"model", "variant", "status", "changed", "groups", "tp_processes", "stages",
                         "gpus", "warnings", "diagnostics"}
    assert data["status"] == "ok" and data["changed"] is True
    assert data["groups"][1] == {"name": "vocoder", "stages": ["vocoder"], "gpu": 0, "changed": True,
                                 "copies": 1, "cpus": None, "copy_cpus": None, "devices": None,
                                 "memory_mib": None}
    assert data["memory_mib"] is None  # the card declares no host memory for its stages
    voc = next(s for s in data["stages"] if s["name"] == "vocoder")
    assert voc["fraction"] == 0.1 and voc["fraction_source"] == "recommended"
    assert data["gpus"][0]["total"] == 0.95 and data["gpus"][0]["processes"] == ["pipeline", "vocoder"]


def test_solve_states_the_memory_a_card_declares_per_process_copy():
    out = run("solve", "piper-joe", "--variant", "all-apart", "--process-copies", "vocoder=2",
              "--format", "json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    stages = {s["name"]: s["host_memory_mib"] for s in data["stages"]}
    assert all(m is not None and m > 0 for m in stages.values())
    groups = {g["name"]: g for g in data["groups"]}
    assert groups["vocoder"]["memory_mib"] > stages["vocoder"]  # plus the process's own
    assert data["memory_mib"] == pytest.approx(
        sum(g["memory_mib"] * g["copies"] for g in groups.values()))
    text = run("solve", "piper-joe", "--variant", "all-apart", "--process-copies", "vocoder=2")
    assert f"at most {data['memory_mib']:.0f} MiB" in text.stdout
    assert "Host memory: unknown" in run("solve", "qwen3-tts").stdout


@pytest.mark.usefixtures("cli_mode")
def test_solve_infeasible_exit_1_with_because_and_hint():
    out = run("solve", "qwen3-tts", "--isolate-stage", "preprocessing")
    assert out.returncode == 1
    assert "error[unsupported-handoff] preprocessing -> tts_engine" in out.stdout
    assert "Because `--isolate-stage preprocessing`" in out.stdout
    assert "hint:" in out.stdout
    data = json.loads(run("solve", "qwen3-tts", "--isolate-stage", "preprocessing", "--format",
                          "json").stdout)
    d = data["diagnostics"][0]
    assert d["code"] == "unsupported-handoff" and d["edge"] == ["preprocessing", "tts_engine"]
    assert d["gpu"] is None and d["because"] and d["hint"]


@pytest.mark.usefixtures("cli_mode")
def test_bad_yaml_exit_2_names_file_and_line(tmp_path):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("model: qwen3-tts\nstages: [\n")
    for cmd in ("show", "solve"):
        out = run(cmd, "--config", str(cfg))
        assert out.returncode == 2
        text = out.stdout + out.stderr
        assert "bad.yaml" in text and "line" in text and "Traceback" not in text


def test_yaml_overlay_persists_isolation(tmp_path):
    cfg = tmp_path / "iso.yaml"
    cfg.write_text(textwrap.dedent("""
        model: qwen3-tts
        stages:
          - name: vocoder
            process: vocoder
            runtime: {resources: {total_gpu_memory_fraction: 0.10}}
          - name: tts_engine
            runtime: {resources: {total_gpu_memory_fraction: 0.85}}
    """))
    data = json.loads(run("solve", "--config", str(cfg), "--format", "json").stdout)
    assert data["status"] == "ok" and data["changed"] is False
    assert [g["name"] for g in data["groups"]] == ["pipeline", "vocoder"]
    assert data["declared_by"] == "config"


def test_solve_says_whether_the_card_your_config_or_flags_set_the_topology(tmp_path):
    moves = tmp_path / "iso.yaml"
    moves.write_text("model: qwen3-tts\nstages:\n"
                     "  - {name: vocoder, process: vocoder, runtime: {resources: "
                     "{total_gpu_memory_fraction: 0.1}}}\n"
                     "  - {name: tts_engine, runtime: {resources: "
                     "{total_gpu_memory_fraction: 0.85}}}\n")
    fractions_only = tmp_path / "frac.yaml"
    fractions_only.write_text("model: qwen3-tts\nstages:\n"
                              "  - {name: vocoder, runtime: {resources: "
                              "{total_gpu_memory_fraction: 0.1}}}\n")
    cases = [(["qwen3-tts"], "ok - as the card declares, no flag changed it", "card"),
             (["--config", str(moves)], "ok - as your config declares, no flag changed it",
              "config"),
             (["--config", str(fractions_only)], "ok - as the card declares", "card"),
             (["qwen3-tts", "--isolate-stage", "vocoder"],
              "ok - changed by flags from the topology the card declares", "card"),
             (["--config", str(moves), "--stage-process", "vocoder=pipeline"],
              "ok - changed by flags from the topology your config declares", "config")]
    for args, said, declared_by in cases:
        out = run("solve", *args)
        assert out.returncode == 0 and said in out.stdout.splitlines()[0], (args, out.stdout)
        assert json.loads(run("solve", *args, "--format", "json").stdout)["declared_by"] \
            == declared_by


def test_dot_clusters_by_process():
    out = run("solve", "higgs-tts", "--isolate-stage", "audio_encoder", "--format", "dot")
    assert out.returncode == 0
    assert out.stdout.startswith('digraph "higgs-tts"')
    assert out.stdout.count("subgraph cluster_") == 4


@pytest.mark.usefixtures("cli_mode")
def test_help_is_useful_on_every_command():
    for cmd in ("models", "show", "solve", "serve"):
        out = run(cmd, "--help")
        assert out.returncode == 0 and "usage: planner" in out.stdout
    assert "--isolate-stage" in run("solve", "--help").stdout


def test_solve_path_never_imports_torch_or_ray():
    code = ("import sys, planner.app.cli; planner.app.cli.main(['solve', 'qwen3-tts', '--replicas', "
            "'max', '--cluster', 'tests/planner/data/cluster.yaml', '--format', 'json']);"
            "assert 'torch' not in sys.modules, 'torch imported';"
            "assert 'ray' not in sys.modules, 'ray imported'")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV)
    assert out.returncode == 0, out.stderr


def test_solving_a_built_in_card_loads_no_yaml_parser_and_no_package_metadata():
    # Both were a tenth of `planner solve`'s own cold start; a built-in card is read from its
    # JSON mirror and the version only for --version.
    code = ("import sys, planner.app.cli; planner.app.cli.main(['solve', 'qwen3-tts', "
            "'--isolate-stage', 'vocoder']);"
            "assert 'yaml' not in sys.modules, 'yaml imported';"
            "assert 'importlib.metadata' not in sys.modules, 'importlib.metadata imported'")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV)
    assert out.returncode == 0, out.stderr


def test_a_printed_yaml_hint_pasted_into_a_file_fixes_the_request(tmp_path):
    out = run("solve", "audar-tts", "--isolate-stage", "vocoder", "--format", "json")
    assert out.returncode == 1
    hint = json.loads(out.stdout)["diagnostics"][0]["hint"]
    yaml_text = hint.split("--config:\n", 1)[1]
    cfg = tmp_path / "fractions.yaml"
    cfg.write_text(yaml_text)
    fixed = run("solve", "--config", str(cfg), "--isolate-stage", "vocoder", "--format", "json")
    assert fixed.returncode == 0, fixed.stdout
    assert json.loads(fixed.stdout)["gpus"][0]["total"] <= 1.0


@pytest.mark.usefixtures("cli_mode")
def test_stage_process_with_an_invalid_process_name_names_the_flag():
    out = run("solve", "qwen3-tts", "--stage-process", 'vocoder=a"b c', "--format", "json")
    assert out.returncode == 2
    d = json.loads(out.stdout)["diagnostics"]
    assert [x["code"] for x in d] == ["invalid-assignment"]
    assert '`--stage-process vocoder=a"b c`' in d[0]["message"]
    assert d[0]["hint"] == "write it as `--stage-process vocoder=a_b_c`"
    # PROCESS may hold further '=' (the flag splits at the first one).
    assert run("solve", "qwen3-tts", "--stage-process", "vocoder=a=b").returncode == 0


@pytest.mark.usefixtures("cli_mode")
def test_version_prints_the_version():
    import planner

    out = run("--version")
    assert out.returncode == 0
    assert out.stdout.strip() == f"planner (stage-planner) {planner.__version__}"
