"""What a finished bench says beyond its table: the winner at each load and why (one line each),
advice where a figure is bad (what would fix it, derived from what the bench measured), and notes
on how far to trust the figures. Pure: reads a `Bench`; `planner.app.bench.report` prints them.

The winner at a load: with an SLO, the most goodput; open loop, the lowest p99 (time to first
audio's when streamed) of the rows that kept up with the offered rate (the most requests per
second if none did); closed loop, the most requests per second. A row whose requests failed wins
only where every row's did. Its figure is given over the declared topology's in the same run,
and, for requests per second over interleaved rounds, with a 90% interval over the rounds
(`planner.app.bench.intervals`)."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass

from planner.app.bench.intervals import PairedRatio, paired_ratio
from planner.app.bench.load_shapes import Closed, Shape
from planner.app.bench.results import Bench, Run
from planner.app.bench.rounds import spread

# Streams stalled at this share or more get advice.
STALL_ADVICE = 0.05
# Open loop: a row served at least this share of the offered rate kept up with it.
KEPT_UP = 0.9
LAG_NOTE_S = 0.001  # a schedule lag p99 at or above this is called out under the table
ROUNDS_FOR_AN_INTERVAL = 3  # suggested where a run had one round


@dataclass(frozen=True)
class Metric:
    name: str  # as the table's column says it
    value: Callable[[Run], float | None]
    higher: bool  # higher is better


REQ_S = Metric("req/s", lambda r: r.load.throughput_rps, True)
GOODPUT = Metric("goodput", lambda r: r.goodput_rps, True)
TTFA_P99 = Metric("TTFA p99", lambda r: r.load.ttfa.p99 if r.load.ttfa else None, False)
P99 = Metric("p99", lambda r: r.p99_s, False)


@dataclass(frozen=True)
class Winner:
    """The best row at one load by `metric`, `why` in words; its figure over the declared
    topology's (`versus`; None where it is the declared one or none ran) and, for req/s, round
    by round (`rounds`); the runner-up and its figure over the winner's."""

    shape: Shape
    run: Run
    metric: Metric
    why: str
    versus: float | None
    rounds: PairedRatio | None
    runner_up: Run | None
    runner_up_ratio: float | None
    runner_up_rounds: PairedRatio | None
    alike: tuple[Run, ...] = ()  # the rows measured the same as it (two decimals), it first


def _ratio(metric: Metric, a: Run, b: Run) -> float | None:
    x, y = metric.value(a), metric.value(b)
    return None if x is None or y is None or y == 0 else x / y


def _rounds(metric: Metric, a: Run, b: Run) -> PairedRatio | None:
    if metric is not REQ_S or not a.round_rps or not b.round_rps:
        return None
    return paired_ratio(a.round_rps, b.round_rps)


def winner(bench: Bench, shape: Shape) -> Winner | None:
    """The winner at `shape` (None: fewer than two rows, or none succeeded)."""
    runs = bench.runs_at(shape)
    ok = [r for r in runs if r.load.ok]
    if len(runs) < 2 or not ok:
        return None
    clean = [r for r in ok if not r.load.errors] or ok
    offered = clean[0].load.offered_rps
    if bench.slo:
        metric, why, pool = GOODPUT, "most: requests/s within the SLO", clean
    elif not isinstance(shape, Closed) and offered:
        metric = TTFA_P99 if bench.stream else P99
        pool = [r for r in clean if r.load.throughput_rps >= KEPT_UP * offered]
        why = f"lowest of those that kept up with {offered:.2f} req/s"
        if not pool:
            metric, why, pool = REQ_S, "most; none kept up with the offered rate", clean
    else:
        metric, why, pool = REQ_S, "most", clean
    measured = [(v, r) for r in pool if (v := metric.value(r)) is not None]
    ranked = [r for _, r in sorted(measured, key=lambda vr: vr[0], reverse=metric.higher)]
    if not ranked:
        return None
    best = ranked[0]
    base = bench.baseline_run(shape)
    against = base if base is not None and base is not best else None
    runner_up = ranked[1] if len(ranked) > 1 else None
    return Winner(shape, best, metric, why,
                  None if against is None else _ratio(metric, best, against),
                  None if against is None else _rounds(metric, best, against), runner_up,
                  None if runner_up is None else _ratio(metric, runner_up, best),
                  None if runner_up is None else _rounds(metric, runner_up, best),
                  tuple(r for r in ranked if _alike(_ratio(metric, r, best) or 0.0)))


def winners(bench: Bench) -> list[Winner]:
    return [w for shape in bench.shapes if (w := winner(bench, shape)) is not None]


def row_name(run: Run) -> str:
    """A row as the user can act on it: its name, and its flags where it has any."""
    flags = " ".join(run.placement.flags)
    return f"`{run.placement.name}`" + (f" ({flags})" if flags else "")


def _interval(r: PairedRatio | None, single: int) -> str:
    if r is None or r.interval is None:
        return (f"one round: no interval; --rounds {ROUNDS_FOR_AN_INTERVAL} gives one"
                if single <= 1 else "no interval")
    lo, hi = r.interval
    return (f"90% interval x{lo:.2f}-x{hi:.2f} over {r.rounds} rounds"
            + ("" if r.resolved else ": within the rounds' noise"))


def _alike(ratio: float) -> bool:
    """Equal as the table shows them (two decimals)."""
    return f"{ratio:.2f}" == "1.00"


def winner_line(bench: Bench, w: Winner) -> str:
    """`C=4: `copies` (--process-copies pipeline=2) wins on req/s (most): x1.30 of declared's
    (90% interval x1.18-x1.43 over 3 rounds)`."""
    rounds = int(bench.settings.get("rounds") or 1)
    m = w.metric

    def interval(r: PairedRatio | None) -> str:
        return "" if m is not REQ_S else f" ({_interval(r, rounds)})"

    if w.runner_up is not None and w.runner_up_ratio is not None and _alike(w.runner_up_ratio) \
            and (w.runner_up_rounds is None or not w.runner_up_rounds.resolved):
        same = [row_name(r) for r in w.alike]
        names = ", ".join(same[:-1]) + f" and {same[-1]}"
        return (f"{w.shape.label}: none; {names} measured the same {m.name}"
                f"{interval(w.runner_up_rounds)}")
    line = f"{w.shape.label}: {row_name(w.run)} wins on {m.name} ({w.why})"
    if w.versus is not None:
        line += f": x{w.versus:.2f} of declared's {m.name}{interval(w.rounds)}"
    if w.runner_up is not None and w.runner_up_ratio is not None and (
            w.versus is None or not w.runner_up.placement.is_baseline):
        # the one-round caveat once a line; an interval wherever there is one
        said = ("" if w.versus is not None and (w.runner_up_rounds is None
                                                or w.runner_up_rounds.interval is None)
                else interval(w.runner_up_rounds))
        line += (f"; next {row_name(w.runner_up)}, x{w.runner_up_ratio:.2f} of the "
                 f"winner's{said}")
    return line


# -- advice: a bad figure and what would fix it ---------------------------------------------
def _range_text(values: list[float], form: str, unit: str = "") -> str:
    """The least to the most of `values` as `form` prints them, `unit` once at the end
    (`0.40-0.85 s`); one figure where both ends print the same, as the reader would see them."""
    lo, hi = format(min(values), form), format(max(values), form)
    return (lo if lo == hi else f"{lo}-{hi}") + unit


def streams_at_once(run: Run) -> float | None:
    """Streams in flight: a closed loop's clients; open loop, arrivals times time inside
    (Little's law)."""
    shape = run.shape
    if isinstance(shape, Closed):
        return float(shape.concurrency)
    lat = run.load.latency
    return None if lat is None else run.load.throughput_rps * lat.mean


def audio_per_stream(run: Run) -> float | None:
    """Seconds of audio each stream got per second: below 1, every stream falls behind its
    playback, whatever the order the server serves them in."""
    streams = streams_at_once(run)
    return None if not streams else run.load.audio_per_s / streams


def busiest_stage(run: Run) -> tuple[str, str | None, float] | None:
    """The stage that took the most time per request in this run, its process group, and ms."""
    timed = [s for s in run.profile if s.per_request_s]
    if not timed:
        return None
    s = max(timed, key=lambda s: s.per_request_s or 0.0)
    group = next((g for g, stages in run.placement.groups if s.stage in stages), None)
    return s.stage, group, (s.per_request_s or 0.0) * 1000.0


def _stall_fix(bad: list[Run], lighter: str) -> str:
    """Too little audio per stream: fewer at once, or more CPU where the time goes."""
    slowest = min(bad, key=lambda r: audio_per_stream(r) or 0.0)
    made = slowest.load.audio_per_s
    keeps = int(made)
    fewer = (f"fewer streams at once: at the {made:.2f} s of audio per second made here, "
             f"{keeps} would keep up" if keeps >= 1 else
             f"not even one stream keeps up at the {made:.2f} s of audio per second made here")
    stage = busiest_stage(slowest)
    more = ""
    if stage is not None:
        name, group, ms = stage
        copies = f" or --process-copies {group}=2" if group else ""
        more = (f"; or more CPU for its busiest stage, {name} ({ms:.0f} ms per request): "
                f"--stage-threads {name}=2{copies}, which planner tune predicts")
    return f"{fewer}{lighter}{more}"


def stall_advice(bench: Bench) -> list[str]:
    out = []
    for shape in bench.shapes:
        runs = bench.runs_at(shape)
        bad = [r for r in runs if (r.load.stalled_share or 0.0) >= STALL_ADVICE]
        if not bad:
            continue
        who = ("every row" if len(bad) == len(runs) and len(runs) > 1 else
               ", ".join(f"`{r.placement.name}`" for r in bad))
        share = _range_text([(r.load.stalled_share or 0.0) * 100 for r in bad], ".0f", "%")
        per = [a for r in bad if (a := audio_per_stream(r)) is not None]
        audio = _range_text(per, ".2f", " s") if per else ""
        head = f"{shape.label}: {share} of streams stalled in {who}"
        calm = [s for s in bench.shapes if s != shape and all(
            (r.load.stalled_share or 0.0) < STALL_ADVICE for r in bench.runs_at(s))]
        lighter = f" (at {calm[0].label} none stalled)" if calm else ""
        if per and min(per) < 1.0:
            out.append(f"{head}: each of the {streams_at_once(bad[0]):.3g} streams at once got "
                       f"{audio} of audio per second, less than it plays; "
                       + _stall_fix(bad, lighter))
        elif per:
            gaps = [statistics.median(s.stall_s for s in r.load.ok if s.stalls) * 1000
                    for r in bad]
            gap = _range_text(gaps, ".0f", " ms")
            out.append(f"{head}, though each stream got {audio} of audio per second, "
                       "more than it plays: the audio came with gaps between chunks (a stalled "
                       f"stream's silence: median {gap}), not too little of it; a bigger first "
                       "chunk, or fewer and larger chunks after it (the card's chunk schedule), "
                       "keeps a player ahead of the next one at some cost in first audio, and "
                       f"fewer streams at once shorten the wait for it{lighter}")
    return out


def saturation_advice(bench: Bench) -> list[str]:
    """Open loop: the rows that served well below the offered rate, per load."""
    out = []
    for shape in bench.shapes:
        runs = [r for r in bench.runs_at(shape) if r.load.offered_rps and r.load.ok]
        short = [r for r in runs if r.load.throughput_rps < KEPT_UP * (r.load.offered_rps or 0)]
        if not short:
            continue
        who = ("every row" if len(short) == len(runs) and len(runs) > 1 else
               ", ".join(f"`{r.placement.name}`" for r in short))
        got = _range_text([r.load.throughput_rps for r in short], ".2f")
        kept = [r for r in runs if r not in short]
        fix = (f"{', '.join(f'`{o.placement.name}`' for o in kept)} kept up at this rate" if kept
               else "a lower rate per server (replicas) or a plan of more capacity keeps up")
        out.append(f"{shape.label}: {who} served {got} of {short[0].load.offered_rps:.2f} "
                   "req/s offered: past capacity, so requests queued and latency grew with the "
                   f"load; {fix}")
    return out


def error_advice(bench: Bench) -> list[str]:
    out = []
    for r in bench.runs:
        if r.load.errors:
            kinds = ", ".join(f"{n} {k}" for k, n in r.load.errors_by_kind().items())
            out.append(f"{r.shape.label}: `{r.placement.name}` had {r.load.errors} failed "
                       f"requests ({kinds}), e.g. {r.load.error_messages(1)[0]}")
    return out


def advice(bench: Bench) -> list[str]:
    """Each bad figure, with what would fix it."""
    return [*error_advice(bench), *saturation_advice(bench), *stall_advice(bench)]


# -- notes: how far to trust the figures -----------------------------------------------------------
def above_bound(run: Run) -> bool:
    """Measured above its stage bound, as the table shows them (two decimals): there the bound
    was wrong."""
    return run.ideal_rps is not None and round(run.load.throughput_rps, 2) > round(
        run.ideal_rps, 2)


def over_bound(bench: Bench) -> list[Run]:
    """Rows measured above their stage bound."""
    return [r for r in bench.runs if above_bound(r)]


def notes(bench: Bench) -> list[str]:
    out = list(bench.notes)
    over = over_bound(bench)
    if over:
        rows = ", ".join(f"`{r.placement.name}` at {r.shape.label} ({r.load.throughput_rps:.2f}"
                         f" > {r.ideal_rps:.2f})" for r in over)
        out.append(f"* measured above its stage bound: {rows}. The bound takes a process to run "
                   "one stage at a time; there its stages overlapped (their native code released "
                   "the interpreter lock), so the bound was wrong there")
    spreads = [(apart, r) for r in bench.runs if (apart := spread(r)) is not None]
    if spreads:
        widest, run = max(spreads, key=lambda x: x[0])
        out.append(f"{len(run.round_rps)} interleaved rounds per row and load: one row's rounds "
                   f"measured up to {widest:.0%} apart (`{run.placement.name}` at "
                   f"{run.shape.label}), so much did the machine's speed vary; merged, every "
                   "row's figures span the same stretch of time")
    for r in bench.runs:
        lag, load = r.load.lag, r.load
        if lag is not None and (lag.p99 >= LAG_NOTE_S or load.not_sent):
            out.append(f"{r.shape.label}: `{r.placement.name}`: the load generator ran behind "
                       f"its schedule (lag p99 {lag.p99 * 1000:.2f} ms, max "
                       f"{lag.max * 1000:.1f} ms; {load.late} late, {load.not_sent} not sent); "
                       "the client shares the machine with the server")
    return out
