"""pin-outside-node: a process group is pinned (`--process-cpus`, `processes: {NAME: {cpus:}}`)
only to CPUs the node has: this machine's are those the OS lets this process run on (a
container or taskset may allow 2 of 8), another node's are 0 to its count - 1.

No placement can satisfy a pin to a CPU that does not exist, so each such pin is one rule
instance that is always broken; its fix is a pin within the node's CPUs."""

from __future__ import annotations

from planner.conflicts import Conflict, PinOutsideNode
from planner.plan import Fix, Pin
from planner.rules.base import Rule, RuleKind
from planner.rules.context import Explanation

CODE = "pin-outside-node"
STATEMENT = "a process group is pinned only to CPUs the node has"


def _pins(problem) -> dict[str, tuple[int, ...]]:
    """Process -> the CPUs it is pinned to, for the groups the request places."""
    processes = set(problem.target.values())
    if problem.compute is not None:
        return {p: c for p, c in problem.compute.cpus.items() if p in processes}
    return {p: c for p, c in problem.pipeline.process_cpus if p in processes}


def encode(model) -> None:
    p = model.problem
    if p.cpu_ids is None:
        return
    have = set(p.cpu_ids)
    for process, pinned in sorted(_pins(p).items()):
        if not set(pinned) <= have:
            model.model.add_bool_or([~model.literal(Rule("pins", process=process))])


def within(pinned: tuple[int, ...], node: tuple[int, ...], taken: set[int]) -> tuple[int, ...]:
    """As many CPUs as `pinned` names, all on the node: those of `pinned` it has, then CPUs no
    other group is pinned to, then any."""
    want = min(len(pinned), len(node))
    chosen = [c for c in pinned if c in node]
    for c in [c for c in node if c not in taken] + list(node):
        if len(chosen) >= want:
            break
        if c not in chosen:
            chosen.append(c)
    return tuple(sorted(chosen[:want]))


def explain(ctx: Explanation, rule: Rule, core: list[Rule]) -> tuple[Conflict, Fix | None]:
    p = ctx.problem
    pins = _pins(p)
    process, node = rule.process, p.cpu_ids or ()
    pinned = pins[process]
    asked = None if p.compute is None else p.compute.pin_flags.get(process)
    taken = {c for q, cs in pins.items() if q != process for c in cs}
    proposal = Pin(process, within(pinned, node, taken))
    conflict = PinOutsideNode(
        process=process, pinned=pinned, missing=tuple(c for c in pinned if c not in node),
        node_cpus=node, asked=asked, proposal=proposal, card=ctx.card_target(),
        members=tuple(s for s in p.pipeline.stage_names if p.target.get(s) == process))
    # A flag wins over the config's `processes:`, so the fix is a flag either way.
    dropped = p.compute.setting(asked) if p.compute is not None else ()
    return conflict, Fix(drop=dropped, add=(proposal,))


RULE = RuleKind(kind="pins", codes=(CODE,), statement=STATEMENT, placement_hard=False,
                encode=encode, explain=explain)
