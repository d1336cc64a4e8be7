"""Checks of this machine made before any process starts: that the CPUs a plan pins its
processes to are ones this process may run on, and what a stage's factory module checks.

A factory module may define `preflight(factory_name, args)`, raising `RuntimeError` with one
paragraph that says what is missing and how to install it (e.g. `models.piper` needs the
espeak-ng program). `serve` turns that into exit code 2 with nothing started; `launch` into a
`LaunchError` before its first worker.
"""

from __future__ import annotations

import importlib

from planner import allowed_cpus, cpu_text


class SetupError(RuntimeError):
    """Something a stage needs is not installed."""


def check(plan) -> None:
    """Raise `SetupError` naming the process whose planned CPUs this machine lacks, or the stage
    whose factory module's `preflight` refuses."""
    _check_cpus(plan)
    for stage in plan.stages:
        module, _, name = (stage.factory or "").partition(":")
        if not module or not name:
            continue
        try:
            hook = getattr(importlib.import_module(module), "preflight", None)
        except ImportError:
            continue  # the worker's build reports it, with its traceback
        if hook is None:
            continue
        try:
            hook(name, dict(stage.factory_kwargs()))
        except RuntimeError as exc:
            raise SetupError(f"stage '{stage.name}' ({stage.factory}): {exc}") from None


def _check_cpus(plan) -> None:
    """`planner solve` already refuses a pin to CPUs the node it plans for lacks
    (`pin-outside-node`); checked again here, on the machine that runs the plan, for a plan made
    for another node."""
    pinned = [g for g in plan.groups if g.cpus]
    if not pinned:
        return
    usable = allowed_cpus()
    if usable is None:
        raise SetupError(f"process '{pinned[0].name}' is pinned to "
                         f"{_cpus_named(pinned[0].cpus)}, but this OS cannot pin a process to CPUs "
                         "(Linux can): drop its --process-cpus or `cpus:`")
    for group in pinned:
        outside = [c for c in group.cpus if c not in usable]
        if outside:
            raise SetupError(
                f"process '{group.name}' is pinned to {_cpus_named(group.cpus)}, but this "
                f"program may run only on CPUs {cpu_text(usable)} ({_cpus_named(outside)} not "
                f"among them): pin it within those, e.g. `--process-cpus "
                f"{group.name}={cpu_text(usable[:len(group.cpus)])}`")


def _cpus_named(cpus) -> str:
    return f"CPU{'s' if len(cpus) > 1 else ''} {cpu_text(cpus)}"
