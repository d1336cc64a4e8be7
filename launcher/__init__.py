"""Run a planned topology: worker processes, shared-memory handoffs, supervision, HTTP.

`launch(plan) -> Deployment` is the Python API; `launcher.serve.serve(plan, ...)` adds the HTTP
front door. Importing this package imports torch, so `planner` imports it only lazily.
"""

from .audio import SAMPLE_RATE, Audio
from .deployment import Deployment, SpeechRequest, launch
from .errors import LaunchError, RequestFailed, RequestTimeout, StageFailed, Unavailable, WorkerDied

__all__ = [
    "SAMPLE_RATE", "Audio", "Deployment", "LaunchError", "RequestFailed", "RequestTimeout",
    "SpeechRequest", "StageFailed", "Unavailable", "WorkerDied", "launch",
]
