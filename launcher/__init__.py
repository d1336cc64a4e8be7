"""Run a planned topology: worker processes, direct shared-memory handoffs, supervision, HTTP.

`launch(plan) -> Deployment` is the Python API; `launcher.serving.serve.serve(plan, ...)` adds the HTTP
front door. The names below are imported on first use, so `import launcher.control.metric_names` (the
bench client does) does not import torch; `planner` imports this package only lazily.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "SAMPLE_RATE": "audio", "Audio": "audio",
    "Deployment": "deployment", "launch": "deployment",
    "SpeechRequest": "control.request_table",
    "cluster_from_ray": "backends.ray_cluster",
    "LaunchError": "errors", "RequestFailed": "errors", "RequestTimeout": "errors",
    "StageFailed": "errors", "Unavailable": "errors", "WorkerDied": "errors",
}

__all__ = [
    "SAMPLE_RATE", "Audio", "Deployment", "LaunchError", "RequestFailed", "RequestTimeout",
    "SpeechRequest", "StageFailed", "Unavailable", "WorkerDied", "cluster_from_ray", "launch",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'launcher' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
