"""A rate question's answer as text and JSON (`planner.tune.rate_question`): the pick with its
banded percentiles, the cheaper plan that misses, the finalists, and, when nothing meets, one
paragraph on the closest plan and the replicas that would meet. Decides nothing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from planner.flags import flag_words, flags
from planner.tune.answer import Commands
from planner.tune.rate_question import SHOWN, Band, Estimate, RateAnswer
from planner.tune.rate_verify import Check, RateVerdict, Served
from planner.tune.screen import command_text, serve_commands

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from planner.tune.profile import Profile

# A served run that lost this much of its CPUs' running time to other guests is said to have.
STOLEN_NOTE_SHARE = 0.10
# Finalists the answer lists (the rest: --all, and tune.json).
SHOWN_FINALISTS = 4


def _band(b: Band) -> str:
    if b.low == b.high:
        return f"{b.median:.0f} ms"
    return f"{b.median:.0f} ms ({b.low:.0f}-{b.high:.0f})"


def _rps(b: Band | None) -> str:
    if b is None:
        return "-"
    if round(b.low, 2) == round(b.high, 2):
        return f"{b.median:.2f} req/s"
    return f"{b.median:.2f} req/s ({b.low:.2f}-{b.high:.2f})"


def _cost(e: Estimate) -> str:
    cpus = f"{e.cpus} CPU{'s' if e.cpus != 1 else ''}"
    return cpus + (f", {e.gpus} GPU{'s' if e.gpus != 1 else ''}" if e.gpus else "")


def _name(e: Estimate) -> str:
    return f"`{e.candidate.name}`"


def targets_text(a: RateAnswer) -> str:
    return ", ".join(f"{t.label} <= {t.ms:g} ms" for t in a.targets)


def percentiles_text(e: Estimate) -> str:
    """TTFA p50/p90/p99 and latency p99 as bands (a whole-response pipeline's TTFA is its
    latency, so only latency is shown there)."""
    ttfa = "  ".join(f"p{q} {_band(e.band('ttfa', q))}" for q in (50, 90, 99))
    return f"TTFA {ttfa}; latency p99 {_band(e.band('latency', 99))}"


def overload_text(e: Estimate, rate: float) -> str:
    assert e.capacity is not None
    return (f"overloaded: completes {_rps(e.capacity)} at most, below the {rate:g} req/s asked "
            "(its backlog grows as long as it serves, so its TTFA over a finite run says "
            "nothing)")


def miss_text(e: Estimate, a: RateAnswer) -> str:
    if e.verdict == "overloaded":
        return overload_text(e, a.rate)
    if e.worst is None and e.capacity is not None and e.capacity.low < a.rate:
        return (f"marginal: its median capacity ({e.capacity.median:.2f} req/s) keeps up with "
                f"{a.rate:g} req/s, its band's low end ({e.capacity.low:.2f}) does not")
    if e.worst is None:  # the medians meet, a high end does not
        t = next(t for t in a.targets if e.band(t.metric, t.percentile).high > t.ms)
        return (f"marginal: its median meets {t.label} {t.ms:g} ms, its band's high end "
                f"({e.band(t.metric, t.percentile).high:.0f} ms) does not")
    target, ms = e.worst
    return (f"misses {target.label} {target.ms:g} ms by {ms:.0f} ms "
            f"({ms / target.ms:+.0%}, by the median)")


def unmet_paragraph(a: RateAnswer, model: Sequence[str] | None) -> str:
    """Nothing meets: the closest plan, and how many whole replicas of it would (given `model`,
    the words that name the pipeline to `planner serve`, ending with the command that serves
    them)."""
    head = (f"No plan is predicted to meet {targets_text(a)} at {a.rate:g} req/s on this "
            f"machine ({a.cores} CPUs; {a.considered} plans predicted).")
    e = a.closest
    if e is None:
        return head + " No plan was left to predict (see the exclusions above)."
    t = e.worst[0] if e.worst is not None else a.targets[0]
    if e.verdict == "overloaded":
        out = f"{head} The closest is {_name(e)} ({_cost(e)}): {miss_text(e, a)}."
    else:
        out = (f"{head} The closest is {_name(e)} ({_cost(e)}): predicted {t.label} "
               f"{_band(e.band(t.metric, t.percentile))}, {miss_text(e, a)}.")
    r = a.replicas
    if r is None:
        return out
    b = r.per_replica.band(t.metric, t.percentile)
    if r.count is None and e.capacity is not None and e.capacity.low < a.rate / r.tried:
        return (out + f" Even {r.tried} whole replicas of it, each taking "
                f"{a.rate / r.tried:.3g} req/s, would each get more than the "
                f"{_rps(e.capacity)} one completes: a faster machine or a cheaper voice, or "
                "more replicas than tune counts, would keep up.")
    if r.count is None:
        return (out + f" Even {r.tried} whole replicas of it, each taking "
                f"{a.rate / r.tried:g} req/s, are predicted to miss ({t.label} {_band(b)}): the "
                "target is below what a request takes on a nearly idle replica; a faster machine "
                "or a cheaper voice, not more replicas, would meet it.")
    of = r.per_replica
    within = ("" if of.capacity is None else
              f", within the {_rps(of.capacity)} one completes")
    it = ("it" if of.candidate.name == e.candidate.name else
          f"{_name(of)} ({_cost(of)}; of the plans predicted, the fewest replicas, then the "
          "cheapest each)")
    return (out + f" Split over {r.count} whole replicas of {it}, each taking "
            f"{a.rate / r.count:.3g} req/s{within}, it is predicted to meet "
            f"({t.label} {_band(b)}): {r.count} nodes of this machine's size ({a.cores} CPUs "
            "each)" + (f", `{replicas_command(a, model)}`." if model is not None else "."))


def replicas_command(a: RateAnswer, model: Sequence[str]) -> str | None:
    """The command that serves the replicas the answer names (None: it names none); `model`:
    the words that name the pipeline to `planner serve` (the card and its variant, or the
    user's YAML)."""
    r = a.replicas
    if a.pick is not None or r is None or r.count is None:
        return None
    return command_text(["serve", *model, *flag_words(r.per_replica.candidate.requests),
                         "--replicas", str(r.count), "--cluster", "FILE"])


def finalists_table(a: RateAnswer, every: bool) -> Table:
    """The finalists, cheapest first: each target's percentile, capacity and verdict (every
    percentile banded with `every`)."""
    from rich import box
    from rich.table import Table

    from planner.tune.report import PLAN_WIDTH, placement_cell

    shown = SHOWN if every else tuple(dict.fromkeys((t.metric, t.percentile)
                                                     for t in a.targets))
    t = Table(box=box.SIMPLE_HEAD, padding=(0, 0, 0, 1), pad_edge=False, show_edge=False)
    t.add_column("plan", no_wrap=True)
    t.add_column("CPUs", justify="right")
    if every or any(e.gpus for e in a.finalists):
        t.add_column("GPUs", justify="right")
    for m, q in shown:
        t.add_column(f"{'TTFA' if m == 'ttfa' else 'latency'} p{q}\nms", justify="right")
    t.add_column("capacity\nreq/s", justify="right")
    t.add_column("verdict")
    rows = a.finalists if every else _shown_finalists(a)
    for e in rows:
        gpus = [str(e.gpus)] if every or any(f.gpus for f in a.finalists) else []
        t.add_row(placement_cell(e.candidate, PLAN_WIDTH), str(e.cpus), *gpus,
                  *(_band(e.band(m, q)).removesuffix(" ms").replace(" ms (", " (")
                    for m, q in shown),
                  _rps(e.capacity).replace(" req/s", ""), e.verdict,
                  style="bold" if e is a.pick else "")
    return t


def _shown_finalists(a: RateAnswer) -> tuple[Estimate, ...]:
    """The finalists the answer shows: the pick and the cheaper plan it names, then the
    cheapest others, `SHOWN_FINALISTS` in all, in cost order."""
    named = {id(e) for e in (a.pick, a.runner_up, a.closest) if e is not None}
    keep = set(named)
    for e in a.finalists:
        if len(keep) >= SHOWN_FINALISTS:
            break
        keep.add(id(e))
    return tuple(e for e in a.finalists if id(e) in keep)


def render_rate(console: Console, a: RateAnswer, profile: Profile, every: bool = False,
                results: str = "tune.json") -> None:
    """The answer to a rate question on one screen: the pick and its banded figures, the cheaper
    plan that misses, the finalists, or why nothing meets; `rate_commands` prints what to run."""
    from rich.text import Text

    from planner.tune.report import print_unsqueezed

    asked = (f"{profile.model} at {a.rate:g} req/s (open loop, Poisson arrivals), "
             f"{targets_text(a)}")
    if a.pick is None:
        console.print(Text(f"{asked}: no plan on this machine meets", style="bold"))
    else:
        console.print(Text(f"{asked}: run ", style="bold")
                      + Text(a.pick.candidate.name, style="bold cyan")
                      + Text(f" ({_cost(a.pick)})", style="bold"))
    if not a.streams:
        console.print(Text(f"note: {profile.model} does not stream here: its first audio comes "
                           "with the whole response, so a TTFA target is held against latency"))
    e = a.pick
    if e is not None:
        console.print(Text("predicted: ", style="bold") + Text(
            f"{percentiles_text(e)}" + ("" if e.capacity is None else
                                        f"; completes {_rps(e.capacity)} at most")))
        cheaper = (f"the cheaper {_name(a.runner_up)} ({_cost(a.runner_up)}): "
                   f"{miss_text(a.runner_up, a)}" if a.runner_up is not None else
                   "no plan costs less")
        console.print(Text("how sure: ", style="bold") + Text(
            f"it meets at the high end of its band (median, low-high over {a.seeds} draws of "
            f"arrivals and texts); {cheaper}"))
    if a.finalists:
        print_unsqueezed(console, finalists_table(a, every))
        hidden = 0 if every else len(a.finalists) - len(_shown_finalists(a))
        if hidden:
            console.print(Text(f"({hidden} more finalists: --all; every plan in {results})",
                               style="dim"))
    if e is None:
        console.print(Text(unmet_paragraph(a, None)))


def rate_commands(console: Console, a: RateAnswer, model: Sequence[str],
                  commands: Commands | None) -> None:
    """What to run, last: the command that checks the pick served (unless it was), and those
    that serve it; with no pick, the replicas that would meet (`model`: the words that name the
    pipeline to `planner serve`)."""
    from rich.text import Text

    def line(label: str, words: str) -> None:
        console.print(Text(label, style="bold"))
        console.print("  " + words, markup=False, highlight=False, soft_wrap=True)

    if a.pick is None:
        if (replicas := replicas_command(a, model)) is not None:
            line(f"serve it on {a.replicas.count} nodes:", replicas)  # type: ignore[union-attr]
        return
    if commands is None:
        return
    if commands.settle:
        served = "the pick and the cheaper plan" if a.runner_up is not None else "the pick"
        line(f"check it served ({served}, at the rate):", command_text(commands.settle))
    serve_commands(console, a.pick.candidate, commands)


def estimate_dict(e: Estimate | None) -> dict[str, Any] | None:
    if e is None:
        return None
    return {
        "flags": list(flags(e.candidate.requests)),
        "cost": {"cpus": e.cpus, "gpus": e.gpus},
        "verdict": e.verdict,
        "draws": e.draws,
        # each percentile: the median over the draws and the band's low and high
        "predicted": {key: {"median": round(b.median, 2), "low": round(b.low, 2),
                            "high": round(b.high, 2)} for key, b in e.bands},
        "misses": None if e.worst is None else {
            "target": e.worst[0].key, "by_ms": round(e.worst[1], 2)},
        # requests per second it completes when kept full (median, low, high over the draws);
        # overloaded: the rate asked is above its median (None: not measured)
        "capacity_rps": None if e.capacity is None else {
            "median": round(e.capacity.median, 3), "low": round(e.capacity.low, 3),
            "high": round(e.capacity.high, 3)},
        "overloaded": e.overloaded,
    }


def rate_dict(a: RateAnswer, model: Sequence[str]) -> dict[str, Any]:
    return {
        "rate": a.rate,
        "targets": {t.key: t.ms for t in a.targets},
        "streams": a.streams,
        "seeds": a.seeds,
        "cores": a.cores,
        "considered": a.considered,
        "met": a.met,
        "pick": estimate_dict(a.pick),
        "runner_up": estimate_dict(a.runner_up),
        "finalists": [estimate_dict(e) for e in a.finalists],
        "closest": estimate_dict(a.closest),
        "replicas": None if a.replicas is None else {
            "count": a.replicas.count, "plan": a.replicas.per_replica.candidate.name,
            "flags": list(flags(a.replicas.per_replica.candidate.requests)), "per_replica_rate": (
                None if a.replicas.count is None else a.rate / a.replicas.count),
            "predicted": estimate_dict(a.replicas.per_replica)["predicted"]},  # type: ignore[index]
        "unmet": None if a.met else unmet_paragraph(a, model),
    }


def _measured(c: Check) -> str:
    return "-" if c.measured_ms is None else f"{c.measured_ms:.0f} ms"


def _outcome(s: Served, c: Check) -> str:
    if c.met is None:
        return "not measured"
    return ("met" if c.met else "missed") + (f" ({s.errors} failed)" if s.errors else "")


def _served_line(s: Served, what: str) -> str:
    """`what` of one served plan, with its worst-measured target."""
    name = f"{_name(s.estimate)} ({_cost(s.estimate)})"
    if s.meets is None:
        return f"{what} {name} went unmeasured (see verify/results.json)"
    c = max(s.checks, key=lambda c: (c.measured_ms or 0.0) / c.target.ms)
    sign = "<=" if c.met else ">"
    failed = f", {s.errors} of {s.requests} requests failed" if s.errors else ""
    return (f"{what} {name} {'meets' if s.meets else 'misses'} when served: {c.target.label} "
            f"{c.measured_ms:.0f} ms {sign} {c.target.ms:g} ms (predicted {_band(c.predicted)})"
            f"{failed}")


def verdict_text(v: RateVerdict) -> str:
    """The overall verdict: does the pick meet when served, does the cheaper plan miss."""
    by_role = {s.role: s for s in v.served}
    parts = []
    if "pick" in by_role:
        parts.append(_served_line(by_role["pick"], "the pick"))
        if v.pick_meets is False:
            met = [s for s in v.served if s.meets]
            parts[-1] += (f"; of the plans served, {_name(met[0].estimate)} met: the model was "
                          "optimistic here" if met else "; no plan served met: the model was "
                          "optimistic here")
    elif "closest" in by_role:
        parts.append(_served_line(by_role["closest"], "no plan was predicted to meet; the closest"))
    if "replica" in by_role and v.replicas is not None:
        parts.append(_served_line(by_role["replica"], f"one of the {v.replicas} replicas, served "
                                  f"alone at its share ({v.replica_rate:.3g} req/s),"))
        if v.recommended_meets is False:
            parts[-1] += ": the model was optimistic here; more replicas may meet"
    if "cheaper" in by_role:
        parts.append(_served_line(by_role["cheaper"], "the cheaper"))
        if v.cheaper_misses is False:
            parts[-1] += ("; the model was cautious here: serve it with more --requests before "
                          "choosing it")
        elif v.cheaper_misses:
            parts[-1] += ", as predicted"
    return "; ".join(parts) + "."


def render_verified(console: Console, v: RateVerdict, requests: int) -> None:
    from rich.table import Table
    from rich.text import Text

    from planner.tune.report import print_unsqueezed

    kind = "streamed" if v.stream else "whole-response"
    t = Table(title=f"served at {v.rate:g} req/s (open loop, Poisson arrivals; {requests} "
                    f"{kind} requests each): predicted median (low-high) beside measured",
              title_justify="left")
    numeric = ("predicted", "measured", "stalled", "CPU stolen")
    for col in ("plan", "role", "target", *numeric[:2], "", *numeric[2:]):
        t.add_column(col, justify="right" if col in numeric else "left", no_wrap=col == "plan")
    for s in v.served:
        stalled = "-" if s.stalled_share is None else f"{s.stalled_share:.0%}"
        stolen = "-" if s.stolen_of_running is None else f"{s.stolen_of_running:.0%}"
        role = (s.role if s.role != "replica" else
                f"1 of {v.replicas} replicas, at {v.replica_rate:.3g} req/s")
        for i, c in enumerate(s.checks):
            t.add_row(s.estimate.candidate.name if i == 0 else "", role if i == 0 else "",
                      f"{c.target.label} <= {c.target.ms:g} ms", _band(c.predicted),
                      _measured(c), _outcome(s, c), stalled if i == 0 else "",
                      stolen if i == 0 else "",
                      style="bold" if s.role in ("pick", "replica") else "")
    print_unsqueezed(console, t)
    console.print(Text("verified: ", style="bold") + Text(verdict_text(v)))
    if (note := stolen_note(v)) is not None:
        console.print(Text("note: ", style="bold") + Text(note))


def stolen_note(v: RateVerdict) -> str | None:
    """Where the host took much of the CPUs while the plans were served, a line that says so:
    the model gives the pipeline whole CPUs, so there the measured latencies run long."""
    worst = max((s.stolen_of_running for s in v.served if s.stolen_of_running is not None),
                default=None)
    if worst is None or worst < STOLEN_NOTE_SHARE:
        return None
    return (f"the hypervisor gave other guests up to {worst:.0%} of the CPUs' running time while "
            "these plans were served (CPU stolen, /proc/stat); the predictions are for CPUs of "
            "their own, so there the measured latencies run longer than predicted, most in the "
            "tail. Judge the answer again when the machine is quiet.")


def verified_dict(v: RateVerdict, requests: int) -> dict[str, Any]:
    return {
        "rate": v.rate,
        "stream": v.stream,
        "requests": requests,
        "pick_meets": v.pick_meets,
        "cheaper_misses": v.cheaper_misses,
        "replicas": v.replicas,
        "replica_rate": v.replica_rate,
        "recommended_meets": v.recommended_meets,
        "confirmed": v.confirmed,
        "plans": [{
            "role": s.role,
            "flags": list(flags(s.estimate.candidate.requests)),
            "requests": s.requests,
            "errors": s.errors,
            "stalled_share": s.stalled_share,
            "cpu_stolen_of_running": s.stolen_of_running,
            "meets": s.meets,
            "targets": [{
                "target": c.target.key, "ms": c.target.ms,
                "predicted": {"median": round(c.predicted.median, 2),
                              "low": round(c.predicted.low, 2),
                              "high": round(c.predicted.high, 2)},
                "measured_ms": None if c.measured_ms is None else round(c.measured_ms, 2),
                "met": c.met} for c in s.checks],
        } for s in v.served],
        "verdict": verdict_text(v),
    }
