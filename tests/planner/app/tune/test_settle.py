"""A tie settled by default (`planner.app.tune.settle`): served briefly only where tune profiled
this machine and it is quiet, else left with the reason and the command that settles it; and
what the answer says of a check that ran."""

from __future__ import annotations

import io
import json

import pytest
import yaml
from rich.console import Console

import planner
from planner import Profile, StageProfile
from planner.app.cli.options import ModelChoice
from planner.app.cpu_steal import BurstSpeed, busy_ticks, share_of, ticks_between
from planner.app.tune.options import TuneOptions
from planner.app.tune.settle import CHECK_REQUESTS, CHECK_ROUNDS, QUIET_BUSY, Quiet, check_tie
from planner.tune.answer import Commands, TieCheck
from planner.tune.choose import choose, tied
from planner.tune.model import Workload
from planner.tune.screen import render_answer
from planner.tune.verify import Measured, verdict
from tests.planner.tune.test_verdict import served

FAST = BurstSpeed(1.0, 0.95, 0.0)
CARD = {"name": "tied", "stages": [
    {"name": "gen", "process": "pipeline", "next": "voc", "factory": "launcher.synthetic:stage",
     "args": {"gil_ms": 5}},
    {"name": "voc", "process": "pipeline", "terminal": True, "factory": "launcher.synthetic:stage",
     "args": {"native_ms": 5, "audio_ms": 200}}],
    "process_safe_edges": [["gen", "voc"]]}
# At one client the declared process and the vocoder apart are predicted within a tie.
PROFILE = Profile(model="tied", variant="default", cores=2, cpu_model="test", stages=(
    StageProfile("gen", 5.0, 0.0, 0.0), StageProfile("voc", 0.0, 5.0, 0.0)), frontend_ms=0.5,
    client_ms=0.5)


@pytest.fixture
def card(tmp_path):
    path = tmp_path / "tied.yaml"
    path.write_text(yaml.safe_dump(CARD))
    return path


def tied_choice(card):
    choice = choose(planner.load(config=str(card)), PROFILE, (Workload(concurrency=1),))
    assert tied(choice) == (1,)
    return choice


def tune_for(card, **given) -> TuneOptions:
    return TuneOptions(model=ModelChoice(config=str(card)), concurrency=(1,), **given)


def never(*_):
    raise AssertionError("nothing is served here")


def test_busy_is_the_share_of_cpu_time_not_idle(tmp_path):
    stat = tmp_path / "stat"
    # user nice system idle iowait irq softirq steal
    stat.write_text("cpu  100 0 50 800 10 0 0 40 0 0\n")
    before = busy_ticks(stat)
    assert before == (190, 1000)
    stat.write_text("cpu  130 0 60 950 10 0 0 50 0 0\n")  # 50 ran or were stolen, 150 idle
    assert share_of(ticks_between(before, busy_ticks(stat))) == 50 / 200


@pytest.mark.parametrize("busy, bursts, ok, says", [
    (0.05, FAST, True, None),
    (None, FAST, True, None),  # /proc/stat says nothing: the bursts judge alone
    (QUIET_BUSY + 0.1, FAST, False, "other work kept 25% of its CPUs busy"),
    (0.0, BurstSpeed(0.4, 0.3, 0.2), False, "short bursts of work ran at 40% of full speed"),
])
def test_quiet_enough_is_little_other_work_and_bursts_at_full_speed(busy, bursts, ok, says):
    q = Quiet(busy, bursts)
    assert q.ok is ok
    if says:
        assert says in q.why_not() and q.why_not().startswith("the machine is not quiet")


def test_no_tie_nothing_to_settle(card, tmp_path, monkeypatch):
    choice = choose(planner.load(config=str(card)), PROFILE, (Workload(concurrency=4),))
    assert not tied(choice)
    monkeypatch.setattr("planner.app.tune.verify.serve_two", never)
    assert check_tie(tune_for(card), choice, True, tmp_path, Console(), never) == (None, None)


@pytest.mark.parametrize("profiled_here, given, says", [
    (False, {}, "answered from a saved profile"),
    (True, {"no_verify": True}, "--no-verify was given"),
    (True, {"cores": 8}, "predicted for another machine (--cores 8)"),
])
def test_a_tie_is_not_served_where_tune_did_not_profile_this_machine(
        card, tmp_path, monkeypatch, profiled_here, given, says):
    monkeypatch.setattr("planner.app.tune.verify.serve_two", never)
    check, measured = check_tie(tune_for(card, **given), tied_choice(card), profiled_here,
                                tmp_path, Console(), never)
    assert check == TieCheck(1, False, check.skipped) and says in check.skipped
    assert measured is None


def test_a_busy_machine_leaves_the_tie_with_why(card, tmp_path, monkeypatch):
    monkeypatch.setattr("planner.app.tune.verify.serve_two", never)
    check, _ = check_tie(tune_for(card), tied_choice(card), True, tmp_path, Console(),
                         lambda: Quiet(0.6, FAST))
    assert not check.served and "other work kept 60% of its CPUs busy" in check.skipped


def test_a_quiet_machine_serves_the_pick_and_the_next_briefly(card, tmp_path, monkeypatch):
    asked = []

    def serve_two(tune, choice, pair, output, err):
        asked.append((tune.requests, tune.rounds, pair, output))
        return Measured({0: served(100.0), 1: served(130.0)})

    monkeypatch.setattr("planner.app.tune.verify.serve_two", serve_two)
    choice = tied_choice(card)
    check, measured = check_tie(tune_for(card), choice, True, tmp_path, Console(file=io.StringIO()),
                                lambda: Quiet(0.0, FAST))
    assert asked == [(CHECK_REQUESTS, CHECK_ROUNDS, (0, 1), tmp_path / "check")]
    assert check == TieCheck(1, True, None, CHECK_REQUESTS, CHECK_ROUNDS)
    # the answer says what the check served, and runs what measured better by more than a tie
    judged = verdict(choice, measured)
    buf = io.StringIO()
    render_answer(Console(file=buf, width=100), choice, PROFILE,
                  Commands(("serve", "x", "--isolate-stage", "voc")), measured, judged, check)
    text = " ".join(buf.getvalue().split())
    assert (f"tie checked: served the pick and #2, {CHECK_REQUESTS} requests each per load in "
            f"{CHECK_ROUNDS} interleaved rounds:") in text
    assert "run what measured best" in text
    assert f"run {choice.ranked[1].name}" in text


@pytest.mark.slow
def test_the_check_serves_both_plans_for_real(card, tmp_path):
    choice = tied_choice(card)
    check, measured = check_tie(tune_for(card, requests=6), choice, True, tmp_path,
                                Console(file=io.StringIO()), lambda: Quiet(0.0, FAST))
    assert check.served and check.requests == 6
    assert set(measured.ranked) == {0, 1}
    for rows in measured.ranked.values():
        assert rows[0]["throughput_rps"] > 0 and rows[0]["errors"] == 0
    results = json.loads((tmp_path / "check" / "results.json").read_text())
    assert {r["placement"] for r in results["runs"]} == {"declared", "isolate:voc"}
    assert verdict(choice, measured) is not None


def test_the_settle_command_parses_back_to_the_same_question(card, tmp_path):
    from planner.app.cli import build_parser
    from planner.app.tune.pick import commands

    tune = tune_for(card, objective="latency")
    cmds = commands(tune, PROFILE, tied_choice(card).ranked[0], None, 2,
                    tmp_path / "profile.json")
    args = build_parser().parse_args(list(cmds.settle))
    again = TuneOptions.from_args(args)
    assert again == TuneOptions(model=tune.model, concurrency=(1,), objective="latency",
                                profile=str(tmp_path / "profile.json"), verify=2)
