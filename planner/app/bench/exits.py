"""How `planner bench` ends: its exit codes beyond the planner's own (0 ok, 1 infeasible, 2 invalid
request), and `BenchError`, the one way any bench module stops the run with a message for the
user."""

from __future__ import annotations

from planner.plan import EXIT_INFEASIBLE, EXIT_INVALID

# Every request of some placement (or --url server) at some load failed: as bad as infeasible.
EXIT_ALL_FAILED = EXIT_INFEASIBLE
# A placement could not be served (as for `planner serve`), or a --url server cannot be reached
# or does not answer with audio.
EXIT_RUN_FAILED = 3


class BenchError(Exception):
    """The bench cannot go on: one paragraph saying why and what to do, and the exit code it ends
    with (invalid input unless said). The CLI prints the paragraph alone, never a traceback."""

    def __init__(self, message: str, exit_code: int = EXIT_INVALID) -> None:
        super().__init__(message)
        self.exit_code = exit_code


__all__ = ["EXIT_ALL_FAILED", "EXIT_INVALID", "EXIT_RUN_FAILED", "BenchError"]
