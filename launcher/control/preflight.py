"""Checks a stage's factory module can make before any process starts.

A factory module may define `preflight(factory_name, args)`, raising `RuntimeError` with one
paragraph that says what is missing and how to install it (e.g. `launcher.piper` needs the
espeak-ng program). `serve` turns that into exit code 2 with nothing started; `launch` into a
`LaunchError` before its first worker.
"""

from __future__ import annotations

import importlib


class SetupError(RuntimeError):
    """Something a stage needs is not installed."""


def check(plan) -> None:
    """Raise `SetupError` naming the stage when a factory module's `preflight` refuses."""
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
