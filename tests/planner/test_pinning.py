"""CPUs per process group (`--process-cpus`, `processes: {NAME: {cpus: ...}}`): read as taskset
reads a CPU list, resolved onto the plan's groups, refused with a hint where a pinned group's
stage has more threads than CPUs, and shown by `solve` only where a plan pins."""

from __future__ import annotations

import json
import os

import pytest

import planner
from planner.flags import flag
from planner.plan import Pin, ProcessGroup, Threads, cpu_list, cpu_text
from planner.render.dicts import request_dict, request_from_dict
from tests.cli import run_planner

ENV = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}


def solve(*requests, isolate=(), config=None, cpus=4):
    return planner.solve(None if config else "piper-joe", config=config,
                         isolate_stages=list(isolate), requests=list(requests), cpus=cpus)


@pytest.mark.parametrize("text, cpus", [("0", (0,)), (" 3 ", (3,)), ("0-2,5", (0, 1, 2, 5)),
                                        ("4,1-2", (1, 2, 4)), ("1,1", (1,))])
def test_a_cpu_list_reads_as_taskset_reads_it_and_writes_back_short(text, cpus):
    assert cpu_list(text) == cpus
    assert cpu_list(cpu_text(cpus)) == cpus


@pytest.mark.parametrize("text", ["", "x", "2-1", "-1", "0,,1", "1-", "0.5", "0-99999"])
def test_what_is_not_a_cpu_list_is_none(text):
    assert cpu_list(text) is None


def test_a_pin_goes_on_its_group_and_every_other_group_is_left_to_the_os():
    r = solve(Pin.parse("vocoder=1"), isolate=["vocoder"])
    assert r.ok, r.diagnostics
    assert [(g.name, g.cpus) for g in r.plan.groups] == [("pipeline", ()), ("vocoder", (1,))]
    assert flag(Pin("vocoder", (0, 1, 3))) == "--process-cpus vocoder=0-1,3"
    assert request_from_dict(request_dict(Pin("vocoder", (0, 2)))) == Pin("vocoder", (0, 2))


def test_a_config_declares_them_and_a_flag_overrides_it():
    config = {"model": "piper-joe", "processes": {"pipeline": {"cpus": "0-1"}}}
    r = solve(config=config)
    assert r.ok, r.diagnostics
    assert r.plan.groups[0].cpus == (0, 1)
    r = solve(Pin.parse("acoustic=1"), config=config)  # a stage names the group holding it
    assert r.ok and r.plan.groups[0].cpus == (1,)


@pytest.mark.parametrize("request_, culprit", [
    (Pin.parse("vocoder=x"), "is not PROCESS=CPUS"),
    (Pin.parse("vocoder"), "is not PROCESS=CPUS"),
    (Pin.parse("nope=0"), "names 'nope', which is neither a process group nor a stage"),
])
def test_bad_pins_are_one_paragraph_with_a_hint(request_, culprit):
    r = solve(request_)
    assert r.status == "error"
    d = r.diagnostics[0]
    assert d.code == "invalid-compute" and culprit in d.message and d.hint


def test_a_group_pinned_twice_is_a_request_error():
    r = solve(Pin.parse("pipeline=0"), Pin.parse("vocoder=1"))
    assert r.status == "error" and "a second time" in r.diagnostics[0].message


def test_a_stage_with_more_threads_than_its_pinned_cpus_is_refused_and_the_hint_fits():
    r = solve(Threads("vocoder", 2), Pin.parse("vocoder=0"), isolate=["vocoder"])
    assert r.status == "error"
    d = r.diagnostics[0]
    assert d.message == ("process vocoder cannot run vocoder's threads at once on the CPUs it is "
                         "pinned to")
    assert d.because == ("`--process-cpus vocoder=0` pins process vocoder to CPU 0",
                         "`--stage-threads vocoder=2` gives vocoder 2 threads")
    assert d.hint == ("pin it to 2 CPUs: replace `--process-cpus vocoder=0` with "
                      "`--process-cpus vocoder=0-1`; or give vocoder fewer threads: replace "
                      "`--stage-threads vocoder=2` with `--stage-threads vocoder=1`")
    asked = (Threads("vocoder", 2), Pin.parse("vocoder=0"))
    for fix in d.fix.choices:
        assert solve(*fix.applied(asked), isolate=["vocoder"]).ok


def test_copies_of_a_pinned_group_each_run_on_their_share_of_its_cpus():
    r = solve(planner.plan.Copies("vocoder", 2), Pin.parse("vocoder=0"), isolate=["vocoder"])
    assert r.status == "error" and "in every copy" in r.diagnostics[0].message
    assert ("`--process-copies vocoder=2` runs 2 copies of process vocoder, each on its share "
            "of them" in r.diagnostics[0].because)
    r = solve(planner.plan.Copies("vocoder", 2), Pin.parse("vocoder=0-1"), isolate=["vocoder"])
    group = r.plan.group_of("vocoder")
    assert r.ok and group.cpus == (0, 1) and group.copy_cpus() == ((0,), (1,))


@pytest.mark.parametrize(("cpus", "copies", "shares"), [
    ((0, 1, 2, 3), 2, ((0, 1), (2, 3))),
    ((2, 5, 7), 2, ((2,), (5, 7))),  # uneven: in order, the later copies take the extra CPU
    ((0, 1), 1, ((0, 1),)),
    ((), 3, ((), (), ())),  # not pinned: every copy where the OS puts it
])
def test_a_pinned_groups_cpus_are_cut_in_order_into_one_share_per_copy(cpus, copies, shares):
    group = ProcessGroup("vocoder", ("vocoder",), None, copies=copies, cpus=cpus)
    assert group.copy_cpus() == shares


def test_a_bad_config_value_names_its_key():
    with pytest.raises(planner.ConfigError) as e:
        planner.load(config={"model": "piper-joe", "processes": {"pipeline": {"cpus": "a-b"}}})
    assert "processes.pipeline.cpus" in str(e.value)


def test_solve_shows_the_cpus_column_only_for_a_plan_that_pins():
    flags = ("solve", "piper-joe", "--isolate-stage", "vocoder", "--process-cpus", "vocoder=1")
    table = run_planner(*flags, env=ENV, in_process=True, timeout=60)
    assert table.returncode == 0, table.stderr
    header = next(line for line in table.stdout.splitlines() if "process" in line and "copies" in line)
    assert "CPUs" in header
    plain = run_planner("solve", "piper-joe", env=ENV, in_process=True, timeout=60)
    assert "CPUs " not in next(line for line in plain.stdout.splitlines() if "copies" in line)
    data = json.loads(run_planner(*flags, "--format", "json", env=ENV, in_process=True,
                                  timeout=60).stdout)
    assert [(g["name"], g["cpus"]) for g in data["groups"]] == [("pipeline", None),
                                                                 ("vocoder", [1])]
    bad = run_planner("solve", "piper-joe", "--process-cpus", "pipeline=one", env=ENV,
                      in_process=True, timeout=60)
    assert bad.returncode == 2 and "hint:" in bad.stdout + bad.stderr


@pytest.mark.skipif(len(planner.allowed_cpus() or ()) < 2,
                    reason="pins two copies one CPU each: this machine lets the planner use fewer "
                           "than two CPUs")
def test_solve_shows_each_copys_share_of_a_pinned_groups_cpus():
    a, b = planner.allowed_cpus()[:2]
    flags = ("solve", "piper-joe", "--process-copies", "pipeline=2", "--process-cpus",
             f"pipeline={a},{b}")
    table = run_planner(*flags, env=ENV, in_process=True, timeout=60)
    row = next(line for line in table.stdout.splitlines() if "frontend" in line)
    assert table.returncode == 0 and f"{a} | {b}" in row, table.stdout + table.stderr
    data = json.loads(run_planner(*flags, "--format", "json", env=ENV, in_process=True,
                                  timeout=60).stdout)
    assert [(g["cpus"], g["copy_cpus"]) for g in data["groups"]] == [([a, b], [[a], [b]])]


# -- a pin to a CPU the node lacks is a rule `solve` checks (exit 1), as `serve` refuses it --
def test_a_pin_to_a_cpu_the_node_lacks_is_refused_with_a_pin_it_has():
    r = solve(Pin.parse("pipeline=5"), cpus=2)
    assert r.status == "infeasible" and r.exit_code == 1
    (d,) = r.diagnostics
    assert d.code == "pin-outside-node"
    assert d.because == ("`--process-cpus pipeline=5` pins process pipeline to CPU 5",
                         "the node has CPUs 0-1")
    assert d.hint == ("pin it to CPUs the node has: replace `--process-cpus pipeline=5` with "
                      "`--process-cpus pipeline=0`")
    fixed = solve(*d.fix.applied((Pin.parse("pipeline=5"),)), cpus=2)
    assert fixed.ok and fixed.plan.groups[0].cpus == (0,)


def test_the_node_is_this_machine_unless_told_and_a_config_pin_is_checked_too():
    here = planner.allowed_cpus() or tuple(range(os.cpu_count() or 1))
    beyond = max(here) + 1
    r = planner.solve("piper-joe", requests=[Pin("pipeline", (beyond,))])
    assert r.status == "infeasible" and r.diagnostics[0].code == "pin-outside-node"
    assert planner.solve("piper-joe", requests=[Pin("pipeline", (here[0],))]).ok
    # A node named by its CPUs (a container allowed 2-3 of them): a pin must name those.
    assert planner.solve("piper-joe", requests=[Pin("pipeline", (3,))], cpus=(2, 3)).ok
    assert not planner.solve("piper-joe", requests=[Pin("pipeline", (0,))], cpus=(2, 3)).ok
    config = {"model": "piper-joe", "processes": {"pipeline": {"cpus": "7"}}}
    (d,) = solve(config=config, cpus=2).diagnostics
    assert d.because[0] == "your config pins process pipeline to CPU 7"
    assert d.fix.add == (Pin("pipeline", (0,)),) and solve(*d.fix.add, config=config, cpus=2).ok


def test_a_pin_to_a_cpu_the_machine_lacks_exits_1_from_the_command_line():
    beyond = max(planner.allowed_cpus() or (os.cpu_count() or 1,)) + 1
    out = run_planner("solve", "piper-joe", "--process-cpus", f"pipeline={beyond}", env=ENV,
                      in_process=True, timeout=60)
    assert out.returncode == 1 and "error[pin-outside-node]" in out.stdout
    assert "hint: pin it to CPUs the node has" in out.stdout


def test_a_pin_counts_as_a_change():
    r = solve(Pin.parse("pipeline=0"))
    assert r.ok and r.changed and r.plan.groups[0].changed
    data = json.loads(run_planner("solve", "piper-joe", "--process-cpus", "pipeline=0",
                                  "--format", "json", env=ENV, in_process=True, timeout=60).stdout)
    assert data["changed"] is True and data["groups"][0]["changed"] is True
