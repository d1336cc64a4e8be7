"""`planner tune`: profile (or read a profile), predict every accepted placement, choose, and
optionally verify the top ones by serving them. The CLI's glue; the parts are pure modules."""

from __future__ import annotations

import json
import time
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

import planner
from planner.app.tune import rate as tune_rate
from planner.app.tune.options import TuneOptions
from planner.app.tune.pick import commands as pick_commands
from planner.app.cli.engine_file import FILE_FORMATS
from planner.app.tune.pick import file_comment, pick_file, write_engine_file, write_pick
from planner.cpus import usable_cpu_ids
from planner.plan import EXIT_INFEASIBLE, EXIT_OK, Plan
from planner.tune.answer import answer_dict, recommended
from planner.tune.report import choice_dict
from planner.tune.choose import choose, why
from planner.tune.screen import render_answer
from planner.tune.model import Workload
from planner.tune.errors import TuneError
from planner.tune.profile import BUSY_SHARE, Profile

if TYPE_CHECKING:
    from rich.console import Console


def workloads(tune: TuneOptions) -> tuple[Workload, ...]:
    out = [Workload(concurrency=c) for c in tune.concurrency or ()]
    out += [Workload(rate=r) for r in tune.rate or ()]
    return tuple(out) or (Workload(concurrency=1), Workload(concurrency=4))


def streamed_question(tune: TuneOptions) -> bool:
    """Whether the question is about streamed responses: one on first audio (a rate with a TTFA
    target, `--objective ttfa`). Throughput and latency are asked of whole responses, as
    `planner bench` sends them unless given --stream."""
    return bool(tune_rate.targets(tune)) or tune.objective == "ttfa"


def profile_kind(tune: TuneOptions, pipeline: planner.Pipeline) -> bool:
    """The request kind to profile (True: streamed): the question's, where the pipeline streams;
    one that does not sends every response whole, so its stages are profiled so."""
    return streamed_question(tune) and any(s.stream_to for s in pipeline.stages)


def _kind_note(profile: Profile, stream: bool, source: str) -> str:
    def kind(streamed: bool) -> str:
        return "streamed responses" if streamed else "whole responses"
    return (f"tune: note: {source} was profiled with {kind(profile.stream)}, and this question "
            f"is about {kind(stream)}; a stage may do different work for each (piper-joe's "
            "acoustic stage cuts only a streamed response into chunks, so first audio comes "
            "early), so the predictions may be of the other kind: drop --profile to profile "
            "the kind asked")


def _profile(tune: TuneOptions, pipeline: planner.Pipeline, err: Console,
             output: Path) -> Profile:
    stream = profile_kind(tune, pipeline)
    if tune.profile:
        try:
            profile = Profile.load(tune.profile)
        except ValueError as exc:
            raise TuneError(str(exc)) from None
        missing = [s for s in pipeline.stage_names if s not in {p.name for p in profile.stages}]
        if profile.model != pipeline.name or missing:
            raise TuneError(
                f"{tune.profile} profiles {profile.model} (stages "
                f"{', '.join(p.name for p in profile.stages)}), not {pipeline.name}"
                + (f" (missing {', '.join(missing)})" if missing else "")
                + "; profile this pipeline with `planner tune` without --profile")
        if profile.stream != stream and any(s.stream_to for s in pipeline.stages):
            err.print(_kind_note(profile, stream, tune.profile))
        return profile
    try:
        from planner.app.profiling import measure
    except ImportError as exc:
        raise TuneError(f"profiling serves the stages and needs the serve extra ({exc.name} is "
                        "missing): `pip install 'stage-planner[serve]'`, or pass --profile FILE "
                        "from another machine") from None
    declared = planner.solve_pipeline(pipeline)
    if not declared.ok:
        raise TuneError(f"the declared topology of {pipeline.name} does not solve: "
                        f"{declared.diagnostics[0].message}")
    from launcher.control.preflight import SetupError, check

    try:
        check(declared.plan)  # e.g. a missing espeak-ng program: one paragraph, not a traceback
    except SetupError as exc:
        raise TuneError(str(exc)) from None
    defaults = {"size": tune.stand_in_size} if tune.stand_in_size else {}
    t0 = time.perf_counter()
    # On a terminal the steps replace each other on one line, so the answer keeps the screen;
    # elsewhere (a log) each is a line.
    with err.status("tune: profiling") if err.is_terminal else nullcontext() as status:
        def progress(message: str) -> None:
            if status is None:
                err.print(f"tune: {message}")
            else:
                status.update(f"tune: {message}")

        profile = measure(declared.plan, requests=tune.profile_requests, device=tune.device,
                          factory_defaults=defaults, seed=tune.seed, progress=progress,
                          served=calibration_plan(pipeline, declared.plan), stream=stream)
    output.mkdir(parents=True, exist_ok=True)
    profile.save(output / "profile.json")
    err.print(f"tune: profiled in {time.perf_counter() - t0:.1f} s -> {output / 'profile.json'}")
    if profile.core_wait_share > BUSY_SHARE:
        err.print(f"tune: note: the stages waited for a CPU core {profile.core_wait_share:.0%} of "
                  "their time while profiled (other work on this machine). That wait is left "
                  "out of their costs, but how much of each stage's CPU time holds the "
                  "interpreter lock is less certain on a busy machine: profile again when it is "
                  "quieter, or check the pick with --verify.")
    return profile


def calibration_plan(pipeline: planner.Pipeline, declared: Plan) -> Plan | None:
    """Where to time the stages served, if not as declared: where stages of one request run at
    once in one process (a streaming edge, parallel branches), each waits for the other's
    interpreter lock there, and its served time says little of its own cost. Then the accepted
    placement with the most processes, which parts them as far as the rules allow (None: no
    placement parts more)."""
    if not declared.overlapping_stages():
        return None
    try:
        most = max(planner.feasible_placements(pipeline), key=lambda f: f.plan.process_count())
    except planner.TooManyPlacements:
        return None
    return most.plan if most.plan.process_count() > declared.process_count() else None


def run_tune(tune: TuneOptions, out: Console, err: Console) -> int:
    model = tune.model
    pipeline = planner.load(model_path=model.model_path, config=model.config,
                            variant=model.variant)
    output = Path(tune.output or f"tune-results/{pipeline.name}")
    if output.exists() and not output.is_dir():
        raise TuneError(f"--output {output} is a file; give a directory (it gets profile.json, "
                        "tune.json and the pick's pick.yaml)")
    rate_question = bool(tune_rate.targets(tune))
    tune_rate.check(tune, pipeline.name)
    profile = _profile(tune, pipeline, err, output).at_cpu_speed(tune.cpu_speed)
    bursts = None
    if rate_question:  # tails at a light load are where a shared host's CPUs show
        from planner.app.cpu_steal import burst_speed

        bursts = burst_speed()
        if bursts.slow:
            err.print(f"tune: note: {bursts.note()}")
    # Pins name this machine's CPUs; predicting for another number of cores, 0 to cores - 1.
    cpu_ids = None if tune.cores else usable_cpu_ids()
    try:
        if rate_question:  # every plan kept: the targets, latency's too, judge them banded
            choice = choose(pipeline, profile, (tune_rate.workload(tune),), "ttfa",
                            max_processes=tune.max_processes, cores=tune.cores,
                            compute=not tune.placements_only, cpu_ids=cpu_ids)
        else:
            choice = choose(pipeline, profile, workloads(tune), tune.objective,
                            slo_p99_ms=tune.slo_p99_ms, max_processes=tune.max_processes,
                            cores=tune.cores, compute=not tune.placements_only,
                            cpu_ids=cpu_ids)
    except planner.TooManyPlacements as exc:
        raise TuneError(f"{exc}; tune enumerates every placement, so it needs fewer movable "
                        "stages (fuse some with fused_stages)") from None
    reason = why(choice)
    measured = judged = check = None
    if tune.verify and not rate_question:  # a rate question serves its own plans, below
        from planner.app.tune.verify import verify

        measured = verify(tune, choice, tune.verify, err)
    elif not rate_question:
        from planner.app.tune.settle import check_tie

        check, measured = check_tie(tune, choice, not tune.profile, output, err)
    if measured is not None:
        from planner.tune.verify import verdict

        judged = verdict(choice, measured)
    result = choice_dict(choice, profile, reason, measured, judged)
    result["cpu_speed"] = tune.cpu_speed  # what the predictions take the CPUs' speed to be
    answer = tune_rate.ask(choice, profile, tune_rate.targets(tune)) if rate_question else None
    verified = None
    if answer is not None:
        result = tune_rate.finish(answer, choice, result, profile, tune)
        result["rate_question"]["cpu_bursts_now"] = bursts.as_dict() if bursts else None
        if tune.verify:
            verified = tune_rate.verify(tune, answer, output, err)
            result["rate_question"]["verified"] = tune_rate.verified_dict(tune, verified)
        pick = answer.pick.candidate if answer.pick is not None else None
    else:
        pick = recommended(choice, judged)
    try:
        output.mkdir(parents=True, exist_ok=True)
        file = pick_file(output, tune, pick)
        if answer is None:  # a tie left unsettled: the top that many served settle it
            settle = None if check is None or check.served else check.rival + 1
        else:  # the pick and the cheaper plan, served at the rate
            settle = 1 if answer.met and not tune.verify else None
        commands = pick_commands(tune, profile, pick, file, settle,
                                 Path(tune.profile) if tune.profile else output / "profile.json")
        write_pick(output, file, profile, pick, () if commands is None or pick is None else
                   file_comment(tune, profile, pick, commands))
        if answer is None:
            result["answer"] = answer_dict(choice, commands, check, judged)
        else:
            result["rate_question"]["commands"] = tune_rate.commands_dict(commands)
        (output / "tune.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        raise TuneError(f"cannot write to --output {output}: {exc.strerror}") from None
    engine = tune.format in FILE_FORMATS
    screen = err if engine else out  # stdout is the engine's file then
    if tune.format == "json":
        print(json.dumps(result, indent=2))
    elif answer is not None:
        tune_rate.render(screen, answer, profile, tune, verified, commands,
                         str(output / "tune.json"))
    else:
        render_answer(screen, choice, profile, commands, measured, judged, check, tune.show_all,
                      str(output / "tune.json"))
    if engine and pick is not None:
        write_engine_file(tune, pipeline, pick, output, err)
    # Nothing meets the constraints: infeasible (1), as `planner solve` says of a request no
    # placement satisfies; bad input is 2.
    met = answer.met if answer is not None else choice.best is not None
    return EXIT_OK if met else EXIT_INFEASIBLE
