"""Running the examples of a page as a user would, in a working directory of their own, and
writing their outputs back into the page:

    python -m tests.doc_examples --update README.md docs/own-model.md docs/walkthrough.md

reruns every example of those pages in order (one working directory per page, as one shell
session: a later command sees the files an earlier one wrote) and puts each command's output
in the page, keeping the page's `...` elisions where the lines around them are still there.
Without `--update` it only says which examples differ. What an example is and how its output is
compared: tests/doc_pages.py.

- `planner models`, `show`, `solve` and `tune --profile` run in this process (milliseconds to a
  few seconds), with this thread on CPUs 0 and 1: `solve` counts the CPUs the planner may use,
  and the pages were made seeing two. Every other `planner` command runs as `python -m planner`
  on those two CPUs too.
- `planner serve` starts a server on a free port (the pages show 8000) and stays up while the
  rest of its block runs; the lines up to its `ready:` line are its output. Then it is stopped
  as Ctrl-C stops it.
- Other commands (`curl`, `file`) run in bash, `:8000` meaning the server's port.
- A relative path the repository holds (a saved profile) is copied into the working directory
  first; a file the page shows whole (tests/doc_pages.py) is written there.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from tests.doc_pages import Command, Example, Kind, diff, examples, files, keep_elisions, matches

ROOT = Path(__file__).resolve().parents[1]
PAGE_CPUS = {0, 1}
PAGE_PORT = 8000
TIMEOUT_S = 900.0


def page_cpus_available() -> bool:
    return PAGE_CPUS <= os.sched_getaffinity(0)


@contextlib.contextmanager
def on_page_cpus() -> Iterator[None]:
    """This thread (and what it forks) on the pages' CPUs, as `taskset -c 0,1` would put it."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, PAGE_CPUS)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def _pin() -> None:
    os.sched_setaffinity(0, PAGE_CPUS)


def _env() -> dict[str, str]:
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{path}" if path else str(ROOT)}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`planner serve ...` in the background, its output read as it comes."""

    def __init__(self, command: Command, workdir: Path, port: int):
        argv = command.argv[1:]
        if "--port" not in argv:
            argv += ["--port", str(port)]
        self.port = port
        self.lines: list[str] = []
        self.proc = subprocess.Popen([sys.executable, "-m", "planner", *argv], cwd=workdir,
                                     env=_env(), stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, preexec_fn=_pin)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n").replace(f":{self.port}", f":{PAGE_PORT}"))

    def ready_output(self) -> list[str]:
        from tests.waiting import wait_until

        def ready():
            done = any(line.startswith("ready:") for line in self.lines)
            return done or self.proc.poll() is not None

        wait_until(ready, timeout=TIMEOUT_S, what="the server's ready line")
        n = next((i + 1 for i, line in enumerate(self.lines) if line.startswith("ready:")),
                 len(self.lines))
        return self.lines[:n]

    def stop(self) -> None:
        from tests.processes import interrupt

        if self.proc.poll() is None:
            interrupt(self.proc)
        self._reader.join(timeout=30)


def run_in_process(argv: list[str], workdir: Path) -> list[str]:
    from planner.app.cli import main

    out = io.StringIO()
    with contextlib.chdir(workdir), contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(out), on_page_cpus():
        try:
            main(argv)
        except SystemExit:  # argparse's own exits
            pass
    return out.getvalue().splitlines()


def run_command(command: Command, workdir: Path, port: int) -> list[str]:
    if command.is_planner and command.kind is Kind.EXACT:
        return run_in_process(command.argv[1:], workdir)
    if command.is_planner:
        argv = [sys.executable, "-m", "planner", *command.argv[1:]]
    else:
        argv = ["bash", "-c", command.text.replace(f":{PAGE_PORT}", f":{port}")]
    proc = subprocess.run(argv, cwd=workdir, env=_env(), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=TIMEOUT_S,
                          preexec_fn=_pin)
    return proc.stdout.replace(f":{port}", f":{PAGE_PORT}").splitlines()


def prepare(workdir: Path, page: Path, example: Example) -> None:
    """The files the page shows whole, and the repository's files the commands name."""
    for name, text in files(page).items():
        (workdir / name).parent.mkdir(parents=True, exist_ok=True)
        (workdir / name).write_text(text, encoding="utf-8")
    for command in example.commands:
        for arg in command.argv:
            source = ROOT / arg
            if not arg.startswith(("-", "/")) and "/" in arg and source.is_file() \
                    and not (workdir / arg).exists():
                (workdir / arg).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, workdir / arg)


def run_example(example: Example, workdir: Path) -> list[list[str]]:
    """Each command's output, as the page would show it."""
    prepare(workdir, example.page, example)
    port, server, outputs = free_port(), None, []
    try:
        for command in example.commands:
            if command.subcommand == "serve":
                server = Server(command, workdir, port)
                outputs.append(server.ready_output())
                assert server.proc.poll() is None, "\n".join(server.lines)
            else:
                outputs.append(run_command(command, workdir, port))
    finally:
        if server is not None:
            server.stop()
    return [_trimmed(output) for output in outputs]


def _trimmed(lines: list[str]) -> list[str]:
    """Without the blank lines at the end, which a page does not show."""
    lines = [line.rstrip() for line in lines]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def check(example: Example, workdir: Path) -> list[str]:
    """What differs between the page and a run: one message per command, none when it matches."""
    problems = []
    for command, actual in zip(example.commands, run_example(example, workdir)):
        if not matches(command.expected, actual, command.kind):
            problems.append(f"$ {command.text}\n{diff(command.expected, actual)}")
    return problems


def update(page: Path, only: str | None = None) -> int:
    """Rerun the page's examples in order (with `only`: those whose first command is it) and
    write their outputs into it; how many blocks changed."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found = [e for e in examples(page) if only is None or e.commands[0].text == only]
    bodies = []
    with tempfile.TemporaryDirectory(prefix="doc-examples-") as tmp:
        for example in found:
            print(f"{page}: {example.name}", file=sys.stderr)
            body = []
            for command, actual in zip(example.commands, run_example(example, Path(tmp))):
                body += [*f"$ {command.text}".split("\n"),
                         *keep_elisions(command.expected, actual, command.kind)]
            bodies.append(body)
    changed = 0
    for example, body in reversed(list(zip(found, bodies))):  # from the bottom: indices hold
        if body != lines[example.first_line:example.last_line]:
            lines[example.first_line:example.last_line] = body
            changed += 1
    page.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.doc_examples", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("pages", nargs="+", type=Path)
    parser.add_argument("--update", action="store_true",
                        help="write each command's output into the page")
    parser.add_argument("--only", metavar="COMMAND",
                        help="only the examples whose first command is COMMAND (without `$ `)")
    args = parser.parse_args(argv)
    if not page_cpus_available():
        parser.error(f"the pages were made on CPUs {sorted(PAGE_CPUS)}; this process may not "
                     f"use them all: {sorted(os.sched_getaffinity(0))}")
    failed = 0
    for page in args.pages:
        if args.update:
            print(f"{page}: {update(page, args.only)} example(s) rewritten", file=sys.stderr)
            continue
        with tempfile.TemporaryDirectory(prefix="doc-examples-") as tmp:
            for example in examples(page):
                if args.only is not None and example.commands[0].text != args.only:
                    continue
                problems = check(example, Path(tmp))
                failed += bool(problems)
                print(f"{page}: {example.name}: {'differs' if problems else 'ok'}",
                      file=sys.stderr)
                for problem in problems:
                    print(problem, file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
