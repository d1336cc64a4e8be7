"""Text for people: rich tables of plans, pipelines and cards, and diagnostics. Decides nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from planner.pipeline import Pipeline
from planner.plan import Diagnostic, Plan, PlanWarning, Result, cpu_text

if TYPE_CHECKING:
    from planner.cards import Card

BAR_WIDTH = 24


def _frac(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def usage_bar(total: float, limit: float) -> Text:
    filled = min(BAR_WIDTH, round(BAR_WIDTH * total / limit)) if limit else BAR_WIDTH
    style = "red" if total > limit + 1e-9 else ("yellow" if total > 0.95 * limit else "green")
    bar = Text("[")
    bar.append("#" * filled, style=style)
    bar.append("." * (BAR_WIDTH - filled), style="dim")
    bar.append(f"] {total:.3f} / {limit:.3f}")
    return bar


def group_threads(plan: Plan, stages: tuple[str, ...]) -> str:
    """`1` when every stage of the group has as many threads, else each stage's count."""
    counts = [plan.stage(s).threads for s in stages]
    if len(set(counts)) == 1:
        return str(counts[0])
    return ", ".join(f"{s} {n}" for s, n in zip(stages, counts))


def _mib(mib: float | None) -> str:
    return "unknown" if mib is None else f"≤{mib:.0f} MiB"


def memory_line(plan: Plan) -> Text:
    """The host memory of the worker processes, where the card declares every stage's."""
    total = plan.memory_mib()
    if total is None:
        silent = [s.name for s in plan.stages if s.host_memory_mib is None]
        return Text(f"Host memory: unknown (no runtime.resources.host_memory_mib for "
                    f"{', '.join(silent)})", style="dim")
    return Text(f"Host memory: at most {total:.0f} MiB for the worker processes, every copy "
                "counted (the card's measured figures per stage, plus each process's own)",
                style="dim")


def plan_tables(plan: Plan, *, show_changed: bool) -> list[Any]:
    t = Table(title="process groups", title_justify="left", show_lines=False)
    t.add_column("process", style="bold")
    t.add_column("stages")
    t.add_column("GPU", justify="right")
    t.add_column("fractions")
    t.add_column("threads")
    t.add_column("copies", justify="right")
    pinned = any(g.cpus for g in plan.groups)
    if pinned:  # a column only where a plan pins: most leave the CPUs to the OS
        t.add_column("CPUs", justify="right")
    t.add_column("memory", justify="right")
    if show_changed:
        t.add_column("changed")
    for g in plan.groups:
        fr = ", ".join(
            f"{s} {_frac(plan.stage(s).fraction)}" + (
                "*" if plan.stage(s).fraction_source == "recommended" else "") + (
                f" (compute {_frac(plan.stage(s).gpu_compute_fraction)})"
                if plan.stage(s).gpu_compute_fraction is not None else "")
            for s in g.stages if plan.stage(s).gpus)
        gpu = ("CPU" if g.gpu is None else ", ".join(map(str, g.devices)) if g.devices
               else str(g.gpu))
        row = [g.name, ", ".join(g.stages), gpu, fr or "-",
               group_threads(plan, g.stages), str(g.copies)]
        if pinned:
            row.append(" | ".join(map(cpu_text, g.copy_cpus())) if g.cpus else "any")
        row.append(_mib(plan.process_memory_mib(g.stages)))
        if show_changed:
            row.append("yes" if g.changed else "")
        t.add_row(*row)
    for p in plan.tp_processes:
        s = plan.stage(p.stage)
        row = [p.name, f"{p.stage} (TP rank {p.rank}/{s.tp_size})", str(p.gpu),
               f"{p.stage} {_frac(s.fraction)}", str(s.threads), "1"]
        if pinned:
            row.append("any")
        row.append(_mib(plan.process_memory_mib((p.stage,))))
        if show_changed:
            row.append("")
        t.add_row(*row)
    out: list[Any] = [t]
    if plan.cpu is not None and plan.cpu.cpus is not None:
        over = " (oversubscribed)" if plan.cpu.oversubscribed and plan.cpu.asked else ""
        out.append(Text(f"CPU threads: {plan.cpu.threads} on {plan.cpu.cpus} CPUs, every copy "
                        f"counted{over}", style="yellow" if over else "dim"))
    out.append(memory_line(plan))
    if plan.gpus:
        gt = Table(title="GPU memory (fractions)", title_justify="left")
        gt.add_column("GPU", justify="right")
        gt.add_column("usage against limit")
        gt.add_column("processes")
        gt.add_column("missing fraction")
        for g in plan.gpus:
            gt.add_row(str(g.id), usage_bar(g.total, g.limit), ", ".join(g.processes),
                       ", ".join(g.missing_fraction) or "")
        out.append(gt)
    if any(s.fraction_source == "recommended" for s in plan.stages):
        out.append(Text("* recommended fraction applied because the request splits its handoff",
                        style="dim"))
    if any(g.devices for g in plan.groups):
        out.append(Text("GPU column: the GPU of each copy, in copy order", style="dim"))
    if plan.mps is not None:
        out.append(Text(f"MPS: {plan.mps} (written to engine configs; `planner serve` starts no "
                        "MPS daemon)", style="dim"))
    if plan.carried:
        out.append(Text("carried, not planned: " + ", ".join(c.key for c in plan.carried),
                        style="dim"))
    return out


def _subject(d: Diagnostic) -> str:
    if d.edge:
        return f"{d.edge[0]} -> {d.edge[1]}"
    if d.gpu is not None:
        return f"GPU {d.gpu}"
    return ", ".join(d.stages)


def diagnostic_text(d: Diagnostic) -> Text:
    t = Text()
    t.append(f"error[{d.code}]", style="bold red")
    subject = _subject(d)
    t.append(f" {subject}\n" if subject else "\n")
    if d.because and all(f[:1].isupper() or f[:1].isdigit() for f in d.because) \
            and all(f.endswith(".") for f in d.because):
        # Facts written as whole sentences: the verdict first, then one sentence a line.
        t.append(f"  {d.message[:1].upper()}{d.message[1:]}.\n")
        for fact in d.because:
            t.append(f"  {fact}\n")
    elif d.because:
        facts = list(d.because)
        joined = facts[0] if len(facts) == 1 else ", ".join(facts[:-1]) + " and " + facts[-1]
        t.append(f"  Because {joined}, {d.message}.\n")
    else:
        t.append(f"  {d.message}\n")
    if d.hint:
        lines = d.hint.splitlines()
        t.append("  hint: ", style="bold cyan")
        t.append(lines[0] + "\n")
        for line in lines[1:]:
            t.append("        " + line + "\n")
    return t


def warning_text(w: PlanWarning) -> Text:
    t = Text()
    t.append(f"warning[{w.code}]", style="bold yellow")
    t.append(f": {w.message}")
    return t


def summary(result: Result) -> str:
    """Where a solved plan came from, so a config that moved stages is not read as ignored."""
    who = "your config" if result.declared_by == "config" else "the card"
    if result.changed:
        return f"changed by flags from the topology {who} declares"
    return f"as {who} declares, no flag changed it"


def render_result(console: Console, result: Result) -> None:
    head = Text()
    head.append(result.model or "request", style="bold")
    if result.variant and result.model:
        head.append(f" (variant {result.variant})")
    head.append(": ")
    style = {"ok": "green", "infeasible": "red", "error": "red"}[result.status]
    head.append(result.status, style=f"bold {style}")
    if result.ok:
        head.append(" - " + summary(result))
    console.print(head)
    if result.ok and result.plan:
        console.print(Group(*plan_tables(result.plan, show_changed=True)))
    if result.ok and result.packing is not None:
        console.print(Group(*replica_tables(result)))
    for w in result.warnings:
        console.print(warning_text(w))
    for d in result.diagnostics:
        console.print(diagnostic_text(d))


def replica_tables(result: Result) -> list[Any]:
    """Where each replica runs (logical -> physical GPUs) and every physical GPU's memory."""
    packing, plan = result.packing, result.plan
    procs = ", ".join([g.name for g in plan.groups] + [p.name for p in plan.tp_processes])
    requested = "max" if packing.requested is None else str(packing.requested)
    proof = "proved" if packing.proved else "not proved: a time limit cut the proof short"
    t = Table(title=f"replicas: {len(packing.replicas)} (asked {requested}; at most "
                    f"{packing.most} fit, {proof}) on {result.cluster.source}",
              title_justify="left")
    for col in ("replica", "node", "logical GPU -> physical GPU", "processes"):
        t.add_column(col)
    for r in packing.replicas:
        t.add_row(str(r.index), r.node, ", ".join(f"{l} -> {g}" for l, g in r.gpus) or "CPU",
                  procs)
    out: list[Any] = [t]
    if packing.loads:
        g = Table(title="GPU memory per physical GPU (fractions)", title_justify="left")
        for col in ("node", "GPU", "usage against limit", "replicas"):
            g.add_column(col)
        for load in packing.loads:
            g.add_row(load.node, str(load.id), usage_bar(load.total, load.limit),
                      ", ".join(map(str, load.replicas)) or "-")
        out.append(g)
    return out


# -- planner show / planner models ----------------------------------------------------------------
def render_show(console: Console, pipeline: Pipeline, plan: Plan) -> None:
    console.print(Text.assemble((pipeline.name, "bold"), f" (variant {pipeline.variant})"))
    st = Table(title="stages", title_justify="left")
    for col in ("stage", "process", "GPU", "tp", "fraction", "threads", "factory"):
        st.add_column(col)
    for s in pipeline.stages:
        p = plan.stage(s.name)
        gpu = "CPU" if not s.gpus else ", ".join(map(str, s.gpus))
        st.add_row(s.name, p.process, gpu, str(s.tp_size), _frac(s.fraction), str(p.threads),
                   s.factory or "-")
    console.print(st)
    ht = Table(title="handoffs", title_justify="left")
    for col in ("edge", "kind", "across processes"):
        ht.add_column(col)
    for (u, v), kinds in pipeline.handoffs().items():
        reason = pipeline.unsupported_reason((u, v))
        ht.add_row(f"{u} -> {v}", ", ".join(kinds),
                   Text("safe", style="green") if reason is None
                   else Text(f"unsupported: {reason}", style="red"))
    console.print(ht)
    if pipeline.edge_resources:
        rt = Table(title="recommended fractions (applied when a request splits the edge)",
                   title_justify="left")
        rt.add_column("edge")
        rt.add_column("fractions")
        for r in pipeline.edge_resources:
            rt.add_row(f"{r.edge[0]} -> {r.edge[1]}",
                       ", ".join(f"{s} {v:.2f}" for s, v in r.fractions))
        console.print(rt)
    if pipeline.roles:
        console.print("roles: " + ", ".join(f"{a} -> {t}" for a, t in pipeline.roles))
    console.print(Group(*plan_tables(plan, show_changed=False)))


def render_models(console: Console, cards: tuple[Card, ...]) -> None:
    """One card per row: its name (and the model's), its variants and every name that selects it,
    one a line. Those names are what a user copies, so they are never wrapped: with no vertical
    rules the table fits 80 columns (tests/planner/test_models_table.py)."""
    from rich import box

    t = Table(title="built-in model cards", title_justify="left", box=box.SIMPLE_HEAD,
              show_lines=True, show_edge=False, pad_edge=False)
    t.add_column("card (model)", min_width=max(len(c.name) for c in cards))
    t.add_column("variants", no_wrap=True)
    t.add_column("selected by (MODEL or --model-path)", no_wrap=True)
    for c in cards:
        name = Text(c.name, style="bold")
        name.append(f"\n{c.display_name}", style="dim")
        t.add_row(name, "\n".join(c.variants),
                  "\n".join([*c.model_paths, *c.architectures]) or c.name)
    console.print(t)
