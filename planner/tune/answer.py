"""`planner tune`'s answer to a throughput, latency or first-audio question, as a person acts on
it: the plan to run, how sure the model is (its tie band), the few plans that tie with it, why in
a few short sentences, and what to run. Pure: built from tune's ranking (`planner.tune.choose`),
what serving measured (`planner.tune.verify`) and the commands the application spells; the
screen (`planner.tune.screen`) and the JSON render it.

A tie: plans predicted within `TIE` of the pick, which the model does not tell apart. tune settles
one with a short served check of the pick against `rival` (the application decides whether the
machine is quiet enough), or says which two plans to serve and the command that serves them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from planner.plan import Copies, Pin, Threads
from planner.tune.choose import (
    RESOLUTION, TIE, Candidate, Choice, gain, predicted_lead, tie_break, tied,
)
from planner.tune.verify import Measured, Verdict

# The plans tied with the pick that the answer shows (the rest: `--all`, and tune.json).
SHOWN_TIES = 3


@dataclass(frozen=True)
class Commands:
    """What to run, as words of a command line (the application spells its flags): `serve`
    serves the pick by its flags, `serve_file` by the file written for it (`file`; empty: none
    written, e.g. the pick is the declared topology), `settle` serves the pick against its rival
    to settle a tie (empty: no tie, or it was settled here)."""

    serve: tuple[str, ...]
    serve_file: tuple[str, ...] = ()
    file: str | None = None
    settle: tuple[str, ...] = ()

    def as_dict(self, settle_key: str = "settle") -> dict[str, Any]:
        """As tune.json writes them (the rate question calls the settling command `check`)."""
        return {"serve": list(self.serve), "serve_file": list(self.serve_file) or None,
                "file": self.file, settle_key: list(self.settle) or None}


@dataclass(frozen=True)
class TieCheck:
    """What tune did about a tie: `served` the pick and `rival` (an index into `choice.ranked`)
    briefly, `requests` each per load; or not, and `skipped` says why (a phrase)."""

    rival: int
    served: bool
    skipped: str | None = None
    requests: int = 0
    rounds: int = 0


def recommended(choice: Choice, verdict: Verdict | None) -> Candidate | None:
    """What tune tells the operator to run: the predicted pick, unless serving them measured
    another one better by more than a tie."""
    if verdict is not None and verdict.overturned:
        return choice.ranked[verdict.best]
    return choice.best


def rival(choice: Choice) -> int | None:
    """The plan a short check serves against the pick: the next in the ranking, when it is
    within the pick's tie (None: no tie, nothing to settle)."""
    return 1 if 1 in tied(choice) else None


def shown(choice: Choice, measured: Measured | None = None, every: bool = False) -> list[int]:
    """The rows of the answer's table (indices into `choice.ranked`, in rank order): the pick,
    up to `SHOWN_TIES` plans tied with it, every plan served, and the declared topology as the
    yardstick; `every`: all of them."""
    if every:
        return list(range(len(choice.ranked)))
    rows = {0, *tied(choice)[:SHOWN_TIES]}
    if measured:
        rows |= set(measured.ranked)
    rows |= {i for i, c in enumerate(choice.ranked) if not c.requests}
    return sorted(i for i in rows if i < len(choice.ranked))


def how_sure(choice: Choice) -> str:
    """The model's confidence in the pick as its tie band: how many plans it does not tell apart
    from the pick, or how far the next one is."""
    best = choice.best
    if best is None or len(choice.ranked) < 2:
        return "no other plan to compare"
    near = tied(choice)
    if near:
        many = "plan is" if len(near) == 1 else "plans are"
        return (f"a tie: {len(near)} other {many} predicted within {TIE:.0%} of it, the "
                "model's tie band, which it does not tell apart")
    apart = abs(predicted_lead(best, choice.ranked[1], choice.objective))
    return (f"no other plan within the model's {TIE:.0%} tie band: the next is predicted "
            f"{apart:.0%} {'lower' if choice.objective == 'throughput' else 'slower'}")


def changes(c: Candidate) -> str:
    """What `c` changes from the declared topology, as a clause: its process groups, threads,
    copies and pins."""
    out = []
    if c.moves_stages:
        out.append(f"splits the stages into {' | '.join('+'.join(s) for _, s in c.groups)}")
    threads = [f"{r.stage} {r.count} threads" for r in c.compute if isinstance(r, Threads)]
    if threads:
        out.append("gives " + " and ".join(threads))
    copies = [f"{r.count} copies of {r.process}" for r in c.compute if isinstance(r, Copies)]
    if copies:
        out.append("runs " + " and ".join(copies))
    pins = [_pinned(c, r) for r in c.compute if isinstance(r, Pin)]
    if pins:
        out.append("pins " + " and ".join(pins))
    return ", ".join(out[:-1]) + (" and " if len(out) > 1 else "") + out[-1] if out else ""


def _pinned(c: Candidate, pin: Pin) -> str:
    cpus = ",".join(map(str, pin.cpus or ()))
    if c.copies_of(pin.process) > 1:
        return f"{pin.process}'s copies one to a CPU each ({cpus})"
    return f"{pin.process} to CPU {cpus}"


def reasons(choice: Choice) -> tuple[str, ...]:
    """Why the pick, in two or three short sentences: what bounds the declared topology, what
    the pick changes and gains, and, in a tie, why it comes first (in full:
    `planner.tune.choose.why`)."""
    best, base = choice.best, choice.declared
    if best is None:
        return ()
    k = choice.headline
    res, busy = base.predicted[k].bottleneck
    out = [f"At {choice.workloads[k].label} the declared topology is bound by {res}, "
           f"{busy:.0%} busy."]
    if best is base:
        out.append("No other plan removes more of that than it adds in handoffs and "
                   "processes.")
    else:
        bres, bbusy = best.predicted[k].bottleneck
        out.append(f"The pick {changes(best)}: x{gain(choice, best):.2f} req/s, then bound by "
                   f"{bres}, {bbusy:.0%} busy.")
    if (first := tie_first(choice)) is not None:
        out.append(first)
    return tuple(out)


def tie_first(choice: Choice) -> str | None:
    """Why the pick comes before #2 of its tie (the plan a check serves against it), as
    `planner.tune.choose.rank` put it there (`tie_break`), in a sentence; None: no tie."""
    if rival(choice) is None:
        return None
    best, other = choice.ranked[0], choice.ranked[1]
    match tie_break(best, other, choice.objective, choice.cores):
        case "one_core":
            return ("It comes before #2 as one process on one core: switching a core between "
                    "processes costs what the model does not charge.")
        case "less_crowding":
            return ("It comes before #2 for keeping other native work away from the busiest "
                    "stage, which costs more than the model charges.")
        case "predicted_higher":
            above = predicted_lead(best, other, choice.objective)
            return f"It is predicted {above:.1%} above #2, less than the tie band."
        case "fewer_threads":
            return ("#2 asks for more threads and is predicted no better: a thread that gains "
                    "nothing still costs its hand-offs.")
        case "unresolved_lead":
            return (f"It is predicted above #2 by under {RESOLUTION:.1%}, which the model does "
                    "not resolve: serving the two tells them apart.")
    return ("#2 is predicted the same; a fixed order puts the pick first (fewer processes, "
            "then by name).")


def _prediction(choice: Choice, c: Candidate) -> list[dict[str, Any]]:
    return [{"workload": w.label, "throughput_rps": round(p.throughput_rps, 3),
             "x_declared": round(gain(choice, c, k), 3)}
            for k, (w, p) in enumerate(zip(choice.workloads, c.predicted))]


def answer_dict(choice: Choice, commands: Commands | None, check: TieCheck | None,
                verdict: Verdict | None) -> dict[str, Any]:
    """The answer as tune.json's `answer`: the plan to run (an index into `candidates`), how
    sure, why, the commands, and what was done about a tie."""
    run = recommended(choice, verdict)
    index = None if run is None else choice.ranked.index(run)
    return {
        "run": index,
        "predicted": None if run is None else _prediction(choice, run),
        "how_sure": how_sure(choice),
        "tied": list(tied(choice)),
        "why": list(reasons(choice)),
        "commands": None if commands is None else commands.as_dict(),
        "tie_check": None if check is None else {
            "rival": check.rival, "served": check.served, "skipped": check.skipped,
            "requests": check.requests or None, "rounds": check.rounds or None},
    }
