"""Where the command writes: rich consoles for tables and errors, and the one-paragraph error."""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.plan import EXIT_INVALID

if TYPE_CHECKING:
    from rich.console import Console

FORMATS = ("table", "json", "dot")
EXIT_BROKEN_PIPE = 141  # what a shell reports for a writer ended by SIGPIPE


def console(stderr: bool = False) -> Console:
    from rich.console import Console  # on use: `--format json` never pays for rich

    # Piped output gets a wide fixed width so tables and hints are not folded mid-flag.
    out = Console(highlight=False, stderr=stderr)
    if not out.is_terminal:
        # Piped or captured: never fold a sentence or a flag mid-way; tables keep 120 columns.
        out = Console(highlight=False, stderr=stderr, width=120, soft_wrap=True)
    return out


def error(message: str) -> int:
    """Print one paragraph on stderr; the exit code of invalid input."""
    # The message quotes what the user wrote, which must not be read as rich markup.
    from rich.markup import escape

    console(stderr=True).print(f"[bold red]error:[/] {escape(message)}", markup=True)
    return EXIT_INVALID
