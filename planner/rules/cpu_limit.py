"""over-cpus: one copy of a stage's process fits the node: the stage's threads, times the copies
of the process it runs in, are at most the node's CPUs.

Counted per stage and per process the solver may put it in, so the rule follows placement: three
copies of a one-thread vocoder fit two CPUs only while it shares no copied group. Threads summed
over every stage and copy may exceed the CPUs (a pipeline's stages take turns on a request; the
plan says so as a warning); one stage's copies running its calls at once may not."""

from __future__ import annotations

from planner.conflicts import Conflict, OverCpus
from planner.plan import Copies, Fix, Threads
from planner.rules.base import Rule, RuleKind
from planner.rules.context import Explanation

CODE = "over-cpus"
STATEMENT = "a stage's threads times its process's copies are at most the node's CPUs"


def encode(model) -> None:
    p, m = model.problem, model.model
    if p.cpus is None:
        return
    threads = p.threads
    for s, dom in model.domains.items():
        over = [proc for proc in dom if threads[s] * p.copies_of(proc) > p.cpus]
        if not over:
            continue
        lit = model.literal(Rule("cpus", stage=s))
        for proc in over:
            m.add_bool_or([~lit, ~model.x[s, proc]])
    for s in p.tp_stages:  # one process per rank, never copied
        if threads[s] > p.cpus:
            m.add_bool_or([~model.literal(Rule("cpus", stage=s))])


def explain(ctx: Explanation, rule: Rule, core: list[Rule]) -> tuple[Conflict, Fix | None]:
    p = ctx.problem
    s = rule.stage
    process = p.target.get(s) or s
    threads, copies, cpus = p.threads[s], p.copies_of(process), p.cpus
    thread_flag = p.compute.thread_flags.get(s) if p.compute else None
    copy_flag = p.compute.copy_flags.get(process) if p.compute else None
    # Keep what the user asked for last and shrink the other first: a copies flag given
    # beside a threads flag keeps its copies when the threads can shrink to fit.
    fit_threads = max(1, cpus // copies)
    fit_copies = max(1, cpus // threads)
    requests = tuple(r for r in (thread_flag, copy_flag) if r is not None)
    if threads > 1 and fit_threads * copies <= cpus:
        proposal: Threads | Copies = Threads(s, fit_threads)
    else:
        proposal = Copies(process, fit_copies)
    kept = tuple(r for r in requests if type(r) is not type(proposal))
    conflict = OverCpus(stage=s, process=process, threads=threads, copies=copies, cpus=cpus,
                        asked=requests, placement=ctx.blames(core), proposal=proposal,
                        card=ctx.card_target())
    return conflict, Fix(compute=kept + (proposal,))


RULE = RuleKind(kind="cpus", codes=(CODE,), statement=STATEMENT, placement_hard=False,
                encode=encode, explain=explain)
