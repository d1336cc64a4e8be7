"""The lifecycle states of a deployment and of its worker processes, one enum each.

They are `StrEnum`s: a state compares equal to its name and is written as it (in /health, the
console and messages), so what a client reads is unchanged, while the code names every state it
means and a misspelt one fails at import.
"""

from __future__ import annotations

from enum import StrEnum


class DeploymentState(StrEnum):
    STARTING = "starting"  # its processes are building their stages
    RUNNING = "running"  # every process was ready once: it takes requests
    DRAINING = "draining"  # takes no new request; those in flight may finish
    STOPPING = "stopping"  # what is still in flight fails; the processes stop
    STOPPED = "stopped"
    FAILED = "failed"  # gave up (the restart limit, or the supervisor itself died)
    # Of several replicas, not all in one state (a replica set's; never one deployment's).
    DEGRADED = "degraded"

    @property
    def going_away(self) -> bool:
        """No retry here will succeed: a client refused now should go elsewhere."""
        return self in _GOING_AWAY

    @property
    def over(self) -> bool:
        """Stopping or stopped, by request or after giving up: deaths no longer matter."""
        return self in (DeploymentState.STOPPING, DeploymentState.STOPPED,
                        DeploymentState.FAILED)


_GOING_AWAY = frozenset({DeploymentState.DRAINING, DeploymentState.STOPPING,
                         DeploymentState.STOPPED, DeploymentState.FAILED})


class ProcessState(StrEnum):
    STARTING = "starting"  # started, building its stages
    READY = "ready"  # every stage built: it takes payloads
    RESTARTING = "restarting"  # died; started again when its backoff ends
    FAILED = "failed"  # died, and not restarted (the deployment gives up)
    STOPPED = "stopped"  # never started, or stopped with the deployment
    # Ready by the supervisor's account but already dead by the backend's (/health only: the
    # supervisor notices within its poll interval).
    EXITED = "exited"

    @property
    def running(self) -> bool:
        """Its current incarnation runs (or is starting)."""
        return self in (ProcessState.STARTING, ProcessState.READY)
