"""`planner tune`'s options, each declared once (`planner.app.cli.declared`). The flags tune
passes on to `planner bench` when it verifies (the load, requests, rounds, where results go, the
device, seed and stand-ins) are bench's own declarations (`planner.app.bench.options`), with
tune's defaults and help."""

from __future__ import annotations

from dataclasses import dataclass

from planner.app.bench.options import (
    CONCURRENCY, DEVICE, OUTPUT, RATE, REQUESTS, ROUNDS, SEED, SLO_P99_MS, STAND_IN_SIZE,
)
from planner.app.cli.declared import Declared, Flag, option, options
from planner.app.cli.engine_file import FILE_FORMATS
from planner.app.cli.options import ModelChoice, positive
from planner.limits import MAX_MS

OBJECTIVES = ("throughput", "latency", "ttfa")


def _ttfa(name: str, q: int, more: str = "") -> Flag:
    """A first-audio target at percentile `q`."""
    return Flag(name, type=positive(float, MAX_MS), metavar="X",
                help=f"with one --rate: the cheapest plan predicted to keep time to first audio "
                     f"p{q} at most X ms{more}")


@dataclass(frozen=True)
class TuneOptions(Declared):
    """What `planner tune` was asked, in its parser's order."""

    model: ModelChoice = options(ModelChoice)
    concurrency: tuple[int, ...] = option(
        CONCURRENCY, exclusive=None, help="closed-loop clients (repeatable; default 1 and 4)")
    rate: tuple[float, ...] = option(
        RATE, exclusive=None, help="open-loop Poisson arrivals in requests/s (repeatable)")
    objective: str = option(Flag("--objective", choices=OBJECTIVES, default="throughput"))
    slo_p99_ms: float | None = option(
        SLO_P99_MS, metavar="X",
        help="leave out placements whose predicted p99 exceeds X ms at any workload")
    ttfa_p50_ms: float | None = option(_ttfa(
        "--ttfa-p50-ms", 50, " (any of these; with --slo-p99-ms, latency too); docs/tune.md"))
    ttfa_p90_ms: float | None = option(_ttfa("--ttfa-p90-ms", 90))
    ttfa_p99_ms: float | None = option(_ttfa("--ttfa-p99-ms", 99))
    max_processes: int | None = option(Flag("--max-processes", type=positive(int), metavar="N"))
    profile: str | None = option(Flag("--profile", metavar="FILE",
                                      help="a profile.json from an earlier run"))
    profile_requests: int = option(Flag(
        "--profile-requests", type=positive(int), default=12, metavar="N",
        help="requests per profiling pass (default 12)"))
    cores: int | None = option(Flag(
        "--cores", type=positive(int), metavar="N",
        help="predict for a machine with N cores (default: the profiled machine's)"))
    cpu_speed: float = option(Flag(
        "--cpu-speed", type=positive(float, 1.0, 0.05), default=1.0, metavar="S",
        help="predict for CPUs that run S (0.05-1) of the time they are wanted, as a shared "
             "host's do while its hypervisor serves other guests (default 1: full speed, as "
             "profiled); a rate question measures how fast short bursts of work run now and "
             "says so when they are slow"))
    placements_only: bool = option(Flag(
        "--placements-only", switch=True,
        help="rank placements alone, one thread per stage and one copy per group (default: "
             "also give the best placements' busiest stages more threads and their processes "
             "more copies, within the machine's CPUs)"))
    verify: int | None = option(Flag(
        "--verify", type=positive(int), metavar="K", exclusive="verify",
        help="serve the top K and the declared topology under the same load (a rate question: "
             "its pick, the cheaper plan it names and K - 1 more finalists, open loop at the "
             "rate)"))
    no_verify: bool = option(Flag(
        "--no-verify", switch=True, exclusive="verify",
        help="serve nothing beyond profiling: a tie is left for you to settle, with the command "
             "that serves the pick against the plan tied with it (default: when tune profiled "
             "this machine and it is quiet, a short served check settles a tie)"))
    requests: int | None = option(
        REQUESTS, exclusive=None,
        help="measured requests per placement and workload when verifying (default 96, as "
             "planner bench: --verify can change the recommendation, and 48 left a placement "
             "5-15%% apart between runs; a rate question's 300, for a p99)")
    rounds: int = option(
        ROUNDS, default=3,
        help="with --verify: measure in N interleaved rounds, as planner bench --rounds "
             "(default 3: on a shared machine the speed drifts by more than the gaps --verify "
             "has to judge, and rounds spread the drift over every placement alike)")
    format: str = option(Flag(
        "--format", choices=("table", "json", *FILE_FORMATS), default="table",
        help="table (default), json, or the pick as the config file an engine takes: "
             "sglang-omni, vllm-omni, ray-serve (on stdout and beside tune.json; the answer then "
             "goes to stderr, with what the file cannot express)"))
    show_all: bool = option(Flag(
        "--all", switch=True,
        help="list every plan ranked (default: the pick, the plans tied with it and the "
             "declared topology; tune.json has every one)"))
    output: str | None = option(
        OUTPUT, short=None,
        help="where profile.json, tune.json and the pick's config (pick.yaml, the overlay "
             "`planner serve MODEL --config FILE` takes) go (default tune-results/MODEL)")
    device: str = option(DEVICE, default="cpu")
    seed: int = option(SEED, help=None)
    stand_in_size: str | None = option(
        STAND_IN_SIZE, help="size offered to the built-in stand-in stages (default: theirs)")
