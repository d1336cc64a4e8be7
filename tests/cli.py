"""Run `planner` as a user does, in one of two ways:

- in this process (`planner.app.cli.main` with its stdout and stderr captured, the environment and the
  working directory as given): the fast lane's way, milliseconds a run;
- as a subprocess (`python -m planner`): the end-to-end way, a second or more a run (the
  interpreter and its imports start each time), so only in the slow lane.

Both return a `subprocess.CompletedProcess`. In this process, an exception that would have been a
traceback propagates and fails the test, as the subprocess's "Traceback" check would."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from collections.abc import Mapping
from unittest import mock

import pytest

# The fixture `cli_mode` in a test module runs each of its tests both ways.
BOTH = ["in-process", pytest.param("subprocess", marks=pytest.mark.slow)]


def run_planner(*args: str, env: Mapping[str, str] | None = None, cwd: str | None = None,
                in_process: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ if env is None else env)
    if not in_process:
        return subprocess.run([sys.executable, "-m", "planner", *args], capture_output=True,
                              text=True, env=env, cwd=cwd, timeout=timeout, check=False)
    from planner.app.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.dict(os.environ, env, clear=True))
        if cwd is not None:
            stack.enter_context(contextlib.chdir(cwd))
        stack.enter_context(contextlib.redirect_stdout(out))
        stack.enter_context(contextlib.redirect_stderr(err))
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse: --help, usage errors
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return subprocess.CompletedProcess(["planner", *args], code, out.getvalue(), err.getvalue())
