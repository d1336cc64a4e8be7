"""A plan written as the config file an engine takes (`--format sglang-omni|vllm-omni|ray-serve`),
for `planner solve` (the plan asked for) and `planner tune` (its pick): one place that picks the
writer, puts the file where it was asked for and says on stderr what the file cannot express."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from planner.app.cli.options import ModelChoice
from planner.plan import ComputeRequest, Request, Result
from planner.render.engine_text import EngineFile
from planner.render.engines import ENGINE_FORMATS

# Ray Serve's file carries what its application re-solves (the request as given), so it is
# written from the request rather than from the plan alone.
FILE_FORMATS = (*ENGINE_FORMATS, "ray-serve")


def engine_file(fmt: str, model: ModelChoice, requests: Sequence[Request | ComputeRequest],
                result: Result) -> EngineFile | str:
    """A feasible `result` as the file `fmt` takes, or the one paragraph saying why its plan
    cannot be written there."""
    if fmt != "ray-serve":
        from planner.render.engines import write_plan

        return write_plan(result.plan, fmt, packing=result.packing)
    from planner.render.ray_serve import Asked, Unwritable, ray_serve_file

    config = None
    if model.config is not None:
        from planner.config import read_yaml

        config = read_yaml(model.config)  # carried whole: the file runs where this one is not
    asked = Asked(model.model_path, config, model.variant, tuple(requests), model.overrides)
    try:
        written = ray_serve_file(result, asked)
    except Unwritable as exc:
        return f"--format ray-serve: {exc}"
    return EngineFile("ray-serve", written.text, written.notes)


def save(written: EngineFile, path: Path) -> str | None:
    """Write the file to `path`; None, or the one paragraph saying why it could not be."""
    try:
        path.write_text(written.text, encoding="utf-8")
    except OSError as exc:
        return (f"{path}: cannot write it ({exc.strerror or exc}); give a file in a directory you "
                "can write to.")
    return None


def notes(written: EngineFile) -> list[str]:
    """The stderr lines: one per fact the file cannot express."""
    return [f"note: {written.format} cannot express: {fact}" for fact in written.unsaid]
