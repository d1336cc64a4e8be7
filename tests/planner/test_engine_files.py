"""A plan written in an engine's language: sglang-omni's file reads back to the same plan (a
property over every card, variant and generated placement and compute flags), vLLM-Omni's deploy
YAML carries each decision field by field, and what a target cannot say is said, in the file and
on stderr."""

from __future__ import annotations

import functools
import os

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from planner import cards
from planner.api import solve_pipeline
from planner.cards import load_pipeline
from planner.cluster import Cluster, Node
from planner.placements import feasible_placements
from planner.plan import Copies, Pin, Plan, Threads
from planner.render.engines import ENGINE_FORMATS, write_plan
from planner.render.vllm_omni import stage_entries
from planner.replicas import pack
from tests.cli import run_planner
from tests.lanes import examples

ENV = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
CPUS = 1024  # threads and copies never run out of CPUs here: the file, not the node, is tested
MODELS = [(c.name, v) for c in cards.all_cards() for v in c.variants]


@functools.cache
def placements(card: str, variant: str):
    return tuple(feasible_placements(card, variant=variant))


def decisions(plan: Plan) -> tuple:
    """Everything the plan decides, without how it came about (which flags changed it, which
    fraction was recommended rather than declared): what a file must carry."""
    return (
        plan.model, plan.variant,
        tuple((s.name, s.process, s.gpus, s.tp_size, s.fraction, s.threads, s.factory, s.args)
              for s in plan.stages),
        tuple((g.name, g.stages, g.copies, g.copy_gpus(), g.cpus) for g in plan.groups),
        tuple((t.name, t.gpu) for t in plan.tp_processes),
        tuple((g.id, g.total, g.limit, g.processes, g.missing_fraction) for g in plan.gpus),
        tuple((h.source, h.target, h.crosses) for h in plan.handoffs),
        plan.mps, plan.placement, tuple(sorted((c.key, repr(c.value)) for c in plan.carried)),
    )


def read_back(text: str) -> Plan:
    result = solve_pipeline(load_pipeline(config=yaml.safe_load(text)), cpus=CPUS)
    assert result.ok, [d.message for d in result.diagnostics]
    return result.plan


def as_sglang_omni_says_it(plan: Plan, unsaid: tuple[str, ...]) -> Plan:
    """`plan` less what sglang-omni cannot say, having checked that the file said so: one thread
    count a process (its widest stage's), no CPU pins."""
    import dataclasses

    threads = {s.name: s.threads for s in plan.stages}
    for g in plan.groups:
        widest = max(threads[s] for s in g.stages)
        if any(threads[s] != widest for s in g.stages):
            assert any(f"process {g.name}: sglang-omni's env is one per process" in u
                       for u in unsaid)
            threads.update({s: widest for s in g.stages})
        if g.cpus:
            assert any(f"process {g.name} is pinned to CPUs" in u for u in unsaid)
    return dataclasses.replace(
        plan, stages=tuple(dataclasses.replace(s, threads=threads[s.name]) for s in plan.stages),
        groups=tuple(dataclasses.replace(g, cpus=()) for g in plan.groups))


@st.composite
def plans(draw):
    """A feasible plan of some card and variant: one of its accepted placements, with threads,
    copies and CPU pins drawn over it, mps and carried engine keys in the config."""
    card, variant = draw(st.sampled_from(MODELS))
    placement = draw(st.sampled_from(placements(card, variant)))
    groups = placement.plan.groups
    compute = []
    for s in placement.plan.stages:
        if draw(st.integers(0, 2)) == 0:
            compute.append(Threads(s.name, draw(st.integers(2, 4))))
    for g in groups:
        copies = draw(st.sampled_from([1, 1, 2, 3]))
        if copies > 1:
            compute.append(Copies(g.name, copies))
        if draw(st.integers(0, 3)) == 0:
            compute.append(Pin(g.name, tuple(range(copies * 4))))
    config = {"model": card}
    mps = draw(st.sampled_from([None, "off", "on", "auto"]))
    if mps is not None:
        config["mps"] = mps
    stage = draw(st.sampled_from([s.name for s in placement.plan.stages]))
    overrides = draw(st.sampled_from([None, {"stages": {stage: {
        "engine": {"mem_fraction_static": 0.5}, "factory": {"dtype": "bfloat16"},
        "env": {"CUDA_MODULE_LOADING": "LAZY"}}}}]))
    pipeline = load_pipeline(config=config, variant=variant, overrides=overrides)
    result = solve_pipeline(pipeline, requests=placement.requests + tuple(compute), cpus=CPUS)
    assume(result.ok)  # copies can overfill a GPU: that plan is refused, not written
    return result.plan


@settings(max_examples=examples(150, 30),
          suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(plans())
def test_sglang_omni_file_reads_back_to_the_same_plan(plan):
    written = write_plan(plan, "sglang-omni")
    assert decisions(read_back(written.text)) == decisions(
        as_sglang_omni_says_it(plan, written.unsaid))
    for fact in written.unsaid:  # each said in the file too
        assert " ".join(fact.split()[:6]) in " ".join(
            line.lstrip("# ") for line in written.text.splitlines() if line.startswith("#"))


@pytest.mark.parametrize("card,variant", MODELS)
def test_every_card_and_variant_reads_back_as_declared(card, variant):
    plan = solve_pipeline(load_pipeline(card, variant=variant), cpus=CPUS).plan
    written = write_plan(plan, "sglang-omni")
    assert decisions(read_back(written.text)) == decisions(plan)


def test_sglang_omni_file_says_every_decision():
    pipeline = load_pipeline(config={"model": "fishaudio-s2-pro", "mps": "auto",
                                     "processes": {"tts_engine": {"gpus": [1, 2]}}},
                             overrides={"stages": {"tts_engine": {"engine": {
                                 "mem_fraction_static": 0.35}}}})
    result = solve_pipeline(pipeline, requests=(
        *_isolate("tts_engine", "vocoder"), Threads("vocoder", 2), Pin("vocoder", (0, 1))),
        cpus=CPUS)
    assert result.ok, result.diagnostics
    written = write_plan(result.plan, "sglang-omni")
    data = yaml.safe_load(written.text)
    assert data["config_cls"] == "S2ProPipelineConfig" and data["mps"] == "auto"
    assert data["stages"]["tts_engine"] == {
        "process": "tts_engine", "gpu": 0, "tp_size": 1, "gpu_memory_fraction": 0.85,
        "env": {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
        "engine": {"mem_fraction_static": 0.35}}
    assert data["stages"]["vocoder"]["env"] == {"OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2"}
    assert data["processes"] == {"tts_engine": {"num_replicas": 2, "replica_devices": [1, 2]}}
    assert written.unsaid == ("process vocoder is pinned to CPUs 0-1: sglang-omni's config has "
                              "no per-process CPU list (`sgl-omni serve --cpu-allocator static` "
                              "pins its processes itself)",)


def _isolate(*stages):
    from planner.plan import Isolate

    return tuple(Isolate(s) for s in stages)


def test_replicas_over_nodes_are_said_as_servers_behind_the_router():
    plan = solve_pipeline(load_pipeline("qwen3-tts"), cpus=CPUS).plan
    cluster = Cluster((Node("a", 1, 8), Node("b", 2, 8)), "cluster.yaml")
    packing = pack(plan, cluster, 3, "spread")
    written = write_plan(plan, "sglang-omni", packing)
    assert any("3 replicas over 2 nodes: sglang-omni has no cross-node replica" in u
               for u in written.unsaid)
    text = written.text
    assert "#   a: CUDA_VISIBLE_DEVICES=0 sgl-omni serve --config FILE --host 0.0.0.0 --port " \
           "30000" in text
    assert text.count("sgl-omni serve --config FILE --host 0.0.0.0") == 3
    assert "#   sgl-omni-router --port 8000 --worker-urls http://a:30000 http://b:30000 " \
           "http://b:30001 --policy least_request" in text
    assert decisions(read_back(text)) == decisions(plan)  # the commands are comments


# -- vLLM-Omni, field by field ---------------------------------------------------------------------
@pytest.mark.parametrize("card,variant,requests", [
    ("qwen3-tts", "default", ("--isolate-stage vocoder", "--stage-threads vocoder=2")),
    ("ming-omni-tts", "tp2", ()),
    ("zonos2", "multi-gpu", ("--process-copies auxiliary=2",)),
    ("higgs-tts", "default", ()),
    ("moss-tts-local", "split", ()),
    ("piper-joe", "all-apart", ()),
])
def test_vllm_omni_deploy_fields_carry_the_plan(card, variant, requests):
    from planner.flags import parse

    words = [w for r in requests for w in r.split()]
    result = solve_pipeline(load_pipeline(card, variant=variant), requests=parse(words),
                            cpus=CPUS)
    assert result.ok, result.diagnostics
    plan = result.plan
    written = write_plan(plan, "vllm-omni")
    deploy = yaml.safe_load(written.text)["stages"]
    gpu_stages = [s for s in plan.stages if s.gpus]
    assert [e["stage_id"] for e in deploy] == list(range(len(gpu_stages)))
    assert [name for name, _ in stage_entries(plan)] == [s.name for s in gpu_stages]
    for entry, stage in zip(deploy, gpu_stages):
        group = plan.group_of(stage.name)
        copies = 1 if group is None else group.copies
        gpus = list(stage.gpus) if group is None else list(group.copy_gpus())
        assert entry["devices"] == ",".join(map(str, gpus))
        assert entry["num_replicas"] == copies
        assert entry["tensor_parallel_size"] == stage.tp_size
        assert entry.get("gpu_memory_utilization") == stage.fraction
        assert entry["env"] == {"OMP_NUM_THREADS": str(stage.threads),
                                "MKL_NUM_THREADS": str(stage.threads)}
        assert set(entry) <= {"stage_id", "devices", "num_replicas", "gpu_memory_utilization",
                              "tensor_parallel_size", "env"}
    shared = [g for g in plan.groups if sum(1 for s in g.stages if plan.stage(s).gpus) > 1]
    for g in shared:
        assert any(f"process {g.name} runs" in u and "its own engine" in u
                   for u in written.unsaid)
    cpu = [s.name for s in plan.stages if not s.gpus]
    assert bool(cpu) == any("on CPU: no vLLM-Omni deploy stage" in u for u in written.unsaid)


def test_vllm_omni_says_what_it_cannot():
    pipeline = load_pipeline(config={"model": "fishaudio-s2-pro", "mps": "on"},
                             overrides={"stages": {"vocoder": {"engine": {"x": 1}}}})
    result = solve_pipeline(pipeline, requests=(Pin("pipeline", (0,)),), cpus=CPUS)
    written = write_plan(result.plan, "vllm-omni")
    said = " | ".join(written.unsaid)
    for needle in ("process pipeline runs tts_engine, vocoder in one process",
                   "is pinned to CPUs 0", "no GPU memory fraction", "mps: on has no vLLM-Omni",
                   "sglang-omni's keys stages.vocoder.engine.x are not vLLM-Omni's"):
        assert needle in said
        assert needle.split()[0] in written.text


# -- the command -----------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ENGINE_FORMATS)
def test_solve_writes_the_file_and_says_the_rest_on_stderr(tmp_path, fmt):
    out = run_planner("solve", "qwen3-tts", "--isolate-stage", "vocoder", "--format", fmt,
                      env=ENV)
    assert out.returncode == 0, out.stderr
    assert yaml.safe_load(out.stdout)["stages"]
    target = tmp_path / "plan.yaml"
    again = run_planner("solve", "qwen3-tts", "--isolate-stage", "vocoder", "--format", fmt,
                        "--output", str(target), env=ENV)
    assert again.returncode == 0 and again.stdout == ""
    assert target.read_text() == out.stdout
    assert f"wrote {target}" in again.stderr
    for line in out.stderr.splitlines():
        assert line.startswith(f"note: {fmt} cannot express: ")


def test_an_infeasible_request_writes_no_file(tmp_path):
    target = tmp_path / "plan.yaml"
    out = run_planner("solve", "qwen3-tts", "--isolate-stage", "preprocessing", "--format",
                      "sglang-omni", "--output", str(target), env=ENV)
    assert out.returncode == 1 and not target.exists()
    assert "error[unsupported-handoff]" in out.stderr and out.stdout == ""


def test_output_without_an_engine_format_is_refused(tmp_path):
    out = run_planner("solve", "qwen3-tts", "--output", str(tmp_path / "x.yaml"), env=ENV)
    assert out.returncode == 2 and "--output writes an engine's config file" in out.stderr
    assert not (tmp_path / "x.yaml").exists()
