"""What `planner tune` tells its user to run: the pick written as a file that `planner serve MODEL
--config FILE` takes (`pick.yaml`, beside tune.json), and the command lines that serve it, by its
flags and by that file, and that settle a tie (`planner.tune.answer.Commands`).

The file is the planner's own overlay on the card (`planner.tune.report.overlay_yaml`); with
`--format sglang-omni|vllm-omni|ray-serve` the pick is also written as that engine's file
(`pick.FORMAT.yaml` beside it, and on stdout), by the writers `planner solve --format` uses."""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Sequence
from pathlib import Path

from planner.app.cli.engine_file import engine_file, notes, save
from planner.app.cli.options import ModelChoice
from planner.app.tune.options import TuneOptions
from planner.flags import flag_words
from planner.tune.answer import Commands
from planner.tune.choose import Candidate
from planner.tune.errors import TuneError
from planner.tune.profile import Profile
from planner.tune.report import overlay_yaml, persistent_overlay, persistent_processes

PICK_FILE = "pick.yaml"


def pick_file(output: Path, tune: TuneOptions, pick: Candidate | None) -> Path | None:
    """Where the pick's file goes; None where no file is needed (the declared topology, or
    nothing picked) or none can say it (the pipeline is the user's own YAML, which one --config
    cannot overlay again)."""
    if pick is None or not pick.requests or tune.model.config:
        return None
    return output / PICK_FILE


def write_pick(output: Path, file: Path | None, profile: Profile, pick: Candidate | None,
               comment: Sequence[str] = ()) -> None:
    """Write `pick` as an overlay on its card to `file` (`pick_file`), headed by `comment`;
    with no file, an earlier run's in `output` is removed, so it cannot be served by mistake."""
    path = file or output / PICK_FILE
    try:
        if file is None or pick is None:
            path.unlink(missing_ok=True)
            return
        body = overlay_yaml(profile.model, profile.variant,
                            persistent_overlay(pick.plan, pick.requests),
                            persistent_processes(pick.plan))
        path.write_text("".join(f"# {line}\n" for line in comment) + body + "\n",
                        encoding="utf-8")
    except OSError as exc:
        raise TuneError(f"cannot write {path}: {exc.strerror}; give another --output") from None


def file_comment(tune: TuneOptions, profile: Profile, pick: Candidate,
                 commands: Commands) -> list[str]:
    """The head of the pick's file: what picked it, and how to serve it."""
    return [f"{shlex.join(['planner', *asked(tune, profile)])} picked {pick.name}",
            f"serve it: {shlex.join(['planner', *commands.serve_file])}"]


def asked(tune: TuneOptions, profile: Profile) -> list[str]:
    """The `planner tune` command as its user typed it (its defaults left out)."""
    return ["tune", *model_words(tune, profile),
            *dataclasses.replace(tune, model=ModelChoice()).given_argv()]


def model_words(tune: TuneOptions, profile: Profile) -> list[str]:
    """How `planner serve` names the pipeline tune was asked about: the card by name (its
    variant if not the default), or the user's YAML as given."""
    model = tune.model
    if model.config:
        return ModelChoice(model_path=model.model_path, config=model.config,
                           variant=model.variant).given_argv()
    variant = profile.variant if profile.variant != "default" else None
    return [profile.model, *ModelChoice(variant=variant).given_argv()]


def commands(tune: TuneOptions, profile: Profile, pick: Candidate | None, file: Path | None,
             settle_top: int | None, profile_path: Path) -> Commands | None:
    """The command lines (without `planner`) that serve `pick` by its flags and by `file`, and,
    with `settle_top` (a tie left unsettled), the `planner tune` that serves the top that many
    plans from the same profile to settle it."""
    if pick is None:
        return None
    words = model_words(tune, profile)
    serve = ("serve", *words, *flag_words(pick.requests))
    serve_file: tuple[str, ...] = ()
    if file is not None:
        serve_file = ("serve", profile.model,
                      *ModelChoice(config=str(file)).given_argv())
    settle: tuple[str, ...] = ()
    if settle_top is not None:
        asked = dataclasses.replace(tune, model=ModelChoice(), profile=str(profile_path),
                                    verify=settle_top, no_verify=False, show_all=False)
        settle = ("tune", *words, *asked.given_argv())
    return Commands(serve, serve_file, None if file is None else str(file), settle)


def write_engine_file(tune: TuneOptions, pipeline, pick: Candidate, output: Path,
                      err) -> None:
    """The pick in the engine's language `tune.format`: solved again from its requests as
    `planner solve --format` would (so the two commands write the same file for one plan), on
    stdout and in `output`/pick.FORMAT.yaml, with what it cannot express on `err`."""
    from planner.api import solve_pipeline

    result = solve_pipeline(pipeline, requests=pick.requests)
    written = engine_file(tune.format, tune.model, pick.requests, result)
    if isinstance(written, str):
        raise TuneError(written)
    path = output / f"pick.{tune.format}.yaml"
    if (problem := save(written, path)) is not None:
        raise TuneError(problem)
    print(written.text, end="")
    for line in notes(written):
        err.print(line, markup=False, highlight=False)
    err.print(f"tune: the pick ({pick.name}) as {tune.format}'s config: {path}", markup=False,
              highlight=False)
