"""The errors `planner tune` reports to its user."""

from __future__ import annotations


class TuneError(Exception):
    """A tune request that cannot run; the message is one paragraph (exit 2)."""
