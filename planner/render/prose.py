"""The sentences of a diagnostic, written from its typed conflict: a one-line message naming the
stages, edge or GPU, a "because" chain (which request and which model fact collide), and a hint
that is a concrete flag or YAML snippet. The one place diagnostics are worded."""

from __future__ import annotations

from dataclasses import dataclass

from planner.conflicts import (
    Blame,
    CardTarget,
    ConflictingRecommendation,
    EngineTarget,
    Conflict,
    DeclaredSplit,
    FusedSplit,
    InsufficientCapacity,
    IsolationConflict,
    MissingFraction,
    OverCpus,
    OverLimit,
    RankNameTaken,
    SharedRankNames,
    SpansGpus,
    UnsupportedHandoff,
)
from planner.plan import Isolate, Request, Threads
from planner.flags import flag, flags


@dataclass(frozen=True)
class Prose:
    message: str
    because: tuple[str, ...]
    hint: str


def quoted(requests: tuple[Request, ...]) -> str:
    return "`" + " ".join(flags(requests)) + "`"


def because_requests(requests: tuple[Blame, ...]) -> list[str]:
    out = []
    for b in requests:
        if b.noop:
            continue
        alone = isinstance(b.request, Isolate)
        where = f"its own process {b.process}" if alone else f"process {b.process}"
        alias = f" (role {b.request.stage} of {b.stage})" if b.request.stage != b.stage else ""
        out.append(f"`{flag(b.request)}` puts {b.stage}{alias} in {where}")
    return out


def placement_hint(nearest: tuple[Request, ...] | None, what: str) -> str:
    if nearest is None:
        return f"no placement near this request avoids the conflict; {what}"
    if not nearest:
        return f"{what}: drop the placement flags (the declared topology is valid)"
    return f"{what}: run with {quoted(nearest)} instead"


def fractions_yaml(values: tuple[tuple[str, float], ...]) -> str:
    return "\n".join(["stages:"] + [
        f"  - {{name: {s}, runtime: {{resources: {{total_gpu_memory_fraction: {v:g}}}}}}}"
        for s, v in values])


def fractions_hint(card: CardTarget | EngineTarget | None,
                   values: tuple[tuple[str, float], ...]) -> str:
    """Where to declare these fractions, in the dialect the user wrote: sglang-omni's dotted
    flags and `stages:` mapping, or the planner's YAML."""
    if isinstance(card, EngineTarget):
        flags_ = " ".join(f"--{s}.gpu_memory_fraction {v:g}" for s, v in values)
        mapping = "\n".join(["stages:"] + [f"  {s}: {{gpu_memory_fraction: {v:g}}}"
                                           for s, v in values])
        return f"run with `{flags_}`, or set in your --config file:\n{mapping}"
    return config_hint(card, fractions_yaml(values))


def config_hint(card: CardTarget | None, yaml_text: str) -> str:
    """Where the YAML goes: the user's config, or a new overlay on the card they started from."""
    if card is not None:
        return (f"put this in a YAML file and pass it with --config:\nmodel: {card.model}\n"
                + (f"variant: {card.variant}\n" if card.variant != "default" else "") + yaml_text)
    return f"add to your --config YAML:\n{yaml_text}"


def describe(c: Conflict) -> Prose:
    match c:
        case UnsupportedHandoff():
            return _unsupported(c)
        case DeclaredSplit():
            return _declared_split(c)
        case ConflictingRecommendation():
            listed = "; ".join(f"{v:g} from {e[0]} -> {e[1]}" for e, v in c.recommendations)
            because = because_requests(c.requests) + [
                f"{c.model} recommends different fractions for {c.stage} on the split handoffs: "
                f"{listed}"]
            return Prose(f"stage {c.stage} gets conflicting recommended fractions ({listed})",
                         tuple(because), placement_hint(c.nearest, "split only one of those handoffs"))
        case OverLimit():
            times = dict(c.copies)
            parts = ", ".join(f"{s} {v:g}" + (f" in each of {times[s]} copies" if s in times
                                                else "") for s, v in c.fractions)
            because = because_requests(c.requests) + [
                f"the stages on GPU {c.gpu} take {parts}, together {c.total:.3f}",
                f"placement.max_total_gpu_memory_fraction_per_gpu is {c.limit:.3f}"]
            return Prose(
                f"GPU {c.gpu} would be at {c.total:.3f} of its memory, over the limit "
                f"{c.limit:.3f} by {c.excess:.3f}", tuple(because),
                f"shrink GPU {c.gpu} by at least {c.excess:.3f}; "
                + fractions_hint(c.card, c.proposal))
        case OverCpus():
            return _over_cpus(c)
        case SpansGpus():
            placed = ", ".join(f"{s} (GPU {g})" for s, g in c.placed)
            because = because_requests(c.requests) + [
                f"process {c.process} would hold {placed}, and one process drives one GPU"]
            return Prose(f"process {c.process} would span GPUs {', '.join(map(str, c.gpus))}",
                         tuple(because),
                         placement_hint(c.nearest,
                                        "keep the stages of each GPU in their own process"))
        case RankNameTaken():
            because = because_requests(c.requests) + [
                f"{c.process} is the process of rank {c.rank} of tensor-parallel stage "
                f"{c.tp_stage}"]
            return Prose(
                f"process name {c.process} is already taken by a tensor-parallel rank of "
                f"{c.tp_stage}", tuple(because),
                placement_hint(c.nearest, "choose another process name"))
        case SharedRankNames():
            return Prose(
                f"tensor-parallel stages {' and '.join(c.tp_stages)} both name a rank process "
                f"{c.process}",
                (f"TP rank processes are named <process>_tp<rank>, and {', '.join(c.tp_stages)} "
                 f"share one process name",),
                f"give {c.rename} its own process name; " + (
                    f"set in your --config file:\nstages:\n  {c.rename}: {{process: {c.rename}}}"
                    if isinstance(c.card, EngineTarget) else config_hint(
                        c.card, f"stages:\n  - {{name: {c.rename}, process: {c.rename}}}")))
        case MissingFraction():
            return _missing_fraction(c)
        case IsolationConflict():
            because = because_requests(c.requests)
            if c.fused_group:
                because.append(f"fused_stages binds {', '.join(c.fused_group)} into one process")
            return Prose(
                f"`{flag(c.isolated.request)}` asks {c.isolated.stage} to run alone, but "
                f"{', '.join(c.others)} would share process {c.isolated.process}", tuple(because),
                placement_hint(c.nearest, "--isolate-stage only makes singletons; group stages "
                                          "with --stage-process"))
        case FusedSplit():
            because = because_requests(c.requests) + [
                f"fused_stages binds {', '.join(c.group)} into one process"]
            return Prose(
                f"{', '.join(c.moved) or c.group[0]} cannot leave fused partner"
                f"{'s' if len(c.partners) > 1 else ''} {', '.join(c.partners)}", tuple(because),
                placement_hint(c.nearest, "move the fused stages together"))
        case InsufficientCapacity():
            return _insufficient(c)
    raise TypeError(f"no wording for {type(c).__name__}")


def _unsupported(c: UnsupportedHandoff) -> Prose:
    u, v = c.edge
    because = because_requests(c.requests) + [
        f"{c.model} needs {u} -> {v} inside one process: {c.reason}"]
    hint = placement_hint(c.nearest, f"keep {u} and {v} in one process")
    if c.along is not None:
        hint += (f"; or, to keep {', '.join(c.moved)} where you asked, move the partner along: "
                 f"{quoted(c.along)}")
    return Prose(f"the request splits {u} -> {v}, which {c.model} does not support across "
                 f"processes", tuple(because), hint)


def _declared_split(c: DeclaredSplit) -> Prose:
    u, v = c.edge
    because = [f"{m.line} puts {m.stage} in process {m.process}" for m in c.lines]
    for stay in c.stays:
        if stay.fused_with:
            because.append(f"fused_stages puts {stay.stage} in process {stay.process} with "
                           f"{', '.join(stay.fused_with)}")
        else:
            because.append(f"{stay.stage} stays in process {stay.process} as {c.declared_by} "
                           f"declares")
    because.append(f"{c.model} needs {u} -> {v} inside one process: {c.reason}")
    who = " and ".join(c.blamed)
    message = f"{who} splits {u} -> {v}, which {c.model} does not support across processes"
    if c.placement is None:
        return Prose(message, tuple(because), f"keep {u} and {v} in one process in {who}")
    if isinstance(c.card, EngineTarget):  # sglang-omni's stages mapping
        text = "stages:\n" + "\n".join(f"  {s}: {{process: {p}}}" for s, p in c.placement)
    else:
        text = "stages:\n" + "\n".join(f"  - {{name: {s}, process: {p}}}"
                                        for s, p in c.placement)
    hint = f"keep {u} and {v} in one process: set in {who}:\n{text}"
    if c.drop_requests:
        hint += "\nand drop the placement flags"
    hint += f"\nor, for one run, use {quoted(c.nearest or ())}"
    return Prose(message, tuple(because), hint)


def _missing_fraction(c: MissingFraction) -> Prose:
    because = because_requests(c.requests)
    if not because:
        because.append(f"the declared topology already runs {', '.join(c.processes)} on GPU "
                       f"{c.gpu}")
    because.append("placement.require_memory_fraction_for_colocation is true")
    if c.requested:
        because.append(f"{c.model} recommends no fraction for {', '.join(c.missing)} on this "
                       f"split")
    return Prose(
        f"GPU {c.gpu} is shared by processes {', '.join(c.processes)}, but {', '.join(c.missing)} "
        f"declare{'s' if len(c.missing) == 1 else ''} no GPU memory fraction", tuple(because),
        ("declare a gpu_memory_fraction" if isinstance(c.card, EngineTarget) else
         "declare runtime.resources.total_gpu_memory_fraction")
        + " for each (sized to your models; these shares fit the limit); "
        + fractions_hint(c.card, c.proposal))


def _count(n: int, thing: str) -> str:
    """`1 GPU`, `2 GPUs`: a count with its noun, singular or plural."""
    return f"{n} {thing}{'' if n == 1 else 's'}"


def _insufficient(c: InsufficientCapacity) -> Prose:
    # Short sentences, one fact each: what a replica needs, what each kind of node holds and
    # why, what the cluster holds.
    need = [f"a whole GPU (logical GPU {l})" if share >= 1.0 - 1e-9 else
            f"{share:.3f} of a GPU (logical GPU {l})" for l, share in c.gpu_need]
    because = [f"One replica of {c.model} needs {_count(c.cpu_need, 'CPU')} (one per process)."]
    if need:
        because[0] += f" It needs {', '.join(need[:-1]) + ' and ' if need[1:] else ''}{need[-1]}."
    else:
        because[0] += " Its GPU stages run on CPU here: the cluster has no GPU."
    because.append("A replica runs on one node.")
    for n in c.shortfall:
        kind = (f"{_count(len(n.nodes), 'node')} ({', '.join(n.nodes[:3])}"
                f"{', ...' if len(n.nodes) > 3 else ''}) with {_count(n.gpus, 'GPU')}"
                + (f" and {_count(n.cpus, 'CPU')}" if n.cpus is not None else ""))
        if n.by_cpu is not None and (n.by_gpu is None or n.by_cpu < n.by_gpu):
            why = (f"Its CPUs run out first ({_count(n.cpus or 0, 'CPU')}, {c.cpu_need} a "
                   f"replica).")
        elif n.most == 0 and n.gpus < len(c.gpu_need):
            why = f"A replica needs {_count(len(c.gpu_need), 'GPU')} on one node."
        else:
            why = "Its GPUs run out first."
        each = "each holds" if len(n.nodes) > 1 else "holds"
        because.append(f"{kind}: {each} at most {_count(n.most, 'replica')}. {why}")
    proof = "proved by the solver" if c.proved else "a time limit cut the proof short"
    because.append(f"In all, {c.cluster} holds at most {_count(c.most, 'replica')} ({proof}).")
    hints = [f"ask for `--replicas {c.most}`" if c.most else
             "add nodes with enough GPUs and CPUs" if c.gpu_need else "add nodes with more CPUs"]
    asked = 1 if c.requested is None else c.requested
    if c.sharing and c.sharing_most is not None and c.sharing_most >= asked:
        hints.append(f"or let two replicas share a GPU (then {c.sharing_most} fit); "
                     + fractions_hint(c.card, c.sharing))
    if c.requested is None:
        return Prose(f"no replica of {c.model} fits on {c.cluster}", tuple(because),
                     "; ".join(hints))
    verb = "does" if c.requested == 1 else "do"
    return Prose(f"{_count(c.requested, 'replica')} of {c.model} {verb} not fit on {c.cluster}: "
                 f"at most {c.most} {'does' if c.most == 1 else 'do'}", tuple(because),
                 "; ".join(hints))


def _over_cpus(c: OverCpus) -> Prose:
    set_by = {(type(r), getattr(r, "stage", None)): f"`{flag(r)}`" for r in c.asked}
    copies_from = next((v for (k, _), v in set_by.items() if k is not Threads),
                       "the config" if c.copies > 1 else "one copy")
    parts = ", ".join(
        f"{s} {n} thread{'s' if n != 1 else ''} "
        f"({set_by.get((Threads, s), 'the config' if n > 1 else 'the default')})"
        for s, n in c.threads)
    busiest = max(n for _, n in c.threads) * c.copies
    because = because_requests(c.placement) + [
        f"process {c.process} runs {c.copies} cop{'ies' if c.copies != 1 else 'y'} "
        f"({copies_from}) of {parts}: up to {busiest} threads of one stage busy at once",
        f"the node has {c.cpus} CPU{'s' if c.cpus != 1 else ''}"]
    kept = [r for r in c.asked if type(r) is not type(c.proposal[0])]
    return Prose(
        f"process {c.process} would run {busiest} threads of one stage at once on "
        f"{c.cpus} CPUs", tuple(because),
        f"ask for what fits: run with {quoted(tuple(kept) + c.proposal)}")
