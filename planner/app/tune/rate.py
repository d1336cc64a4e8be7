"""`planner tune --rate R --ttfa-p99-ms X`: the command's side of a rate question (which flags
ask it, what is refused, what it prints and returns); the question itself is
`planner.tune.rate_question`, pure."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from planner.app.tune.options import TuneOptions
from planner.app.tune.pick import model_words
from planner.tune.answer import Commands
from planner.tune.choose import Choice
from planner.tune.errors import TuneError
from planner.tune.profile import Profile
from planner.tune import rate_question
from planner.tune.rate_question import RateAnswer, Target, answer
from planner.tune.workload import Workload

if TYPE_CHECKING:
    from rich.console import Console

    from planner.tune.rate_verify import RateVerdict

TTFA_FLAGS = {q: TuneOptions.flag(f"ttfa_p{q}_ms") for q in (50, 90, 99)}


def targets(tune: TuneOptions) -> tuple[Target, ...]:
    """The first-audio targets asked (none: not a rate question), with --slo-p99-ms as a latency
    target beside them."""
    ttfa = tuple(Target("ttfa", q, v) for q in TTFA_FLAGS
                 if (v := getattr(tune, f"ttfa_p{q}_ms", None)) is not None)
    if not ttfa:
        return ()
    slo = (Target("latency", 99, tune.slo_p99_ms),) if tune.slo_p99_ms is not None else ()
    return ttfa + slo


def check(tune: TuneOptions, model: str) -> None:
    """A first-audio target is asked of one open-loop rate: anything else is refused before
    profiling (exit 2), with the command that asks it."""
    given = [t for t in targets(tune) if t.metric == "ttfa"]
    if not given:
        return
    asked = [TTFA_FLAGS[t.percentile] for t in given]
    example = f"`planner tune {model} --rate 2 {asked[0]} {given[0].ms:g}`"
    if tune.concurrency:
        raise TuneError(
            f"{' and '.join(asked)} asks for the cheapest plan that meets a first-audio target "
            "under an open-loop rate (requests arriving on their own, as users send them), but "
            f"--concurrency {tune.concurrency[0]} is a closed loop, whose clients wait for each "
            f"answer; drop --concurrency and give the rate, e.g. {example}")
    if not tune.rate:
        raise TuneError(
            f"{' and '.join(asked)} is a target at a load, and no load was given: add the "
            f"open-loop rate to meet it at, in requests per second, e.g. {example}")
    if len(tune.rate) > 1:
        raise TuneError(
            f"{' and '.join(asked)} is answered for one rate, and --rate was given "
            f"{len(tune.rate)} times ({', '.join(f'{r:g}' for r in tune.rate)}); ask once per "
            f"rate, e.g. {example}")


def workload(tune: TuneOptions) -> Workload:
    return Workload(rate=tune.rate[0], requests=rate_question.RATE_REQUESTS, seed=tune.seed)


def ask(choice: Choice, profile: Profile, asked: tuple[Target, ...]) -> RateAnswer:
    return answer(choice.ranked, profile, choice.workloads[0], asked, choice.cores)


def finish(answer_: RateAnswer, choice: Choice, result: dict[str, Any], profile: Profile,
           tune: TuneOptions) -> dict[str, Any]:
    """tune's JSON with the rate question's answer, and its pick as what to run (`best`: its
    index into `candidates`, which stay in the ranking's order)."""
    from planner.tune.rate_report import rate_dict
    from planner.tune.report import persist_dict

    pick = answer_.pick.candidate if answer_.pick is not None else None
    best = next((i for i, c in enumerate(choice.ranked) if c is pick), None)
    return {**result, "objective": "cheapest meeting the targets", "best": best,
            "persist": persist_dict(profile, pick),
            "rate_question": rate_dict(answer_, model_words(tune, profile))}


def verify(tune: TuneOptions, answer_: RateAnswer, output: Path,
           err: Console) -> RateVerdict:
    """--verify K: serve the pick, the cheaper plan and K - 1 more finalists at the rate."""
    from planner.app.tune.rate_verify import verify as serve

    return serve(tune, answer_, output, err)


def verified_dict(tune: TuneOptions, verdict: RateVerdict) -> dict[str, Any]:
    from planner.app.tune.rate_verify import requests
    from planner.tune.rate_report import verified_dict as as_dict

    return as_dict(verdict, requests(tune))


def commands_dict(commands: Commands | None) -> dict[str, Any] | None:
    """What to run, as tune.json's `rate_question.commands` (None: no pick)."""
    return None if commands is None else commands.as_dict(settle_key="check")


def render(console: Console, answer_: RateAnswer, profile: Profile, tune: TuneOptions,
           verified: RateVerdict | None, commands: Commands | None,
           results: str = "tune.json") -> None:
    """The answer, what serving measured (with --verify), then the commands."""
    from planner.tune.rate_report import rate_commands, render_rate

    render_rate(console, answer_, profile, tune.show_all, results)
    if verified is not None:
        from planner.app.tune.rate_verify import requests
        from planner.tune.rate_report import render_verified

        render_verified(console, verified, requests(tune))
    rate_commands(console, answer_, model_words(tune, profile), commands)
