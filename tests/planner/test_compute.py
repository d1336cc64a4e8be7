"""Threads per stage and copies per process group: resolved from flags and configs, checked
against the node's CPUs by the solver, shown by `solve`, and each diagnostic's fix removes it."""

from __future__ import annotations

import json
import os

import pytest

import planner
from planner.plan import Copies, Threads
from tests.cli import run_planner

ENV = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}


def solve(*requests, cpus=2, isolate=(), config=None, model="piper-joe"):
    return planner.solve(model if config is None else None, config=config,
                         isolate_stages=list(isolate), requests=list(requests), cpus=cpus)


# -- resolved into the plan -------------------------------------------------------------------------
def test_flags_place_threads_per_stage_and_copies_per_group():
    r = solve(Threads("vocoder", 2), Copies("vocoder", 1), Threads("acoustic", 1),
              isolate=["vocoder"], cpus=4)
    assert r.ok, r.diagnostics
    assert {s.name: s.threads for s in r.plan.stages} == {"frontend": 1, "acoustic": 1, "vocoder": 2}
    assert [(g.name, g.copies) for g in r.plan.groups] == [("pipeline", 1), ("vocoder", 1)]
    assert r.changed


def test_a_stage_name_selects_the_group_that_holds_it():
    r = solve(Copies("vocoder", 2))  # declared: vocoder runs in process `pipeline`
    assert r.ok, r.diagnostics
    assert [(g.name, g.copies) for g in r.plan.groups] == [("pipeline", 2)]
    assert r.plan.process_count() == 2
    assert r.plan.group_of("vocoder").copy_names() == ("pipeline.0", "pipeline.1")


def test_a_config_declares_them_and_a_flag_overrides_it():
    config = {"model": "piper-joe", "processes": {"vocoder": {"copies": 2}},
              "stages": [{"name": "vocoder", "process": "vocoder", "threads": 1},
                         {"name": "acoustic", "threads": 2}]}
    r = solve(config=config)
    assert r.ok, r.diagnostics
    assert r.plan.stage("acoustic").threads == 2 and r.plan.group_of("vocoder").copies == 2
    r = solve(Copies("vocoder", 1), config=config)
    assert r.ok and r.plan.group_of("vocoder").copies == 1


def test_copies_of_a_process_no_stage_runs_in_have_no_effect():
    r = solve(config={"model": "piper-joe", "processes": {"vocoder": {"copies": 2}}})
    assert r.ok and [g.copies for g in r.plan.groups] == [1]


# -- request and config errors (exit 2) --------------------------------------------------------------
@pytest.mark.parametrize("request_, culprit", [
    (Threads.parse("vocoder=0"), "asks for 0 threads"),
    (Threads.parse("vocoder=-3"), "asks for -3 threads"),
    (Threads.parse("vocoder=two"), "not a whole number"),
    (Threads.parse("vocoder=99999"), "asks for 99999 threads"),
    (Threads.parse("vocoder"), "is not STAGE=N"),
    (Threads.parse("no_such=2"), "neither a stage nor a role"),
    (Copies.parse("pipeline=0"), "asks for 0 copies"),
    (Copies.parse("pipeline=100000"), "asks for 100000 copies"),
    (Copies.parse("nowhere=2"), "neither a process group nor a stage"),
])
def test_bad_requests_are_one_paragraph_with_a_hint(request_, culprit):
    r = solve(request_)
    assert r.status == "error" and r.exit_code == 2
    (d,) = r.diagnostics
    assert culprit in d.message and d.hint.startswith(("write it as", "name one"))


def test_a_value_set_twice_is_a_request_error():
    r = solve(Threads("vocoder", 1), Threads("vocoder", 2))
    assert r.exit_code == 2 and "a second time" in r.diagnostics[0].message


def test_copies_of_a_tensor_parallel_stage_are_refused():
    r = planner.solve("ming-omni-tts", variant="tp2", requests=[Copies("tts_engine", 2)], cpus=8)
    assert r.exit_code == 2 and "tensor-parallel" in r.diagnostics[0].message


@pytest.mark.parametrize("layer, key", [
    ({"stages": [{"name": "vocoder", "threads": 0}]}, "stages[name=vocoder].threads"),
    ({"stages": [{"name": "vocoder", "threads": True}]}, "stages[name=vocoder].threads"),
    ({"processes": {"pipeline": {"copies": "2"}}}, "processes.pipeline.copies"),
    ({"processes": {"pipeline": {"replicas": 2}}}, "processes.pipeline"),
    ({"processes": [1]}, "processes"),
])
def test_bad_config_values_name_their_key(layer, key):
    r = solve(config={"model": "piper-joe", **layer})
    assert r.exit_code == 2 and key in r.diagnostics[0].message


# -- the CPU rule (exit 1), its hint, and the warning --------------------------------------------------
@pytest.mark.parametrize("requests, isolate", [
    ((Threads("vocoder", 3),), ()),
    ((Threads("vocoder", 2), Copies("vocoder", 2)), ("vocoder",)),
    ((Copies("pipeline", 3),), ()),
])
def test_what_cannot_run_at_once_is_over_cpus_and_its_fix_fits(requests, isolate):
    r = solve(*requests, isolate=isolate, cpus=2)
    assert r.status == "infeasible" and r.exit_code == 1
    (d,) = r.diagnostics
    assert d.code == "over-cpus" and "the node has 2 CPUs" in d.because and d.hint
    fixed = solve(*d.fix.applied(requests), isolate=isolate, cpus=2)
    assert fixed.ok, fixed.diagnostics
    # The fix keeps what it can of the request: copies stay when threads can shrink.
    asked = {type(q): q.count for q in requests}
    got = {type(q): q.count for q in d.fix.applied(requests)}
    if Copies in asked and Threads in asked:
        assert got[Copies] == asked[Copies]


def test_the_rule_follows_placement():
    # Three one-thread copies of the vocoder do not fit two CPUs...
    assert solve(Copies("vocoder", 3), isolate=["vocoder"]).status == "infeasible"
    # ...and the same copies of a two-thread stage fit eight.
    assert solve(Copies("vocoder", 3), Threads("vocoder", 2), isolate=["vocoder"], cpus=8).ok


def test_oversubscription_is_a_warning_only_when_compute_was_asked():
    declared = solve(cpus=2)
    assert declared.ok and not declared.warnings  # three one-thread stages on two CPUs
    assert declared.plan.cpu.threads == 3 and declared.plan.cpu.oversubscribed
    asked = solve(Copies("vocoder", 2), isolate=["vocoder"], cpus=2)
    assert asked.ok and [w.code for w in asked.warnings] == ["cpu-oversubscribed"]
    assert asked.plan.cpu.threads == 4


def test_a_cluster_counts_against_its_largest_node():
    cluster = planner.load_cluster if hasattr(planner, "load_cluster") else None
    from planner.api import solve_replicas
    from planner.cluster import from_dict

    small = from_dict({"nodes": [{"name": "a", "gpus": 0, "cpus": 2}]}, "test")
    big = from_dict({"nodes": [{"name": "a", "gpus": 0, "cpus": 2},
                               {"name": "b", "gpus": 0, "cpus": 16}]}, "test")
    pl = planner.load("piper-joe")
    asked = [Threads("vocoder", 4)]
    assert solve_replicas(pl, small, 1, requests=asked).status == "infeasible"
    result = solve_replicas(pl, big, 1, requests=asked)
    assert result.ok and result.packing.demand.cpus == 4  # the widest stage of its one copy
    assert cluster is None or callable(cluster)


# -- GPU memory counts every copy -----------------------------------------------------------------------
def test_each_copy_takes_its_fraction_again():
    r = planner.solve("qwen3-tts", isolate_stages=["vocoder"], cpus=64,
                      requests=[Copies("vocoder", 12)])
    assert r.status == "infeasible"
    (d,) = r.diagnostics
    assert d.code == "over-limit" and "12 copies" in " ".join(d.because)
    fixed = planner.solve("qwen3-tts", isolate_stages=["vocoder"], cpus=64,
                          requests=[Copies("vocoder", 12)], config={
                              "model": "qwen3-tts", **d.fix.config})
    assert fixed.ok, fixed.diagnostics
    assert fixed.plan.gpus[0].total <= 1.0


# -- shown by solve --------------------------------------------------------------------------------------
def test_solve_shows_threads_and_copies_in_table_json_and_dot():
    flags = ("solve", "piper-joe", "--isolate-stage", "vocoder", "--stage-threads",
             "vocoder=1", "--process-copies", "vocoder=2")
    table = run_planner(*flags, env=ENV, in_process=True, timeout=60)
    assert table.returncode == 0, table.stderr
    assert "threads" in table.stdout and "copies" in table.stdout
    assert "CPU threads: 4 on" in table.stdout
    data = json.loads(run_planner(*flags, "--format", "json", env=ENV, in_process=True,
                                  timeout=60).stdout)
    assert [(g["name"], g["copies"]) for g in data["groups"]] == [("pipeline", 1), ("vocoder", 2)]
    assert {s["name"]: s["threads"] for s in data["stages"]}["vocoder"] == 1
    assert data["cpu"]["threads"] == 4
    dot = run_planner(*flags, "--format", "dot", env=ENV, in_process=True, timeout=60).stdout
    assert "vocoder (CPU) x2 copies" in dot


def test_bad_flags_exit_2_and_over_cpus_exits_1_from_the_command_line():
    bad = run_planner("solve", "piper-joe", "--stage-threads", "vocoder=0", env=ENV,
                      in_process=True, timeout=60)
    assert bad.returncode == 2 and "hint:" in bad.stdout + bad.stderr
    huge = run_planner("solve", "piper-joe", "--stage-threads", f"vocoder={os.cpu_count() + 1}",
                       env=ENV, in_process=True, timeout=60)
    assert huge.returncode == 1 and "over-cpus" in huge.stdout + huge.stderr


# -- what counts as a change ----------------------------------------------------------------------
def test_threads_and_copies_from_flags_count_as_changes_and_a_flag_that_changes_nothing_does_not():
    assert solve(Threads("vocoder", 2), cpus=4).changed
    r = solve(Copies("pipeline", 2), cpus=4)
    assert r.changed and r.plan.groups[0].changed
    same = solve(Threads("vocoder", 1), Copies("pipeline", 1))
    assert same.ok and not same.changed and not same.plan.groups[0].changed


def test_an_overlay_that_only_sets_copies_is_the_configs_layout_not_the_cards(tmp_path):
    # As tune prints it: the summary says the config's copies are in force, not "as the card".
    cfg = tmp_path / "copies.yaml"
    cfg.write_text("model: piper-joe\nprocesses: {pipeline: {copies: 2}}\n")
    out = run_planner("solve", "--config", str(cfg), env=ENV, in_process=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "ok - as your config declares, no flag changed it" in out.stdout.splitlines()[0]
    assert planner.solve(config=str(cfg), cpus=4).declared_by == "config"
    flagged = run_planner("solve", "--config", str(cfg), "--process-copies", "pipeline=1",
                          env=ENV, in_process=True, timeout=60)
    assert "changed by flags from the topology your config declares" in flagged.stdout
    # Copies of a process no stage runs in change nothing: still the card's layout.
    idle = {"model": "piper-joe", "processes": {"vocoder": {"copies": 2}}}
    assert planner.solve(config=idle, cpus=4).declared_by == "card"
