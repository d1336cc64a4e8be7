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
    OverPinned,
    PinOutsideNode,
    RankNameTaken,
    SharedRankNames,
    SpansGpus,
    UnsupportedHandoff,
)
from planner.plan import ComputeRequest, Copies, Fix, Isolate, Pin, Request, Threads, cpu_text
from planner.flags import flag, flags


@dataclass(frozen=True)
class Prose:
    message: str
    because: tuple[str, ...]
    hint: str


def quoted(requests: tuple[Request | ComputeRequest, ...]) -> str:
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


def edit_text(fix: Fix) -> str:
    """A fix's edit of the command's flags, as the hint says it: `replace A with B`, `drop A`,
    `add B`."""
    if fix.drop and fix.add:
        return f"replace {quoted(fix.drop)} with {quoted(fix.add)}"
    if fix.drop:
        return f"drop {quoted(fix.drop)}"
    return f"add {quoted(fix.add)}" if fix.add else "change nothing"


def placement_hint(fix: Fix | None, what: str, declared: bool = False) -> str:
    """`what` to do, then the edit that does it; `declared`: the edit leaves the declared
    topology, which is valid."""
    if fix is None:
        return f"no placement near this request avoids the conflict; {what}"
    valid = " (the declared topology is valid)" if declared and not fix.add else ""
    return f"{what}: {edit_text(fix)}{valid}"


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


def describe(c: Conflict, fix: Fix | None = None) -> Prose:
    """The sentences of conflict `c`; its hint says what `fix` (the typed fix it came with) does."""
    match c:
        case UnsupportedHandoff():
            return _unsupported(c, fix)
        case DeclaredSplit():
            return _declared_split(c, fix)
        case ConflictingRecommendation():
            listed = "; ".join(f"{v:g} from {e[0]} -> {e[1]}" for e, v in c.recommendations)
            because = because_requests(c.requests) + [
                f"{c.model} recommends different fractions for {c.stage} on the split handoffs: "
                f"{listed}"]
            return Prose(f"stage {c.stage} gets conflicting recommended fractions ({listed})",
                         tuple(because), placement_hint(fix, "split only one of those handoffs",
                                                         c.nearest == ()))
        case OverLimit():
            times = dict(c.copies)
            parts = ", ".join(f"{s} {v:g}" + (f" in each of {times[s]} copies" if s in times
                                                else "") for s, v in c.fractions)
            because = because_requests(c.requests) + [
                f"the stages on GPU {c.gpu} take {parts}, together {c.total:.3f}",
                f"placement.max_total_gpu_memory_fraction_per_gpu is {c.limit:.3f}"]
            return Prose(
                f"GPU {c.gpu} would be over its memory limit by {c.excess:.3f}", tuple(because),
                f"shrink GPU {c.gpu} by at least {c.excess:.3f}; "
                + fractions_hint(c.card, c.proposal))
        case OverCpus():
            return _over_cpus(c, fix)
        case PinOutsideNode():
            return _pin_outside_node(c, fix)
        case OverPinned():
            return _over_pinned(c, fix)
        case SpansGpus():
            placed = ", ".join(f"{s} (GPU {g})" for s, g in c.placed)
            because = because_requests(c.requests) + [
                f"process {c.process} would hold {placed}, and one process drives one GPU"]
            return Prose(f"process {c.process} would span GPUs {', '.join(map(str, c.gpus))}",
                         tuple(because),
                         placement_hint(fix, "keep the stages of each GPU in their own process",
                                        c.nearest == ()))
        case RankNameTaken():
            because = because_requests(c.requests) + [
                f"{c.process} is the process of rank {c.rank} of tensor-parallel stage "
                f"{c.tp_stage}"]
            return Prose(
                f"process name {c.process} is already taken by a tensor-parallel rank of "
                f"{c.tp_stage}", tuple(because),
                placement_hint(fix, "choose another process name", c.nearest == ()))
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
                f"{c.isolated.stage}, asked to run alone, would share process "
                f"{c.isolated.process} with {', '.join(c.others)}", tuple(because),
                placement_hint(fix, "--isolate-stage only makes singletons; group stages "
                                    "with --stage-process", c.nearest == ()))
        case FusedSplit():
            because = because_requests(c.requests) + [
                f"fused_stages binds {', '.join(c.group)} into one process"]
            return Prose(
                f"{', '.join(c.moved) or c.group[0]} cannot leave fused partner"
                f"{'s' if len(c.partners) > 1 else ''} {', '.join(c.partners)}", tuple(because),
                placement_hint(fix, "move the fused stages together", c.nearest == ()))
        case InsufficientCapacity():
            return _insufficient(c)
    raise TypeError(f"no wording for {type(c).__name__}")


def _unsupported(c: UnsupportedHandoff, fix: Fix | None) -> Prose:
    u, v = c.edge
    because = because_requests(c.requests) + [
        f"{c.model} needs {u} -> {v} inside one process: {c.reason}"]
    hint = placement_hint(fix, f"keep {u} and {v} in one process", c.nearest == ())
    if fix is not None and fix.otherwise is not None:
        hint += (f"; or, to keep {', '.join(c.moved)} where you asked, move the partner along: "
                 f"{edit_text(fix.otherwise)}")
    return Prose(f"the request splits {u} -> {v}, which {c.model} does not support across "
                 f"processes", tuple(because), hint)


def _declared_split(c: DeclaredSplit, fix: Fix | None) -> Prose:
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
    if fix is None or c.placement is None:
        return Prose(message, tuple(because), f"keep {u} and {v} in one process in {who}")
    if isinstance(c.card, EngineTarget):  # sglang-omni's stages mapping
        text = "stages:\n" + "\n".join(f"  {s}: {{process: {p}}}" for s, p in c.placement)
    else:
        text = "stages:\n" + "\n".join(f"  - {{name: {s}, process: {p}}}"
                                        for s, p in c.placement)
    hint = f"keep {u} and {v} in one process: set in {who}:\n{text}"
    if fix.drop:
        hint += f"\nand drop {quoted(fix.drop)}"
    if fix.otherwise is not None:
        hint += f"\nor, for one run, {edit_text(fix.otherwise)}"
    return Prose(message, tuple(because), hint)


def _missing_fraction(c: MissingFraction) -> Prose:
    because = because_requests(c.requests)
    if not because:
        because.append(f"the declared topology already runs {', '.join(c.processes)} on GPU "
                       f"{c.gpu}")
    because.append("placement.require_memory_fraction_for_colocation is true")
    if c.requested:
        because.append(f"{c.model} recommends no fraction for this split")
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


def _declared_by(card: CardTarget | None) -> str:
    return "the card" if card is not None else "your config"


def _threads_facts(threads: tuple[tuple[str, int], ...], asked: tuple[ComputeRequest, ...],
                   declared: tuple[str, ...], who: str) -> list[str]:
    """Where each stage's threads come from: its flag, the config, or the default (one)."""
    by_flag = {r.stage: r for r in asked if isinstance(r, Threads)}
    out = [f"`{flag(by_flag[s])}` gives {s} {_count(n, 'thread')}" for s, n in threads
           if s in by_flag]
    out += [f"{s} runs {_count(n, 'thread')} as {who} declares" for s, n in threads
            if s not in by_flag and s in declared]
    default = [s for s, _ in threads if s not in by_flag and s not in declared]
    if len(default) > 1 and len(default) == len(threads):
        out.append("every stage runs 1 thread (the default)")
    elif default:
        each = " each" if len(default) > 1 else ""
        out.append(f"{_listed(default)} run{'' if default[1:] else 's'} 1 thread{each} "
                   "(the default)")
    return out


def _copies_fact(process: str, copies: int, flag_: ComputeRequest | None, who: str) -> str:
    if flag_ is not None:
        return f"`{flag(flag_)}` runs {copies} copies of process {process}"
    return f"{who} runs {copies} copies of process {process}"


def _listed(names: list[str] | tuple[str, ...]) -> str:
    """`a`, `a and b`, `a, b and c`."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _cpus_named(cpus: tuple[int, ...]) -> str:
    return f"CPU{'s' if len(cpus) > 1 else ''} {cpu_text(cpus)}"


def _over_cpus(c: OverCpus, fix: Fix | None) -> Prose:
    # The facts once each (the request, the config, the node), then what cannot happen.
    who = _declared_by(c.card)
    copy_flag = next((r for r in c.asked if isinstance(r, Copies)), None)
    because = because_requests(c.placement) if c.copies > 1 else []
    if c.copies > 1:
        because.append(_copies_fact(c.process, c.copies, copy_flag, who))
    because += _threads_facts(c.threads, c.asked, c.declared, who)
    because.append(f"the node has {_count(c.cpus, 'CPU')}")
    names = [s for s, _ in c.threads]
    whose = f"{names[0]}'s threads" if len(names) == 1 else \
        f"the threads of {', '.join(names[:-1])} or {names[-1]}"
    if c.ranks:
        message = f"each rank process of {names[0]} cannot run its threads at once"
    elif c.copies > 1:
        message = f"process {c.process} cannot run {whose} in every copy at once"
    else:
        message = f"process {c.process} cannot run {whose} at once"
    hint = f"ask for what fits: {edit_text(fix)}" if fix is not None else "ask for fewer threads"
    return Prose(message, tuple(because), hint)


def _pin_outside_node(c: PinOutsideNode, fix: Fix | None) -> Prose:
    pinned = f"pins process {c.process} to {_cpus_named(c.pinned)}"
    because = [f"`{flag(c.asked)}` {pinned}" if c.asked is not None
               else f"{_declared_by(c.card)} {pinned}",
               f"the node has {_cpus_named(c.node_cpus)}" if c.node_cpus
               else "the node has no CPU this process may run on"]
    some = "a CPU" if len(c.missing) == 1 else "CPUs"
    hint = ("pin it to CPUs the node has: " + edit_text(fix)) if fix is not None else \
        "drop the pin"
    return Prose(f"process {c.process} would run on {some} the node does not have",
                 tuple(because), hint)


def _over_pinned(c: OverPinned, fix: Fix | None) -> Prose:
    pinned = f"pins process {c.process} to {_cpus_named(c.pinned)}"
    because = [f"`{flag(c.pin_flag)}` {pinned}" if c.pin_flag is not None
               else f"the config's `processes:` {pinned}"]
    if c.copies > 1:
        because.append(_copies_fact(c.process, c.copies, c.copy_flag, "the config") +
                       ", each on its share of them")
    asked = (c.thread_flag,) if c.thread_flag is not None else ()
    because += _threads_facts(((c.stage, c.threads),), asked,
                              (c.stage,) if c.declared_threads else (), "the config")
    every = " in every copy" if c.copies > 1 else ""
    hints = []
    for choice in (fix.choices if fix is not None else ()):
        pin = next((r for r in choice.add if isinstance(r, Pin)), None)
        copies = next((r for r in choice.add if isinstance(r, Copies)), None)
        what = (f"pin it to {_count(len(pin.cpus or ()), 'CPU')}" if pin is not None
                else "run fewer copies" if copies is not None and len(choice.add) == 1
                else "give it one copy" if copies is not None
                else f"give {choice.add[0].stage} fewer threads" if len(choice.add) == 1
                else "give its stages fewer threads")
        hints.append(f"{what}: {edit_text(choice)}")
    return Prose(f"process {c.process} cannot run {c.stage}'s threads{every} at once on the "
                 f"CPUs it is pinned to", tuple(because), "; or ".join(hints))
