"""`planner tune`'s answer as a person acts on it: one screen (at most 40 lines at 100 columns)
that names the plan, how sure the model is, the few plans tied with it, why in a few sentences,
and ends with the `planner serve` lines that serve the pick (checked here through the real parser
and solver, and in the slow lane by serving one); the JSON keeps every plan."""

from __future__ import annotations

import io
import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from planner.app.cli import build_parser
from planner.app.tune.command import run_tune
from planner.app.tune.options import TuneOptions
from planner.tune import rate_question
from planner.tune.answer import SHOWN_TIES, how_sure, reasons, rival, shown
from planner.tune.choose import TIE, choose, tied
from planner.tune.model import Workload
from tests.planner.tune.test_model import chain, profile
from tests.processes import interrupt

DATA = Path(__file__).parent / "data"
# Saved by `planner tune piper-joe` on a 2-vCPU machine: whole responses (a throughput
# question's kind) and streamed (a first-audio target's).
PIPER_WHOLE = DATA / "piper-joe-whole.profile.json"
PIPER_STREAMED = DATA / "piper-joe-streamed.profile.json"
SCREEN_LINES, SCREEN_COLUMNS = 40, 100


def options(*argv: str) -> TuneOptions:
    args = build_parser().parse_args(["tune", *argv])
    args.model_path = args.model_path or args.model  # as `planner` takes the positional MODEL
    return TuneOptions.from_args(args)


def screen_lines(text: str) -> int:
    """Lines a 100-column terminal takes to show `text`: a command is printed on one line, for
    pasting, and the terminal wraps it."""
    lines = text.splitlines()
    for line in lines:  # everything else is wrapped to the width by the answer itself
        assert len(line) <= SCREEN_COLUMNS or line.strip().startswith("planner "), line
    return sum(max(1, -(-len(line) // SCREEN_COLUMNS)) for line in lines)


def on_screen(*argv: str) -> tuple[int, str, str]:
    """`planner tune` as a 100-column terminal shows it: exit code, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    screen = Console(file=out, width=SCREEN_COLUMNS, force_terminal=True, color_system=None)
    code = run_tune(options(*argv), screen, Console(file=err, width=SCREEN_COLUMNS))
    return code, out.getvalue(), err.getvalue()


def four():
    pl = chain("a", "b", "c", "d")
    return pl, profile({"a": (2.0, 0.0, 0.0), "b": (6.0, 0.0, 0.0), "c": (3.0, 0.0, 0.0),
                        "d": (1.0, 0.5, 0.0)}, cores=2)


# -- the answer's parts ---------------------------------------------------------------------------
def test_a_tie_shows_a_few_tied_plans_and_the_declared_one_as_yardstick():
    import planner
    from planner.tune.profile import Profile

    choice = choose(planner.load(model_path="piper-joe"), Profile.load(PIPER_WHOLE),
                    (Workload(concurrency=4),), compute=True)
    near = tied(choice)
    assert len(near) > SHOWN_TIES  # the fixture ties more plans than the answer shows
    rows = shown(choice)
    assert rows[0] == 0 and set(near[:SHOWN_TIES]) <= set(rows)
    assert len(rows) <= 1 + SHOWN_TIES + 1
    assert any(not choice.ranked[i].requests for i in rows)  # the declared topology
    assert shown(choice, every=True) == list(range(len(choice.ranked)))
    assert rival(choice) == 1
    assert how_sure(choice).startswith(f"a tie: {len(near)} other plans are predicted within "
                                       f"{TIE:.0%}")


def test_without_a_tie_how_sure_says_how_far_the_next_plan_is():
    pl, prof = chain("a", "b"), profile({"a": (4.0, 0.0, 0.0), "b": (4.0, 0.0, 0.0)}, cores=4)
    choice = choose(pl, prof, (Workload(concurrency=8),))
    assert not tied(choice) and rival(choice) is None
    assert "no other plan within the model's 3% tie band: the next is predicted" in how_sure(
        choice)


@pytest.mark.parametrize("load", [1, 4])
def test_why_is_a_few_short_sentences_that_never_repeat_the_flags(load):
    pl, prof = four()
    choice = choose(pl, prof, (Workload(concurrency=load),), compute=True)
    said = reasons(choice)
    assert 2 <= len(said) <= 3 and all(s.endswith(".") for s in said)
    text = " ".join(said)
    assert len(text) < 400, text
    assert choice.best.name not in text or choice.best.name == "declared"


# -- one screen ------------------------------------------------------------------------------------
def _serve_words(line: str) -> list[str]:
    words = shlex.split(line.strip())
    assert words[:2] == ["planner", "serve"], line
    return words[1:]


def _served_plan(words: list[str], monkeypatch):
    """What `planner serve` would launch for `words`: the real parser, model loading and solver,
    with the launch itself replaced by recording the plan."""
    import planner.app.cli.serve as serve_cli
    from planner.app.cli import main

    plans = []
    monkeypatch.setattr(serve_cli, "_serve_function",
                        lambda: lambda plan, topology, **kw: plans.append(plan) or 0)
    assert main(words) == 0
    (plan,) = plans
    return plan


def _shape(plan):
    return sorted((g.stages, g.copies, tuple(g.cpus)) for g in plan.groups), sorted(
        (s.name, s.threads) for s in plan.stages)


def test_piper_at_c4_fits_one_screen_and_ends_with_the_command_that_serves_the_pick(
        tmp_path, monkeypatch, capsys):
    code, out, err = on_screen("piper-joe", "--concurrency", "4", "--profile", str(PIPER_WHOLE),
                               "--output", str(tmp_path / "o"))
    assert code == 0, err
    lines = (err + out).splitlines()
    assert screen_lines(err + out) <= SCREEN_LINES, out
    assert "how sure: a tie:" in out and "why: " in out
    # a saved profile serves nothing: the answer says which two plans to serve, and how
    assert "tie not served: answered from a saved profile" in out
    settle = next(line for line in lines if line.strip().startswith("planner tune "))
    again = options(*shlex.split(settle)[2:])
    assert again.verify == 2 and again.profile == str(PIPER_WHOLE)
    # the last lines serve the pick: by its flags, and by the file tune wrote
    data = json.loads((tmp_path / "o" / "tune.json").read_text())
    pick = data["candidates"][data["answer"]["run"]]
    assert lines[-3].strip().startswith("planner serve piper-joe --")
    by_flags = _served_plan(_serve_words(lines[-3]), monkeypatch)
    file = tmp_path / "o" / "pick.yaml"
    assert lines[-1].strip() == f"planner serve piper-joe --config {file}"
    by_file = _served_plan(_serve_words(lines[-1]), monkeypatch)
    capsys.readouterr()  # what serve printed of its plans
    want = (sorted((tuple(g["stages"]), g["copies"], tuple(g["cpus"] or ())) for g in
                   pick["groups"]), sorted(pick["threads"].items()))
    assert _shape(by_flags) == _shape(by_file) == want
    assert file.read_text().startswith("# planner tune piper-joe --concurrency 4")
    # every plan is in the JSON, and what the screen said to run
    assert len(data["candidates"]) > len([ln for ln in lines if ln.strip()[:1].isdigit()])
    assert data["answer"]["commands"]["serve"] == _serve_words(lines[-3])


def test_all_lists_every_plan(tmp_path):
    code, out, _ = on_screen("piper-joe", "--concurrency", "4", "--profile", str(PIPER_WHOLE),
                             "--output", str(tmp_path / "o"), "--all")
    assert code == 0
    ranked = json.loads((tmp_path / "o" / "tune.json").read_text())["candidates"]
    rows = [ln for ln in out.splitlines() if ln.strip().split(" ")[0].isdigit()]
    assert len(rows) == len(ranked) and "more plans ranked" not in out


def test_a_declared_pick_needs_no_file_and_an_earlier_one_is_removed(tmp_path):
    from planner import Profile, StageProfile
    from planner.tune.profile import HandoffCost

    # short stages and a dear handoff: the declared one process is the fastest at one client
    prof = tmp_path / "profile.json"
    Profile(model="qwen3-tts", variant="default", cores=2, cpu_model="test", stages=(
        StageProfile("preprocessing", 0.5, 0.0, 0.0), StageProfile("tts_engine", 2.0, 0.0, 0.0),
        StageProfile("vocoder", 2.0, 0.0, 0.0)), frontend_ms=1.0, client_ms=0.5,
        handoff=HandoffCost(5.0, 1.0, 0.05)).save(prof)
    out = tmp_path / "o"
    out.mkdir()
    (out / "pick.yaml").write_text("model: qwen3-tts\n")  # an earlier run's pick
    code, text, _ = on_screen("qwen3-tts", "--profile", str(prof), "--concurrency", "1",
                              "--objective", "latency", "--output", str(out))
    data = json.loads((out / "tune.json").read_text())
    assert code == 0 and data["candidates"][0]["flags"] == []
    assert not (out / "pick.yaml").exists()
    assert text.splitlines()[-1].strip() == "planner serve qwen3-tts"
    assert "no flag needed" in text and data["answer"]["commands"]["serve_file"] is None


def test_the_rate_answer_fits_one_screen_and_ends_with_the_command(tmp_path, monkeypatch,
                                                                    capsys):
    monkeypatch.setattr(rate_question, "RATE_REQUESTS", 150)  # the command's 300, halved
    monkeypatch.setattr(rate_question, "SEEDS", 3)
    code, out, err = on_screen("piper-joe", "--rate", "1", "--ttfa-p99-ms", "800", "--profile",
                               str(PIPER_STREAMED), "--output", str(tmp_path / "o"))
    assert code == 0, err
    lines = (err + out).splitlines()
    assert screen_lines(err + out) <= SCREEN_LINES, out
    assert "how sure: it meets at the high end of its band" in out
    last = next(i for i, ln in enumerate(lines) if ln.strip().startswith("planner serve"))
    plan = _served_plan(_serve_words(lines[last]), monkeypatch)
    capsys.readouterr()
    data = json.loads((tmp_path / "o" / "tune.json").read_text())
    pick = data["rate_question"]["pick"]
    assert len(plan.groups) == len(data["candidates"][data["best"]]["groups"])
    assert data["rate_question"]["commands"]["serve"] == _serve_words(lines[last])
    assert pick["flags"] == data["candidates"][data["best"]]["flags"]
    assert lines[-1].strip().startswith("planner serve piper-joe")


@pytest.mark.slow
def test_the_printed_serve_line_serves_the_pick(tmp_path, qwen3_profile):
    import os
    import re
    import time

    import httpx

    root = str(Path(__file__).resolve().parents[3])
    done = subprocess.run([sys.executable, "-m", "planner", "tune", "qwen3-tts", "--profile",
                           str(qwen3_profile), "--concurrency", "4", "--output",
                           str(tmp_path / "o")], cwd=root, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    line = next(ln for ln in reversed(done.stdout.splitlines())
                if ln.strip().startswith("planner serve qwen3-tts --") and "--config" not in ln)
    words = _serve_words(line)
    proc = subprocess.Popen([sys.executable, "-m", "planner", *words, "--port", "0",
                             "--device", "cpu"], cwd=root, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        deadline, port, seen = time.monotonic() + 300, None, []
        while port is None and time.monotonic() < deadline:
            text = proc.stdout.readline()
            if not text:
                break
            seen.append(text)
            if m := re.search(r"ready: qwen3-tts on http://127\.0\.0\.1:(\d+)", text):
                port = int(m.group(1))
        assert port is not None, "".join(seen[-20:])
        data = json.loads((tmp_path / "o" / "tune.json").read_text())
        pick = data["candidates"][data["answer"]["run"]]
        health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=30).json()
        assert len(health["processes"]) == sum(g["copies"] for g in pick["groups"])
        r = httpx.post(f"http://127.0.0.1:{port}/v1/audio/speech",
                       json={"input": "The pick, served as printed."}, timeout=120)
        assert r.status_code == 200 and len(r.content) > 0
    finally:
        interrupt(proc)


def _choices():
    import planner
    from planner.tune.profile import Profile

    from tests.planner.tune.test_model import HandoffCost

    pl, prof = four()
    torch_like = profile({"pre": (0.05, 0.5, 0.0), "engine": (1.2, 260.0, 0.0),
                          "vocoder": (0.4, 40.0, 0.0)}, cores=2, native_call_ms=0.02,
                         handoff=HandoffCost(0.05, 15.0, 0.014))
    piper = planner.load(model_path="piper-joe")
    yield from (choose(pl, prof, (Workload(concurrency=c),), compute=True) for c in (1, 4))
    yield choose(chain("pre", "engine", "vocoder"), torch_like, (Workload(concurrency=8),))
    for path in (PIPER_WHOLE, PIPER_STREAMED):
        yield choose(piper, Profile.load(path), (Workload(concurrency=4),), compute=True)


def test_why_the_pick_comes_before_its_rival_is_what_the_ranking_did():
    from planner.tune.answer import tie_first
    from planner.tune.choose import RESOLUTION, score

    seen = set()
    for choice in _choices():
        said = tie_first(choice)
        if rival(choice) is None:
            assert said is None
            continue
        best, other = choice.ranked[0], choice.ranked[1]
        s0, s1 = (score(c, choice.objective) for c in (best, other))
        gap = (s0 - s1) / abs(s0)
        if "fixed order" in said:
            assert s0 == s1 and best.processes <= other.processes, said
        elif "by under" in said:
            assert 0 < gap < RESOLUTION, said
        elif "above #2, less than the tie band" in said:
            assert RESOLUTION <= gap <= TIE, said
        elif "more threads" in said:
            assert other.extra_threads > best.extra_threads and gap < RESOLUTION, said
        seen.add(said.split(" ")[0:3].__str__())
    assert len(seen) >= 2  # the cases above exercise more than one reason
