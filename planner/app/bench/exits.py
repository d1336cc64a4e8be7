"""`planner bench`'s exit codes beyond the planner's own (0 ok, 1 infeasible, 2 invalid request)."""

from __future__ import annotations

from planner.plan import EXIT_INFEASIBLE, EXIT_INVALID

# Every request of some placement (or --url server) at some load failed: as bad as infeasible.
EXIT_ALL_FAILED = EXIT_INFEASIBLE
# A placement could not be served (as for `planner serve`), or a --url server cannot be reached
# or does not answer with audio.
EXIT_RUN_FAILED = 3

__all__ = ["EXIT_ALL_FAILED", "EXIT_INVALID", "EXIT_RUN_FAILED"]
