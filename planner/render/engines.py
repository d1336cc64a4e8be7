"""A plan written in the config language of the engine that will run it.

`write_plan(plan, "sglang-omni")` (or `"vllm-omni"`) gives the file that engine takes, carrying
every decision of the plan: process groups, GPU ids, fractions, tensor parallelism, threads per
stage (as the stage's environment), copies and the GPU of each, MPS, and the keys the planner
carried without planning them. What the target cannot express is never dropped silently: each
such fact is a comment in the file and a line of `EngineFile.unsaid`, which the CLI prints on
stderr. One module per engine (`sglang_omni`, `vllm_omni`); each is pure: a Plan in, text out.

    from planner.render.engines import write_plan
    written = write_plan(result.plan, "sglang-omni", packing=result.packing)
    Path("qwen3.yaml").write_text(written.text)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from planner.render.engine_text import EngineFile

if TYPE_CHECKING:
    from planner.plan import Plan
    from planner.replicas import Packing

# One writer module (its `write(plan, packing)`) per engine; a new engine's is one entry here.
# Imported when a file is written: every command's parser names the formats, few write one.
WRITERS: dict[str, str] = {"sglang-omni": "planner.render.sglang_omni",
                           "vllm-omni": "planner.render.vllm_omni"}
ENGINE_FORMATS = tuple(WRITERS)


def write_plan(plan: Plan, fmt: str, packing: Packing | None = None) -> EngineFile:
    """`plan` as the file `fmt` (one of ENGINE_FORMATS) takes; `packing` (from `--replicas`)
    adds how its replicas run over nodes."""
    if fmt not in WRITERS:
        raise ValueError(f"no writer for {fmt!r}; the formats are {', '.join(WRITERS)}")
    return importlib.import_module(WRITERS[fmt]).write(plan, packing)


__all__ = ["ENGINE_FORMATS", "WRITERS", "EngineFile", "write_plan"]
