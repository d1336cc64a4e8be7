"""How the launcher's processes log.

Every runtime module logs through its own logger (`logging.getLogger(__name__)`), so a record
says which module wrote it and an operator can turn one part up (`launcher.worker` to DEBUG) and
leave the rest. What a record must say where it is written: a stage failure names the stage,
the request and the process (the worker logs it with its traceback; the supervisor names all
three where it fails the request).

`configure` gives a process its one handler, on stderr: the serving process (`planner serve
--log-level`) and every worker, whose records also name the worker process, since a local
worker's stderr is the serving process's stderr and their lines arrive interleaved. A worker logs
at the level the launching process had for the `launcher` loggers when it launched
(`worker_level`): a library user who configured nothing gets warnings and errors, as from any
Python library.
"""

from __future__ import annotations

import logging
import sys

LEVELS = ("debug", "info", "warning", "error")  # `--log-level`'s choices, quietest last
DEFAULT_LEVEL = "warning"
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class _Handler(logging.StreamHandler):
    """The one handler `configure` installs (a second `configure` replaces it)."""


def level_number(level: int | str) -> int:
    """`level` as the `logging` number: 10, "debug" and "DEBUG" are the same level."""
    if isinstance(level, int):
        return level
    number = logging.getLevelName(level.upper())
    if not isinstance(number, int):
        raise ValueError(f"unknown log level {level!r}; use one of {', '.join(LEVELS)}")
    return number


def configure(level: int | str, process: str | None = None) -> None:
    """Send this process's records at `level` and above to stderr, each one line (a traceback
    follows its record). `process`: the worker this process is, named in every record."""
    where = ""
    if process is not None:
        where = f" worker {process.replace('%', '%%')} (pid %(process)d)"
    handler = _Handler(sys.stderr)
    handler.setFormatter(logging.Formatter(FORMAT.replace(" %(name)s", where + " %(name)s", 1)))
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _Handler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level_number(level))


def worker_level() -> int:
    """The level a worker logs at: the launching process's, for the launcher's loggers."""
    return logging.getLogger("launcher").getEffectiveLevel()
