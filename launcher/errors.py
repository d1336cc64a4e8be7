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
    """A stage raised while handling the request (the process itself is still alive).

    `worker_traceback`: where it raised, as its worker logged it ("" when it did not raise).
    It is for the operator (the Python caller, the server's log), never sent to HTTP clients."""

    status = 500

    def __init__(self, message: str, worker_traceback: str = "") -> None:
        super().__init__(message)
        self.worker_traceback = worker_traceback


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
