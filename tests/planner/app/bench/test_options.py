"""`planner bench`'s options: what results.json records as the command that ran, spelled in full
from the options (defaults given, loads deduplicated, floats without lost digits)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from planner.app.bench.options import BenchOptions
from planner.app.cli import build_parser

pytest.importorskip("matplotlib", reason="bench's command needs the bench extra")

from planner.app.bench.command import command_line  # noqa: E402


@pytest.mark.parametrize("given, recorded", [
    ("-m qwen3-tts",
     "--model-path qwen3-tts --requests 96 --concurrency 1 --warmup 4 --input-chars 100 "
     "--output res --device auto --seed 0"),
    ("-m qwen3-tts --rate 2 --rate 0.1234567 --rate 2 --stream --slo-ttfa-ms 250.5",
     "--model-path qwen3-tts --requests 96 --rate 2 --rate 0.1234567 --arrivals poisson "
     "--warmup 4 --input-chars 100 --stream --slo-ttfa-ms 250.5 --output res --device auto "
     "--seed 0"),
    ("-c x.yaml --variant v --placement 'a=--isolate-stage vocoder' --placement b= "
     "--without-declared --duration 3.5 --concurrency 2 --concurrency 2 --concurrency 4",
     "--config x.yaml --variant v --placement 'a=--isolate-stage vocoder' --placement b= "
     "--without-declared --duration 3.5 --concurrency 2 --concurrency 4 --warmup 4 "
     "--input-chars 100 --output res --device auto --seed 0"),
    ("-m piper-joe --all-feasible --max 3 --rounds 3 --warmup 0 --input-chars 40 --seed 7 "
     "--device cpu --stand-in-size tiny --slo-p99-ms 900",
     "--model-path piper-joe --all-feasible --max 3 --requests 96 --concurrency 1 --rounds 3 "
     "--warmup 0 --input-chars 40 --slo-p99-ms 900 --output res --device cpu --seed 7 "
     "--stand-in-size tiny"),
    ("-m qwen3-tts --rate 1.5 --arrivals gamma --burstiness 0.25 --requests 10 --rounds 1",
     "--model-path qwen3-tts --requests 10 --rate 1.5 --arrivals gamma --burstiness 0.25 "
     "--warmup 4 --input-chars 100 --output res --device auto --seed 0"),
])
def test_the_recorded_command_spells_out_what_ran(given, recorded):
    options = BenchOptions.from_args(build_parser().parse_args(["bench", *shlex.split(given)]))
    written = command_line(options, Path("res"))
    assert written == ["bench", *shlex.split(recorded)]
    # and it asks for the same run again
    again = BenchOptions.from_args(build_parser().parse_args(written))
    assert command_line(again, Path("res")) == written
