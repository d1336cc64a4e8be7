"""What a running plan offers the code in front of it: the HTTP front door (`serving.http`),
`serving.serve`, the console and a router all speak to a `DeploymentFacade`, never to how it
runs. `deployment.Deployment` (one plan's processes, on one backend) and
`serving.replica_set.ReplicaSet` (several of them behind one door) both declare it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from launcher.audio import Audio
from launcher.control.admission import Refusal
from launcher.control.request_table import SpeechRequest
from launcher.control.states import DeploymentState

if TYPE_CHECKING:
    from planner import Plan


class Flag(Protocol):
    """Set once, read from any thread (a `threading.Event` is one)."""

    def is_set(self) -> bool: ...


class DeploymentFacade(Protocol):
    plan: Plan  # what runs: its model, sample rate, voices and names
    device: str  # cpu or cuda, as resolved
    note: str | None  # a line for the operator about the device (CUDA asked, none found)
    failed: Flag  # set once it gave up (the restart limit): the server then exits non-zero

    @property
    def state(self) -> DeploymentState: ...

    @property
    def in_flight(self) -> int:
        """Requests submitted and not finished."""
        ...

    def submit(self, text: str, voice: str | None = None, stream: bool = False,
               options: Mapping[str, Any] | None = None) -> SpeechRequest:
        """Start synthesising `text`; raises `Unavailable` (or `Overloaded`) when refused."""
        ...

    def synthesize(self, text: str, voice: str | None = None,
                   timeout: float | None = 120.0) -> Audio: ...

    def refusal(self) -> Refusal | None:
        """Why a request submitted now would be refused, or None."""
        ...

    def health(self) -> dict[str, Any]:
        """The /health report: `status` ("ok" when it serves), its processes and their state."""
        ...

    def retry_after(self) -> int:
        """Whole seconds a client refused with 503 should wait before trying again."""
        ...

    def metrics(self, accept: str | None = None) -> tuple[str, str]:
        """(Prometheus exposition, its content type) in the format `accept` asks for."""
        ...

    def metrics_text(self) -> str: ...

    def worker_pids(self) -> dict[str, int]: ...

    def summary(self) -> str:
        """What serves, for the ready line: "2 processes", "3 replicas on ray, 2 processes each"."""
        ...

    def close(self, drain_timeout: float = 0.0) -> None:
        """Stop everything it started; returns once it has."""
        ...
