"""Exceptions the launcher raises; each carries the HTTP status the front door should answer with."""

from __future__ import annotations


class LaunchError(RuntimeError):
    """The deployment could not start: a factory failed, a process died or startup timed out.

    Raised after everything that was started has been stopped again.
    """


class RequestFailed(RuntimeError):
    """A speech request did not produce audio."""

    status = 500


class StageFailed(RequestFailed):
    """A stage raised while handling the request (the process itself is still alive)."""

    status = 500


class WorkerDied(RequestFailed):
    """The process holding part of the request died; the supervisor restarts it."""

    status = 503


class Unavailable(RequestFailed):
    """The deployment cannot take the request now (starting, restarting, stopping, failed)."""

    status = 503


class Overloaded(Unavailable):
    """Admission control refused the request: the deployment holds as many as it takes."""

    status = 429


class RequestTimeout(RequestFailed):
    status = 504
