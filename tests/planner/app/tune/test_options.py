"""`planner tune`'s options and the bench runs `--verify` asks for: built as bench's own options,
so each command tune runs is one bench's parser reads back to what tune meant."""

from __future__ import annotations

from pathlib import Path

from planner.app.bench.options import BenchOptions
from planner.app.cli import build_parser
from planner.app.tune.options import TuneOptions
from planner.app.tune.rate import TTFA_FLAGS
from planner.app.tune.verify import bench_command
from tests.planner.tune.test_verdict import a_choice


def tune(*argv: str) -> TuneOptions:
    return TuneOptions.from_args(build_parser().parse_args(["tune", *argv]))


def bench_read(cmd: list[str]) -> BenchOptions:
    """What `planner bench` makes of the child command tune runs."""
    assert cmd[1:4] == ["-m", "planner", "bench"]
    return BenchOptions.from_args(build_parser().parse_args(cmd[3:]))


def test_verify_asks_bench_for_tunes_pipeline_device_seed_and_stand_ins():
    asked = tune("--config", "p.yaml", "--variant", "v", "--device", "auto", "--seed", "5",
                 "--stand-in-size", "tiny", "--requests", "40", "--rounds", "4")
    choice, _ = a_choice()
    bench = bench_read(bench_command(asked, choice, [0], Path("out")))
    assert bench.model == asked.model
    assert (bench.device, bench.seed, bench.stand_in_size) == ("auto", 5, "tiny")
    assert (bench.requests, bench.rounds, bench.output) == (40, 4, "out")
    assert bench.placement == ("isolate:b=--isolate-stage b",)
    assert bench.concurrency == (8,) and bench.rate == () and not bench.stream


def test_the_flag_a_rate_question_names_for_each_percentile_sets_that_percentile():
    # the refusals of a rate question name the flag that asked it
    for q, flag in TTFA_FLAGS.items():
        asked = tune(flag, "250")
        assert [getattr(asked, f"ttfa_p{p}_ms") for p in (50, 90, 99)] == [
            250.0 if p == q else None for p in (50, 90, 99)]
