"""sglang-omni's dotted flags beside the seed's placement flags: `--STAGE.process P` is exactly its
`--stage-process STAGE=P` twin on every card and variant, a mix of both is one request, stage
fields go over the config, and one path written twice is refused."""

from __future__ import annotations

import json
import os

import pytest

from planner import cards
from planner.api import solve_pipeline
from planner.cards import load_pipeline
from planner.dotted import DottedError, DottedFlags
from planner.flags import parse
from planner.plan import Assign, Threads
from tests.cli import run_planner

ENV = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
CPUS = 64


def run(*args):
    return run_planner(*args, env=ENV, timeout=60)


def _said(d, spelling: str, twin: str):
    """What a diagnostic says, with the dotted spelling put back as its twin's."""
    return (d.code, d.stages, d.edge, d.gpu, d.fix, d.hint.replace(spelling, twin),
            d.message.replace(spelling, twin), tuple(b.replace(spelling, twin) for b in d.because))


def _cases():
    for card in cards.all_cards():
        for variant in card.variants:
            pipeline = load_pipeline(card.name, variant=variant)
            processes = sorted({s.process or s.name for s in pipeline.stages})
            for stage in pipeline.stages:
                for process in dict.fromkeys((stage.name, processes[0], "apart")):
                    yield pytest.param(card.name, variant, stage.name, process,
                                       id=f"{card.name}-{variant}-{stage.name}={process}")


@pytest.mark.parametrize("card,variant,stage,process", list(_cases()))
def test_stage_process_flag_is_exactly_its_stage_process_twin(card, variant, stage, process):
    pipeline = load_pipeline(card, variant=variant)
    dotted = DottedFlags.parse([f"--{stage}.process", process]).requests()
    assert dotted == (Assign(stage, process),)
    seed = solve_pipeline(pipeline, requests=[Assign.parse(f"{stage}={process}")], cpus=CPUS)
    mine = solve_pipeline(pipeline, requests=dotted, cpus=CPUS)
    assert (mine.status, mine.plan, mine.changed, mine.warnings) == (
        seed.status, seed.plan, seed.changed, seed.warnings)
    spelling, twin = f"--{stage}.process {process}", f"--stage-process {stage}={process}"
    assert [_said(d, spelling, twin) for d in mine.diagnostics] == [
        _said(d, twin, twin) for d in seed.diagnostics]


def test_the_dotted_spelling_is_quoted_as_typed():
    out = run("solve", "qwen3-tts", "--preprocessing.process", "prep")
    assert out.returncode == 1
    assert "`--preprocessing.process prep` puts preprocessing in process prep" in out.stdout


def test_both_dialects_in_one_request_are_checked_as_one():
    out = run("solve", "qwen3-tts", "--isolate-stage", "vocoder", "--vocoder.process", "x",
              "--format", "json")
    assert out.returncode == 2
    d = json.loads(out.stdout)["diagnostics"]
    assert [x["code"] for x in d] == ["duplicate-assignment"]
    said = d[0]["message"] + " ".join(d[0]["because"])
    assert "`--isolate-stage vocoder` and `--vocoder.process x`" in said
    both = run("solve", "higgs-tts", "--stage-process", "preprocessing=front",
               "--audio_encoder.process=front", "--format", "json")
    assert both.returncode == 0, both.stdout
    groups = json.loads(both.stdout)["groups"]
    assert groups[0]["name"] == "front" and groups[0]["stages"] == ["preprocessing",
                                                                   "audio_encoder"]


def test_thread_count_in_env_is_stage_threads():
    dotted = DottedFlags.parse(["--vocoder.env.OMP_NUM_THREADS", "2",
                                "--vocoder.env.MKL_NUM_THREADS=2"]).requests()
    assert dotted == (Threads("vocoder", 2),)
    pipeline = load_pipeline("piper-joe")
    assert solve_pipeline(pipeline, requests=dotted, cpus=CPUS).plan == solve_pipeline(
        pipeline, requests=[Threads.parse("vocoder=2")], cpus=CPUS).plan
    with pytest.raises(DottedError, match="two thread counts"):
        DottedFlags.parse(["--vocoder.env.OMP_NUM_THREADS", "2",
                           "--vocoder.env.MKL_NUM_THREADS", "3"]).requests()


def test_stage_fields_go_over_the_config():
    out = run("solve", "ming-omni-tts", "--tts_engine.tp_size", "2", "--tts_engine.gpu", "[0, 1]",
              "--stages.reference_encode.gpu_memory_fraction", "0.08",
              "--audio_decode.gpu_memory_fraction", "0.12", "--tts_engine.gpu_memory_fraction",
              "0.72", "--tts_engine.engine.mem_fraction_static", "0.7", "--format", "json")
    assert out.returncode == 0, out.stdout + out.stderr
    data = json.loads(out.stdout)
    engine = next(s for s in data["stages"] if s["name"] == "tts_engine")
    assert (engine["gpu"], engine["tp_size"], engine["fraction"]) == ([0, 1], 2, 0.72)
    assert data["carried"] == [{"key": "stages.tts_engine.engine.mem_fraction_static",
                                "value": 0.7}]


def test_the_command_line_outranks_the_config_file(tmp_path):
    path = tmp_path / "omni.yaml"
    path.write_text("model_path: fishaudio/s2-pro\nstages:\n  vocoder:\n"
                    "    gpu_memory_fraction: 0.1\n")
    p = load_pipeline(config=str(path), overrides={"stages": {"vocoder": {
        "gpu_memory_fraction": 0.2}}})
    assert p.stage("vocoder").fraction == 0.2


@pytest.mark.parametrize("args,needle", [
    (["--vocoder.process", "a", "--vocoder.process", "b"],
     "`--vocoder.process b` writes stages.vocoder.process a second time "
     "(`--vocoder.process a` already writes it)"),
    (["--stages.vocoder.process", "a", "--vocoder.process=a"],
     "writes stages.vocoder.process a second time"),
    (["--tts_engine.gpu_memory_fraction", "0.3", "--tts_engine.gpu_memory_fraction", "0.3"],
     "writes stages.tts_engine.gpu_memory_fraction a second time"),
    (["--vocoder.process"], "--vocoder.process needs a value"),
    (["--vocoder."], "is not a stage field"),
    (["--processes.vocoder.num_replicas", "2"], "are `--process-copies PROCESS=N`"),
])
def test_one_path_twice_or_a_flag_without_value_is_one_paragraph_exit_2(args, needle):
    out = run("solve", "qwen3-tts", *args)
    assert out.returncode == 2
    assert needle in out.stderr and out.stderr.count("error:") == 1
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("args,needle", [
    (["--vocodr.gpu_memory_fraction", "0.1"],
     "command line: --vocodr: stage 'vocodr' is not a stage of this model; the stages are: "
     "preprocessing, tts_engine, vocoder"),
    (["--vocoder.gpu_memory_fraction", "2"],
     "command line: --vocoder.gpu_memory_fraction: fraction 2.0 is outside (0, 1]"),
    (["--vocodr.process", "x"], "error[unknown-stage]"),
    (["--vocoder.process", "x", "--vocoder.next", "y"], "--vocoder.next: a stage's handoffs"),
])
def test_a_bad_stage_field_names_the_flag(args, needle):
    out = run("solve", "qwen3-tts", *args)
    assert out.returncode == 2
    assert needle in out.stdout + out.stderr


@pytest.mark.parametrize("command", ["bench", "tune", "show"])
def test_commands_without_dotted_flags_say_where_they_go(command):
    out = run(command, "qwen3-tts", "--vocoder.process", "vocoder")
    assert out.returncode == 2
    assert f"`planner {command}` does not take sglang-omni's dotted stage flags" in out.stderr


def test_bench_placements_take_the_dotted_placement_flags():
    assert parse(["--vocoder.process", "vocoder", "--isolate-stage", "frontend"]) == (
        parse(["--isolate-stage", "frontend", "--stage-process", "vocoder=vocoder"]))
    with pytest.raises(ValueError, match="sets a stage field, not a placement"):
        parse(["--vocoder.gpu_memory_fraction", "0.1"])
