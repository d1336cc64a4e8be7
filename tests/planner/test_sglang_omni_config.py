"""sglang-omni's config dialect as `--config FILE`: every shape its TTS users write is read onto the
one schema, wrong ones are refused with the ordered diagnostics and hints (exit 1) or one
paragraph in sglang-omni's key paths (exit 2), and what the planner does not model is carried."""

from __future__ import annotations

import json
import os
import textwrap

import pytest

from planner.api import solve_pipeline
from planner.cards import load_pipeline
from planner.errors import ConfigError
from tests.cli import run_planner

ENV = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
CPUS = 64  # what the API-level tests count threads against: CPUs never decide these rows


def run(*args):
    return run_planner(*args, env=ENV, timeout=60)


def write(tmp_path, text, name="omni.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def replicated(replicas: int, devices: list[int] | None = None) -> str:
    """S2-Pro with engine and vocoder in processes of their own, `replicas` each on GPU 0 (or on
    `devices`), as sglang-omni's same-GPU replica recipes write it."""
    devices = devices or [0] * replicas
    return f"""
        config_cls: S2ProPipelineConfig
        model_path: fishaudio/s2-pro
        mps: auto
        weight_share: "on"
        stages:
          tts_engine:
            process: tts_engine
            gpu_memory_fraction: 0.35
            engine:
              mem_fraction_static: 0.35
              max_total_tokens: 32000
          vocoder:
            process: vocoder
            gpu_memory_fraction: 0.10
        processes:
          tts_engine: {{num_replicas: {replicas}, replica_devices: {devices}}}
          vocoder: {{num_replicas: {replicas}, replica_devices: {devices}}}
    """


# -- every shape is read ---------------------------------------------------------------------------
def test_config_cls_alone_selects_the_card_and_its_declared_topology():
    p = load_pipeline(config={"config_cls": "Qwen3TTSPipelineConfig", "relay_backend": "shm"})
    assert (p.name, p.variant, p.dialect) == ("qwen3-tts", "default", "sglang-omni")
    assert p == load_pipeline(config={"config_cls": "Qwen3TTSPipelineConfig",
                                      "relay_backend": "shm"})
    assert [c.key for c in p.carried] == ["relay_backend"]
    assert {s.name: s.process for s in p.stages} == {
        s.name: s.process for s in load_pipeline("qwen3-tts").stages}


def test_model_path_alone_and_a_config_class_that_names_a_variant():
    assert load_pipeline(config={"model_path": "fishaudio/s2-pro"}).name == "fishaudio-s2-pro"
    p = load_pipeline(config={"config_cls": "MossTTSLocalColocatedPipelineConfig",
                              "model_path": "OpenMOSS-Team/MOSS-TTS-Local-Transformer-v1.5"})
    assert (p.name, p.variant) == ("moss-tts-local", "colocated")


def test_stage_fields_map_onto_the_schema(tmp_path):
    p = load_pipeline(config=write(tmp_path, """
        config_cls: MingTTSPipelineConfig
        stages:
          preprocessing: {process: preprocessing}
          tts_engine:
            process: tts_engine
            gpu: [0, 1]
            tp_size: 2
            gpu_memory_fraction: 0.72
            factory: {dtype: bfloat16}
          audio_decode:
            gpu_memory_fraction: 0.12
            env: {OMP_NUM_THREADS: "2", MKL_NUM_THREADS: 2, CUDA_MODULE_LOADING: LAZY}
        placement:
          max_total_gpu_memory_fraction_per_gpu: 0.95
          require_memory_fraction_for_colocation: false
        fused_stages: [[reference_encode, audio_decode]]
    """))
    engine, decode = p.stage("tts_engine"), p.stage("audio_decode")
    assert (engine.gpus, engine.tp_size, engine.fraction) == ((0, 1), 2, 0.72)
    assert (decode.fraction, decode.threads) == (0.12, 2)
    assert p.placement.max_total_gpu_memory_fraction_per_gpu == 0.95
    assert p.placement.require_memory_fraction_for_colocation is False
    assert p.fused_stages == (("reference_encode", "audio_decode"),)
    assert {c.key: c.value for c in p.carried} == {
        "stages.tts_engine.factory.dtype": "bfloat16",
        "stages.audio_decode.env.CUDA_MODULE_LOADING": "LAZY"}


@pytest.mark.parametrize("written,mode", [('"auto"', "auto"), ("on", "on"), ("off", "off"),
                                          ("'on'", "on")])
def test_mps_as_yaml_writes_it(tmp_path, written, mode):
    """A bare `on` / `off` is a YAML 1.1 boolean: read as the mode it spells."""
    path = write(tmp_path, f"model_path: fishaudio/s2-pro\nmps: {written}\n")
    assert load_pipeline(config=path).mps == mode


def test_replicas_and_their_devices_are_copies_and_per_copy_gpus(tmp_path):
    p = load_pipeline(config=write(tmp_path, replicated(2, [1, 2])))
    assert dict(p.process_copies) == {"tts_engine": 2, "vocoder": 2}
    assert dict(p.process_gpus) == {"tts_engine": (1, 2), "vocoder": (1, 2)}
    plan = solve_pipeline(p, cpus=CPUS).plan
    assert [(g.name, g.copy_gpus()) for g in plan.groups] == [
        ("preprocessing", (None,)), ("tts_engine", (1, 2)), ("vocoder", (1, 2))]
    # Each GPU holds one replica of each: 0.35 + 0.10; the stages' declared GPU 0 holds none.
    assert [(g.id, g.total, g.processes) for g in plan.gpus] == [
        (1, 0.45, ("tts_engine", "vocoder")), (2, 0.45, ("tts_engine", "vocoder"))]


def test_env_defaults_size_every_stage_without_its_own(tmp_path):
    p = load_pipeline(config=write(tmp_path, """
        model_path: fishaudio/s2-pro
        env_defaults: {OMP_NUM_THREADS: "3"}
        stages:
          vocoder: {env: {OMP_NUM_THREADS: "1"}}
    """))
    assert {s.name: s.threads for s in p.stages} == {
        "preprocessing": 3, "tts_engine": 3, "vocoder": 1}
    assert [c.key for c in p.carried] == ["env_defaults"]


# -- replicas on one GPU count per replica ---------------------------------------------------------
def test_two_replicas_each_of_035_and_010_fit_one_gpu_at_090(tmp_path):
    out = run("solve", "--config", write(tmp_path, replicated(2)), "--format", "json")
    assert out.returncode == 0, out.stdout + out.stderr
    data = json.loads(out.stdout)
    assert data["gpus"] == [{"id": 0, "total": 0.9, "limit": 1.0,
                             "processes": ["tts_engine", "vocoder"], "missing_fraction": []}]
    assert [(g["name"], g["copies"]) for g in data["groups"]][1:] == [("tts_engine", 2),
                                                                        ("vocoder", 2)]


def test_three_replicas_do_not_fit_and_the_conflict_says_gpu_sum_budget_and_fix(tmp_path):
    path = write(tmp_path, replicated(3))
    out = run("solve", "--config", path, "--format", "json")
    assert out.returncode == 1  # before anything starts: serve solves first, the same way
    first = json.loads(out.stdout)["diagnostics"][0]
    assert (first["code"], first["gpu"]) == ("over-limit", 0)
    said = first["message"] + " ".join(first["because"])
    assert "GPU 0" in said and "1.350" in said
    assert "max_total_gpu_memory_fraction_per_gpu is 1.000" in said
    assert "in each of 3 copies" in said
    # The fix is a pasteable dotted flag (sglang-omni's spelling, which the planner reads too),
    # and applying it makes the three replicas fit.
    hint = first["hint"]
    assert "`--tts_engine.gpu_memory_fraction 0.233`" in hint
    assert "tts_engine: {gpu_memory_fraction: 0.233}" in hint
    fixed = load_pipeline(config=path,
                          overrides={"stages": {"tts_engine": {"gpu_memory_fraction": 0.233}}})
    result = solve_pipeline(fixed, cpus=CPUS)
    assert result.ok and result.plan.gpus[0].total == pytest.approx(0.999)


def test_serve_refuses_the_three_replicas_before_starting_anything(tmp_path):
    out = run("serve", "--config", write(tmp_path, replicated(3)))
    assert out.returncode == 1
    assert "error[over-limit] GPU 0" in out.stderr and "ready:" not in out.stdout + out.stderr


# -- wrong configs ---------------------------------------------------------------------------------
def test_unsupported_handoff_is_reported_before_the_missing_fraction(tmp_path):
    out = run("solve", "--config", write(tmp_path, """
        model_path: Qwen/Qwen3-TTS-12Hz-0.6B-Base
        stages:
          preprocessing: {process: prep}
          vocoder: {process: vocoder}
    """))
    assert out.returncode == 1
    text = out.stdout
    assert text.index("error[unsupported-handoff] preprocessing -> tts_engine") < text.index(
        "error[missing-fraction] GPU 0")
    # Each hint is said in the dialect the file is written in.
    assert "`stages.preprocessing.process: prep` in" in text
    assert "preprocessing: {process: pipeline}" in text
    assert "--tts_engine.gpu_memory_fraction 0.85 --vocoder.gpu_memory_fraction 0.1" in text


def test_an_unknown_stage_names_the_real_ones(tmp_path):
    out = run("solve", "--config", write(tmp_path, """
        config_cls: Qwen3TTSPipelineConfig
        stages:
          vocodr: {process: vocoder}
    """))
    assert out.returncode == 2
    assert ("stages.vocodr: stage 'vocodr' is not a stage of this model; the stages are: "
            "preprocessing, tts_engine, vocoder") in out.stdout
    assert "Traceback" not in out.stdout + out.stderr


@pytest.mark.parametrize("text,needle", [
    ("stages:\n  vocoder: {gpu_memory_fraction: 1.5}",
     "stages.vocoder.gpu_memory_fraction: fraction 1.5 is outside (0, 1]"),
    ("stages:\n  vocoder: {env: {OMP_NUM_THREADS: many}}",
     "stages.vocoder.env.OMP_NUM_THREADS: got the string 'many'"),
    ("stages:\n  vocoder: {env: {OMP_NUM_THREADS: 0}}",
     "stages.vocoder.env.OMP_NUM_THREADS: got 0; a whole number of CPU threads from 1"),
    ("stages:\n  vocoder: {env: {OMP_NUM_THREADS: 2, MKL_NUM_THREADS: 4}}",
     "stages.vocoder.env: gives two thread counts"),
    ("stages:\n  vocoder: {next: tts_engine}", "stages.vocoder.next: a stage's handoffs come"),
    ("stages:\n  vocoder: {gpu_fraction: 0.1}", "stages.vocoder.gpu_fraction: unknown key"),
    ("stages:\n  vocoder: {name: decoder}", "stages.vocoder.name: renames stage 'vocoder'"),
    ("stages:\n  - {name: vocoder}", "stages: got a list"),
    ("processes:\n  pipeline: {num_replicas: 2, replica_devices: [0, 0, 0]}",
     "processes.pipeline.replica_devices: lists 3 GPUs for 2 copies; give one GPU id per copy, "
     "e.g. replica_devices: [0, 0]"),
    ("processes:\n  pipeline: {num_replicas: 0}", "processes.pipeline.num_replicas: got 0"),
    ("mps: sometimes", "mps: got the string 'sometimes'; one of off, on, auto"),
    ("shared:\n  - {select: {stages: [vocoder]}, gpu_memory_fraction: 0.1}",
     "shared[0].gpu_memory_fraction: sets a placement field for several stages"),
])
def test_a_wrong_file_is_one_paragraph_in_its_own_key_paths(tmp_path, text, needle):
    path = write(tmp_path, "config_cls: Qwen3TTSPipelineConfig\n" + text + "\n")
    with pytest.raises(ConfigError) as err:
        load_pipeline(config=path)
    assert needle in err.value.paragraph()
    out = run("solve", "--config", path)
    assert out.returncode == 2 and needle in out.stdout and "Traceback" not in out.stderr


def test_an_unknown_config_class_with_a_model_path_is_kept_as_written():
    p = load_pipeline(config={"config_cls": "S2ProLowLatencyPipelineConfig",
                              "model_path": "fishaudio/s2-pro"})
    assert p.name == "fishaudio-s2-pro"
    assert {c.key: c.value for c in p.carried} == {"config_cls": "S2ProLowLatencyPipelineConfig"}
    with pytest.raises(ConfigError, match="no built-in model card has the sglang-omni config "
                                          "class 'Nope'"):
        load_pipeline(config={"config_cls": "Nope"})


# -- carried, not planned --------------------------------------------------------------------------
def test_carried_keys_are_listed_once_in_text_and_json(tmp_path):
    path = write(tmp_path, replicated(2))
    text = run("solve", "--config", path).stdout
    assert text.count("carried, not planned:") == 1
    line = next(x for x in text.splitlines() if x.startswith("carried, not planned:"))
    assert line == ("carried, not planned: stages.tts_engine.engine.mem_fraction_static, "
                    "stages.tts_engine.engine.max_total_tokens, weight_share")
    data = json.loads(run("solve", "--config", path, "--format", "json").stdout)
    assert data["carried"] == [
        {"key": "stages.tts_engine.engine.mem_fraction_static", "value": 0.35},
        {"key": "stages.tts_engine.engine.max_total_tokens", "value": 32000},
        {"key": "weight_share", "value": "on"}]
    assert data["mps"] == "auto"


def test_fewer_copies_on_the_command_line_keep_the_first_replica_devices(tmp_path):
    from planner.plan import Copies

    p = load_pipeline(config=write(tmp_path, replicated(2, [1, 2])))
    one = solve_pipeline(p, requests=[Copies("tts_engine", 1)], cpus=CPUS)
    assert one.ok and one.plan.group_of("tts_engine").copy_gpus() == (1,)
    three = solve_pipeline(p, requests=[Copies("tts_engine", 3)], cpus=CPUS)
    assert three.status == "error"
    d = three.diagnostics[0]
    assert d.code == "invalid-compute" and "lists 2 GPUs for process tts_engine" in d.message
    assert "`--process-copies tts_engine=2`" in d.hint


def test_replica_devices_for_a_group_of_cpu_stages_are_refused():
    p = load_pipeline(config={"model_path": "fishaudio/s2-pro", "processes": {
        "preprocessing": {"num_replicas": 2, "replica_devices": [0, 1]}}})
    result = solve_pipeline(p, cpus=CPUS)
    assert result.status == "error"
    assert result.diagnostics[0].message == (
        "process preprocessing lists a GPU for each copy (0, 1) but runs no GPU stage")


def test_config_cls_and_model_path_of_two_cards_are_refused():
    with pytest.raises(ConfigError, match="model_path: selects card 'qwen3-tts' but config_cls "
                                          "S2ProPipelineConfig is card 'fishaudio-s2-pro'"):
        load_pipeline(config={"config_cls": "S2ProPipelineConfig",
                              "model_path": "Qwen/Qwen3-TTS-12Hz-0.6B-Base"})
    with pytest.raises(ConfigError, match="an sglang-omni config names its model"):
        load_pipeline(config={"stages": {"vocoder": {"process": "vocoder"}}})
