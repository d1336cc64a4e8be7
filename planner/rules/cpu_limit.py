"""over-cpus: one process group's copies fit the node: each stage's threads, times the copies of
the process it runs in, are at most the node's CPUs.

Encoded per process the solver may put a stage in, so the rule follows placement: three copies of
a one-thread vocoder fit two CPUs only while it shares no copied group. Threads summed over every
stage and copy may exceed the CPUs (a pipeline's stages take turns on a request; the plan says so
as a warning); one stage's calls running at once in every copy may not."""

from __future__ import annotations

from planner.conflicts import Conflict, OverCpus
from planner.plan import ComputeRequest, Copies, Fix, Threads
from planner.rules.base import Rule, RuleKind
from planner.rules.context import Explanation

CODE = "over-cpus"
STATEMENT = "a stage's threads times its process's copies are at most the node's CPUs"


def encode(model) -> None:
    p, m = model.problem, model.model
    if p.cpus is None:
        return
    threads = p.threads
    for proc, stages in model.by_process.items():
        over = [s for s in stages if threads[s] * p.copies_of(proc) > p.cpus]
        if not over:
            continue
        lit = model.literal(Rule("cpus", process=proc))
        for s in over:
            m.add_bool_or([~lit, ~model.x[s, proc]])
    for s in p.tp_stages:  # one process per rank, never copied
        if threads[s] > p.cpus:
            m.add_bool_or([~model.literal(Rule("cpus", stage=s, process=s))])


def explain(ctx: Explanation, rule: Rule, core: list[Rule]) -> tuple[Conflict, Fix | None]:
    p = ctx.problem
    process, cpus = rule.process, p.cpus
    members = (rule.stage,) if rule.stage else tuple(
        s for s in p.pipeline.stage_names if p.target.get(s) == process)
    copies = 1 if rule.stage else p.copies_of(process)
    over = tuple((s, p.threads[s]) for s in members if p.threads[s] * copies > cpus)
    widest = max(n for _, n in over)
    compute = p.compute
    thread_flags = {} if compute is None else {s: compute.thread_flags[s] for s, _ in over
                                               if s in compute.thread_flags}
    copy_flag = None if compute is None else compute.copy_flags.get(process)
    asked: list[ComputeRequest] = list(thread_flags.values())
    if copy_flag is not None:
        asked.append(copy_flag)
    # Keep the copies asked for when the threads can shrink to fit them; else fewer copies (and
    # fewer threads where one copy's are already too many).
    if copies <= cpus and any(n > 1 for _, n in over):
        fit = max(1, cpus // copies)
        proposal: tuple[ComputeRequest, ...] = tuple(Threads(s, fit) for s, _ in over)
    else:
        proposal = (Copies(process, max(1, cpus // widest)),) + tuple(
            Threads(s, cpus) for s, n in over if n > cpus)
    shrunk = {r.stage for r in proposal if isinstance(r, Threads)}
    replaced = [thread_flags[s] for s, _ in over if s in shrunk and s in thread_flags]
    if copy_flag is not None and any(isinstance(r, Copies) for r in proposal):
        replaced.append(copy_flag)
    drop = tuple(f for r in replaced for f in compute.setting(r))  # type: ignore[union-attr]
    flagged = {r.stage for r in asked if isinstance(r, Threads)}
    conflict = OverCpus(process=process, threads=over, copies=copies, cpus=cpus,
                        asked=tuple(asked),
                        declared=tuple(s for s, _ in over if s not in flagged
                                       and p.pipeline.stage(s).threads is not None),
                        placement=ctx.blames(core), proposal=proposal,
                        card=ctx.card_target(), ranks=rule.stage is not None)
    return conflict, Fix(drop=drop, add=proposal)


RULE = RuleKind(kind="cpus", codes=(CODE,), statement=STATEMENT, placement_hard=False,
                encode=encode, explain=explain)
