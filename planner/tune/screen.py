"""`planner tune`'s answer on screen (`planner.tune.answer`): the plan to run and its predicted
figures, how sure, a short table of the plans that tie with it (every plan with `--all`), why in
a few sentences, what was done about a tie, and the commands that serve the pick, last. It fits a
screen of 40 lines at 100 columns; it decides nothing."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING

from planner.tune.answer import (
    Commands, TieCheck, how_sure, reasons, recommended, shown,
)
from planner.tune.choose import TIE, Candidate, Choice, gain, score, tie_note, tied, unmet
from planner.tune.report import PLAN_WIDTH, excluded_measured, placement_cell, print_unsqueezed
from planner.tune.verify import Measured

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from planner.tune.profile import Profile
    from planner.tune.verify import Verdict

# Excluded plans listed by name; more are counted (every one is in tune.json).
SHOWN_EXCLUDED = 2
SCREEN_WIDTH = 100  # the terminal the answer is laid out for


def verdict_text(choice: Choice, verdict: Verdict) -> str:
    """What serving the plans said of the predicted pick."""
    pick = choice.ranked[0]
    if verdict.best == 0 and verdict.served == 1:
        return (f"only {pick.name} was served, so nothing was compared (a larger --verify K "
                "serves more)")
    if verdict.best == 0:
        return f"{pick.name} measured best of the {verdict.served} served"
    other = choice.ranked[verdict.best]
    lead = (f"{other.name} measured x{verdict.gain:.2f} better by {choice.objective} than the "
            f"predicted pick ({pick.name})")
    if verdict.overturned:
        return f"{lead}, more than the model resolves: run what measured best"
    if verdict.beyond_tie:  # not overturned all the same: a round had the pick ahead
        return f"{lead}, but a round measured the pick ahead: the machine's drift, keep the pick"
    return f"{lead}, within a tie: keep the pick"


def command_text(words: Sequence[str]) -> str:
    """A command line as pasted into a shell."""
    return shlex.join(["planner", *words])


def _loads(choice: Choice) -> str:
    labels = [w.label for w in choice.workloads]
    loads = " and ".join([", ".join(labels[:-1]), labels[-1]] if len(labels) > 1 else labels)
    loop = "closed loop" if choice.workloads[0].concurrency is not None else (
        "open loop, Poisson arrivals")
    by = ("" if len(labels) == 1 else
          f"; ranked by the geometric mean of {_unit(choice)} over the loads")
    return f"{loads} ({loop}{by})"


def _unit(choice: Choice) -> str:
    return {"throughput": "req/s", "latency": "latency p50", "ttfa": "TTFA p90"}[choice.objective]


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f}"


def _figures(choice: Choice, c: Candidate) -> str:
    """`c`'s predicted figures at each load, with req/s against the declared topology's."""
    parts = []
    for k, (w, p) in enumerate(zip(choice.workloads, c.predicted)):
        x = "" if c is choice.declared else f" (x{gain(choice, c, k):.2f} of declared)"
        ttfa = ("" if p.ttfa_p90_ms is None or choice.objective != "ttfa" else
                f", TTFA p90 {p.ttfa_p90_ms:.0f} ms")
        at = f"at {w.label} " if len(choice.workloads) > 1 else ""
        parts.append(f"{at}{p.throughput_rps:.2f} req/s{x}, latency p50 {p.latency_p50_ms:.0f} "
                     f"p99 {p.latency_p99_ms:.0f} ms{ttfa}")
    procs = f"{c.processes} process{'es' if c.processes != 1 else ''}, {c.memory_mib:.0f} MiB"
    return "; ".join(parts) + f"; {procs}"


def table(choice: Choice, rows: Sequence[int], measured: Measured | None, every: bool) -> Table:
    """The plans of `rows` (indices into `choice.ranked`) with their predictions at each load,
    what serving measured beside them, and the tie: the full note with `every`, else a mark."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    t = Table(box=box.SIMPLE_HEAD, padding=(0, 0, 0, 1), pad_edge=False, show_edge=False)
    t.add_column("#", justify="right")
    t.add_column("plan", no_wrap=True)
    t.add_column("procs", justify="right")
    t.add_column("MiB", justify="right")
    several = len(choice.workloads) > 1
    if several:  # what the rows are ordered by: one row can be lower at one load only
        t.add_column(f"geomean\n{_unit(choice).split()[-1]}", justify="right")
    ttfa = choice.objective == "ttfa"
    for w in choice.workloads:
        t.add_column(f"{w.label}\nreq/s", justify="right")
        t.add_column("p50\nms", justify="right")
        t.add_column("p99\nms", justify="right")
        if ttfa:
            t.add_column("TTFA\np90", justify="right")
        if measured:
            t.add_column("served\nreq/s", justify="right")
            # predicted against measured throughput, not failed requests (bench's `err`)
            t.add_column("pred.\nerror", justify="right")
    near = set(tied(choice))
    t.add_column(f"tie\n({TIE:.0%})")
    # what the numbers leave of a 100-column screen (each column about 7 wide, the tie note's
    # wider): flags share a line of the plan column up to it
    plan_width = max(PLAN_WIDTH, SCREEN_WIDTH - 7 * (len(t.columns) - 1) - (30 if every else 0))
    for i in rows:
        c = choice.ranked[i]
        row = [str(i + 1), Text(placement_cell(c, plan_width), style="bold" if i == 0 else ""),
               str(c.processes), f"{c.memory_mib:.0f}"]
        if several:
            v = score(c, choice.objective)
            row.append(f"{v:.2f}" if choice.objective == "throughput" else f"{-v:.0f}")
        for k, p in enumerate(c.predicted):
            row += [f"{p.throughput_rps:.2f}", _ms(p.latency_p50_ms), _ms(p.latency_p99_ms)]
            if ttfa:
                row.append(_ms(p.ttfa_p90_ms))
            if measured:
                m = measured.ranked.get(i)
                got = None if m is None else m[k].get("throughput_rps")
                row += ["-" if got is None else f"{got:.2f}" if got else "-",
                        f"{(p.throughput_rps - got) / got:+.0%}" if got else ""]
        row.append(tie_note(choice, i) if every else
                   "pick" if i == 0 else "tie" if i in near else "")
        t.add_row(*row)
    return t


def _excluded(console: Console, choice: Choice, measured: Measured) -> None:
    from rich.text import Text

    for c, reason in choice.excluded[:SHOWN_EXCLUDED]:
        rows = excluded_measured(choice, c, measured)
        served = "" if rows is None else "; served as the bench's baseline: " + ", ".join(
            f"{w.label} {r['throughput_rps']:.2f} req/s" if r.get("throughput_rps") else
            f"{w.label} -" for w, r in zip(choice.workloads, rows))
        console.print(Text(f"excluded: {c.name} ({reason}){served}"))
    if len(choice.excluded) > SHOWN_EXCLUDED:
        console.print(Text(f"excluded: {len(choice.excluded) - SHOWN_EXCLUDED} more (each "
                           "with why in tune.json)"))


def _tie(console: Console, choice: Choice, verdict: Verdict | None, check: TieCheck | None,
         commands: Commands | None) -> None:
    from rich.text import Text

    if check is not None and check.served:
        what = (f"served the pick and #{check.rival + 1}, {check.requests} requests each per "
                f"load in {check.rounds} interleaved rounds: ")
        said = (verdict_text(choice, verdict) if verdict is not None else
                "no usable measurement of the pick (its requests failed); see check/")
        console.print(Text("tie checked: ", style="bold") + Text(what + said))
    elif verdict is not None:
        console.print(Text("verified: ", style="bold") + Text(verdict_text(choice, verdict)))
    elif check is not None:
        console.print(Text("tie not served: ", style="bold") + Text(
            f"{check.skipped}. To settle it, serve the pick and #{check.rival + 1}:"))
        if commands is not None and commands.settle:
            console.print("  " + command_text(commands.settle), markup=False, highlight=False,
                          soft_wrap=True)


def serve_commands(console: Console, best: Candidate, commands: Commands) -> None:
    """The commands that serve the pick: by its flags, and by the file tune wrote."""
    from rich.text import Text

    how = ("run it (the declared topology: no flag needed):" if not best.requests else
           "run it:")
    console.print(Text(how, style="bold"))
    console.print("  " + command_text(commands.serve), markup=False, highlight=False,
                  soft_wrap=True)
    if commands.serve_file:
        console.print(Text("or from the file tune wrote:", style="bold"))
        console.print("  " + command_text(commands.serve_file), markup=False,
                      highlight=False, soft_wrap=True)


def render_answer(console: Console, choice: Choice, profile: Profile,
                  commands: Commands | None = None, measured: Measured | None = None,
                  verdict: Verdict | None = None, check: TieCheck | None = None,
                  every: bool = False, results: str = "tune.json") -> None:
    """The answer to a throughput, latency or first-audio question (see the module)."""
    from rich.text import Text

    measured = measured or Measured()
    best = recommended(choice, verdict)
    if best is None:
        _excluded(console, choice, measured)
        console.print(Text("no plan: ", style="bold") + Text(unmet(choice)))
        return
    overturned = best is not choice.best
    console.print(Text(f"{profile.model} at {_loads(choice)}: run ", style="bold")
                  + Text(best.name, style="bold cyan"))
    console.print(Text("predicted: ", style="bold") + Text(_figures(choice, best)))
    if overturned:
        console.print(Text(f"(measured best when served; the model's pick was "
                           f"{choice.ranked[0].name})"))
    console.print(Text("how sure: ", style="bold") + Text(how_sure(choice)))
    rows = shown(choice, measured, every)
    print_unsqueezed(console, table(choice, rows, measured, every))
    hidden = len(choice.ranked) - len(rows)
    if hidden:
        console.print(Text(f"({hidden} more plans ranked: --all; every plan in {results})",
                           style="dim"))
    _excluded(console, choice, measured)
    console.print(Text("why: ", style="bold") + Text(" ".join(reasons(choice))))
    _tie(console, choice, verdict, check, commands)
    if commands is not None:
        serve_commands(console, best, commands)
