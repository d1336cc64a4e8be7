"""`planner bench`'s options, each declared once (`planner.app.cli.declared`): the parser reads
them, `command_line` writes them into results.json, and `planner tune --verify` asks for a bench
run by building a `BenchOptions` and writing its `to_argv`. A flag `planner tune` shares with
bench (the load, the measuring, where results go) is declared here and adjusted there.

Each number is checked by its argparse type, before anything loads: finite, and within
`planner.limits` (a rate of 1e-300 waited for ever for its first arrival; inf and nan raised from
deep inside). What one option says of another (--arrivals without --rate) is the command's check.
"""

from __future__ import annotations

from dataclasses import dataclass

from launcher.serving.limits import MAX_INPUT_CHARS
from planner.app.bench.load_shapes import ARRIVALS
from planner.app.cli.declared import Declared, Flag, option, options
from planner.app.cli.options import ModelChoice, bounded_int, positive
from planner.limits import (
    MAX_BURSTINESS, MAX_CONCURRENCY, MAX_COUNT, MAX_DURATION_S, MAX_MS, MAX_RATE, MIN_RATE,
)

DEFAULT_REQUESTS = 96  # measured requests per placement and load, without --requests or --duration
DEVICES = ("auto", "cpu", "cuda")
STAND_IN_SIZES = ("tiny", "small", "base")

# -- the flags `planner tune` takes too ----------------------------------------------------------
REQUESTS = Flag("--requests", type=positive(int), metavar="N", exclusive="amount",
                help="measured requests per placement and load (default 96)")
CONCURRENCY = Flag("--concurrency", type=positive(int, MAX_CONCURRENCY), repeat=True,
                   metavar="C", exclusive="load",
                   help="closed loop: C concurrent clients, each sending its next request when "
                        "its last one ended (repeatable; default 1)")
RATE = Flag("--rate", type=positive(float, MAX_RATE, MIN_RATE), repeat=True, metavar="R",
            exclusive="load",
            help="open loop: R requests per second arriving whatever the server does "
                 "(repeatable, for a sweep across the saturation point)")
ROUNDS = Flag("--rounds", type=positive(int), default=1, metavar="N", shown_at_default=False,
              help="split each placement's requests (or --duration) into N rounds, measured in "
                   "turn across the placements (A B C, A B C, ...) and merged, so that a shared "
                   "machine's drift in speed falls on every placement alike; the report says how "
                   "far one placement's rounds disagreed (default 1)")
SLO_P99_MS = Flag("--slo-p99-ms", type=positive(float, MAX_MS), metavar="MS",
                  help="goodput counts only requests that finished within MS ms (the latency "
                       "objective a p99 target sets for every request)")
OUTPUT = Flag("--output", "-o", metavar="DIR",
              help="where results go (default: bench-results/MODEL)")
DEVICE = Flag("--device", choices=DEVICES, default="auto")
SEED = Flag("--seed", type=int, default=0,
            help="seed of the request texts and arrival times: the same seed sends the same "
                 "texts on the same schedule")
STAND_IN_SIZE = Flag("--stand-in-size", choices=STAND_IN_SIZES,
                     help="size offered to the built-in stand-in stages (default: theirs, base); "
                          "factories that take no `size` ignore it")


@dataclass(frozen=True)
class BenchOptions(Declared):
    """What `planner bench` was asked, in its parser's order."""

    model: ModelChoice = options(ModelChoice)
    placement: tuple[str, ...] = option(Flag(
        "--placement", repeat=True, metavar="NAME='FLAGS'", exclusive="which",
        help="a placement to compare, e.g. split='--isolate-stage vocoder' (repeatable; the "
             "declared topology is always measured too)"))
    all_feasible: bool = option(Flag(
        "--all-feasible", switch=True, exclusive="which",
        help="compare every feasible partition of the stages into processes"))
    without_declared: bool = option(Flag(
        "--without-declared", switch=True,
        help="with --placement: serve only the placements named (the declared topology too "
             "only when one of them is it); no ratios are given"))
    url: tuple[str, ...] = option(Flag(
        "--url", repeat=True, metavar="NAME=URL[,KEY=VALUE...]",
        help="a speech server already running, measured beside the placements under the same "
             "load and rounds (repeatable; bench never starts or stops it): http://HOST:PORT "
             "for OpenAI's POST /v1/audio/speech (sglang-omni, vLLM-Omni, Kokoro-FastAPI, "
             "planner serve) or piper+http://HOST:PORT for piper's POST /synthesize, then "
             "comma-separated model=M, voice=V, format=pcm|wav, rate=HZ (of its pcm, where its "
             "answers do not say it), body.KEY=VALUE, api_key_env=VAR (a server started "
             "with --api-key: the key is read from environment variable VAR); a model is "
             "optional with --url"))
    max: int | None = option(Flag(
        "--max", type=positive(int), metavar="N",
        help="with --all-feasible: at most N placements, the declared one included"))
    requests: int | None = option(REQUESTS)
    duration: float | None = option(Flag(
        "--duration", type=positive(float, MAX_DURATION_S), metavar="S", exclusive="amount",
        help="measure for S seconds per placement and load instead (open loop: the R x S "
             "requests that rate offers in S seconds)"))
    concurrency: tuple[int, ...] = option(CONCURRENCY)
    rate: tuple[float, ...] = option(RATE)
    arrivals: str | None = option(Flag(
        "--arrivals", choices=ARRIVALS,
        help="with --rate: gaps between arrivals (default poisson; seeded by --seed)"))
    burstiness: float | None = option(Flag(
        "--burstiness", type=positive(float, MAX_BURSTINESS), metavar="B",
        help="with --arrivals gamma: the gamma shape; 1 is Poisson, below 1 burstier, above 1 "
             "more regular (default 1)"))
    rounds: int = option(ROUNDS)
    warmup: int = option(Flag(
        "--warmup", type=bounded_int(0, MAX_COUNT), default=4, metavar="W",
        help="unmeasured requests after startup (default 4)"))
    input_chars: int = option(Flag(
        "--input-chars", type=bounded_int(1, MAX_INPUT_CHARS, "the speech endpoint's limit"),
        default=100, metavar="K", help="characters per request text (default 100)"))
    stream: bool = option(Flag(
        "--stream", switch=True,
        help="stream the audio and measure time to first audio and stream continuity"))
    slo_ttfa_ms: float | None = option(Flag(
        "--slo-ttfa-ms", type=positive(float, MAX_MS), metavar="MS",
        help="goodput counts only requests whose first audio came within MS ms (needs "
             "--stream)"))
    slo_p99_ms: float | None = option(SLO_P99_MS)
    output: str | None = option(OUTPUT)
    device: str = option(DEVICE)
    seed: int = option(SEED)
    stand_in_size: str | None = option(STAND_IN_SIZE)
