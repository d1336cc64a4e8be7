"""`planner solve --format ray-serve`: a Ray Serve config Ray Serve's own schema accepts, carrying
every decision of the plan (a deployment per process group with its copies x replicas, threads
and GPU fractions) or saying, in the file and on stderr, what Ray Serve cannot; plans the
application cannot run are refused. Serving the file for real: tests/scale/test_ray_serve.py."""

from __future__ import annotations

import pytest
import yaml

import planner
from planner.api import solve_replicas
from planner.cluster import load_cluster
from planner.render.ray_serve import IMPORT_PATH, Asked, Unwritable, ray_serve_file
from tests.cli import run_planner

# (model, flags): every card as declared, and requests that split, copy, thread and pin.
CASES = [(card.name, ()) for card in planner.all_cards()] + [
    ("piper-joe", ("--isolate-stage", "vocoder", "--process-copies", "vocoder=2")),
    ("piper-joe", ("--process-cpus", "pipeline=0")),
    ("qwen3-tts", ("--isolate-stage", "vocoder")),
    ("higgs-tts", ("--stage-threads", "preprocessing=2")),
]

# Plans the Ray Serve application cannot run: a tensor-parallel stage; a process group (p) that
# feeds two others (q, r).
TENSOR_PARALLEL = {"name": "tp", "stages": [
    {"name": "a", "process": "p", "next": "tts_engine"},
    {"name": "tts_engine", "process": "q", "gpu": [0, 1], "tp_size": 2, "terminal": True}],
    "process_safe_edges": [["a", "tts_engine"]]}
FORK = {"name": "fork", "stages": [
    {"name": "a", "process": "p", "next": ["b", "c"]},
    {"name": "b", "process": "q", "next": "d"}, {"name": "c", "process": "r", "next": "d"},
    {"name": "d", "process": "q", "terminal": True}],
    "process_safe_edges": [["a", "b"], ["a", "c"], ["c", "d"]]}


def _written(model: str, flags: tuple[str, ...] = (), result=None):
    requests = planner.parse_flags(flags)
    result = result or planner.solve(model, requests=requests, cpus=2)
    assert result.ok, result.diagnostics
    written = ray_serve_file(result, Asked(model, None, None, requests))
    return result, written, yaml.safe_load(written.text)


def _deployments(config: dict) -> dict[str, dict]:
    (app,) = config["applications"]
    return {d["name"]: d for d in app["deployments"]}


@pytest.mark.parametrize(("model", "flags"), CASES)
def test_ray_serve_accepts_the_file(model, flags):
    schema = pytest.importorskip("ray.serve.schema", reason="ray[serve] is not installed")
    _, _, config = _written(model, flags)
    schema.ServeDeploySchema.model_validate(config)


@pytest.mark.parametrize(("model", "flags"), CASES)
def test_each_process_group_is_a_deployment_with_its_copies_threads_and_fractions(model, flags):
    result, _, config = _written(model, flags)
    plan = result.plan
    deployments = _deployments(config)
    assert list(deployments) == ["front_door", *(g.name for g in plan.groups)]
    assert deployments["front_door"] == {"name": "front_door", "num_replicas": 1,
                                         "ray_actor_options": {"num_cpus": 0}}
    for g in plan.groups:
        d = deployments[g.name]
        assert d["num_replicas"] == g.copies
        assert d["ray_actor_options"]["num_cpus"] == max(plan.stage(s).threads for s in g.stages)
        fractions = [plan.stage(s).fraction for s in g.stages if plan.stage(s).gpus]
        want = (0 if g.gpu is None else 1 if None in fractions
                else pytest.approx(sum(fractions), abs=1e-4))
        assert d["ray_actor_options"]["num_gpus"] == want
    (app,) = config["applications"]
    assert app["import_path"] == IMPORT_PATH and app["route_prefix"] == "/"
    assert app["args"]["model"] == model and app["args"]["cpus"] == 2
    assert [planner.request_from_dict(r) for r in app["args"].get("requests", [])] == list(
        planner.parse_flags(flags))


def test_the_numbers_written_for_higgs():
    _, _, config = _written("higgs-tts")
    assert {n: d["ray_actor_options"] for n, d in _deployments(config).items()} == {
        "front_door": {"num_cpus": 0},
        "tts_frontend": {"num_cpus": 1, "num_gpus": 0.03},
        "pipeline": {"num_cpus": 1, "num_gpus": 0.85},
        "vocoder": {"num_cpus": 1, "num_gpus": 0.1},
    }


def test_replicas_multiply_every_groups_copies_and_say_where_the_planner_put_them(tmp_path):
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text("nodes:\n  - {name: a, gpus: 0, cpus: 6}\n  - {name: b, gpus: 0, cpus: 6}\n")
    requests = planner.parse_flags(("--process-copies", "vocoder=2", "--isolate-stage", "vocoder"))
    result = solve_replicas(planner.load("piper-joe"), load_cluster(str(nodes)), 3, "spread",
                            requests)
    _, written, config = _written("piper-joe", (), result)
    replicas = {n: d["num_replicas"] for n, d in _deployments(config).items()}
    assert replicas == {"front_door": 3, "pipeline": 3, "vocoder": 6}
    assert any(note.startswith("which node runs which replica (planned: 2 on a, 1 on b)")
               or note.startswith("which node runs which replica (planned: 1 on a, 2 on b)")
               for note in written.notes), written.notes


def test_a_cluster_without_gpus_asks_for_none_and_says_so(tmp_path):
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text("nodes:\n  - {name: a, gpus: 0, cpus: 8}\n")
    result = solve_replicas(planner.load("higgs-tts"), load_cluster(str(nodes)), 1, "pack")
    _, written, config = _written("higgs-tts", (), result)
    assert {d["ray_actor_options"].get("num_gpus", 0)
            for d in _deployments(config).values()} == {0}
    assert any("the cluster has none" in note for note in written.notes)


@pytest.mark.parametrize(("model", "flags", "config", "said"), [
    ("piper-joe", ("--isolate-stage", "vocoder"), None, "a pipeline copy on one node"),
    ("piper-joe", ("--process-cpus", "pipeline=0"), None, "CPU pins (pipeline on CPUs 0)"),
    ("higgs-tts", (), None, "GPU ids (GPU 0: tts_frontend, pipeline, vocoder)"),
    (None, (), {"model": "higgs-tts", "stages": [
        {"name": "vocoder", "runtime": {"resources": {"gpu_compute_fraction": 0.25}}}]},
     "MPS compute shares (vocoder 0.25)"),
])
def test_what_ray_serve_cannot_say_is_a_comment_and_a_note(model, flags, config, said):
    requests = planner.parse_flags(flags)
    result = planner.solve(model, config=config, requests=requests, cpus=2)
    written = ray_serve_file(result, Asked(model, config, None, requests))
    (note,) = [n for n in written.notes if n.startswith(said)]
    comments = " ".join(line[2:].strip() for line in written.text.splitlines()
                        if line.startswith("#"))
    assert f"- {note}" in comments
    # the one plan that Ray Serve says whole: one CPU group, no pins
    assert not ray_serve_file(planner.solve("piper-joe", cpus=2),
                              Asked("piper-joe", None, None)).notes


def test_plans_the_application_cannot_run_are_refused():
    result = planner.solve(config=TENSOR_PARALLEL, cpus=2)
    assert result.ok, result.diagnostics
    with pytest.raises(Unwritable, match="tts_engine is tensor-parallel"):
        ray_serve_file(result, Asked(None, TENSOR_PARALLEL, None))
    result = planner.solve(config=FORK, cpus=2)
    assert result.ok, result.diagnostics
    with pytest.raises(Unwritable, match="'p' hands payloads to 2 groups"):
        ray_serve_file(result, Asked(None, FORK, None))


def test_the_command_writes_the_file_on_stdout_and_the_notes_on_stderr(tmp_path):
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text("model: piper-joe\nstages:\n  - {name: vocoder, threads: 2}\n")
    r = run_planner("solve", "--config", str(overlay), "--isolate-stage", "vocoder",
                    "--format", "ray-serve")
    assert r.returncode == 0, r.stderr
    config = yaml.safe_load(r.stdout)
    (app,) = config["applications"]
    # the overlay travels inside the file: it runs where that file is not
    assert app["args"]["config"] == {"model": "piper-joe",
                                     "stages": [{"name": "vocoder", "threads": 2}]}
    assert _deployments(config)["vocoder"]["ray_actor_options"]["num_cpus"] == 2
    assert r.stderr.startswith("note: ray-serve cannot express: a pipeline copy on one node")
    assert r.stdout.startswith("# Ray Serve config for piper-joe (variant default)")


def test_an_infeasible_or_unwritable_request_writes_no_file():
    r = run_planner("solve", "qwen3-tts", "--isolate-stage", "preprocessing", "--format",
                    "ray-serve")
    assert (r.returncode, r.stdout) == (1, "")
    assert "error[unsupported-handoff]" in r.stderr
