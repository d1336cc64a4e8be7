"""A stage is built with the threads its plan gives it, whatever the config's `args` say."""

from __future__ import annotations

import planner
from launcher.control.layout import layout
from launcher.worker.main import build_stage
from planner.plan import Threads


def probe(*, threads: int = 1, device: str = "cpu"):
    return {"threads": threads, "device": device}


def test_the_planned_threads_reach_the_stage_and_its_process_pool():
    result = planner.solve("piper-joe", isolate_stages=["vocoder"],
                           requests=[Threads("vocoder", 2)], cpus=4)
    assert result.ok, result.diagnostics
    workers = layout(result.plan, "cpu", "t", {}).workers()
    vocoder = workers["vocoder"].stages[0]
    assert vocoder.threads == 2 and workers["vocoder"].threads == 2
    assert workers["pipeline"].threads == 1
    built = build_stage(vocoder.__class__(**{**vocoder.__dict__,
                                             "factory": f"{__name__}:probe",
                                             "kwargs": (("threads", 7),)}),
                        {"threads": vocoder.threads, "device": "cpu"})
    assert built == {"threads": 2, "device": "cpu"}  # the plan's 2, not the config's 7
