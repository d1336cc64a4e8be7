"""How the launcher logs: each runtime module through a logger of its own, a worker's records
naming the worker, and `planner serve --log-level` choosing what reaches stderr."""

from __future__ import annotations

import ast
import io
import logging
from pathlib import Path

import pytest

from launcher import logs

ROOT = Path(__file__).resolve().parents[2]
ROOT_LOGGER_CALLS = {"debug", "info", "warning", "error", "exception", "critical", "log"}
# The runtime's parts that report something an operator needs (the rest only compute).
REPORTING = ("launcher/worker/stages.py", "launcher/worker/main.py",
             "launcher/control/supervisor.py", "launcher/deployment.py",
             "launcher/backends/local.py", "launcher/backends/ray_backend.py",
             "launcher/backends/links.py", "launcher/serving/http.py",
             "launcher/serving/replica_set.py")


def _logging_use(path: Path) -> tuple[list[str], bool]:
    """(what is wrong with how `path` logs, whether it has a logger of its own)."""
    wrong, own = [], False
    for node in ast.walk(ast.parse(path.read_text())):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "logging"):
            continue
        if node.func.attr == "getLogger":
            if [ast.unparse(a) for a in node.args] == ["__name__"]:
                own = True
            elif not str(path).endswith("launcher/logs.py"):  # it configures the root logger
                wrong.append(f"{path.relative_to(ROOT)}:{node.lineno}: getLogger("
                             f"{', '.join(ast.unparse(a) for a in node.args)})")
        elif node.func.attr in ROOT_LOGGER_CALLS:
            wrong.append(f"{path.relative_to(ROOT)}:{node.lineno}: logging.{node.func.attr}() "
                         "writes to the root logger")
    return wrong, own


def test_every_launcher_module_logs_through_its_own_logger():
    wrong = []
    for path in sorted((ROOT / "launcher").rglob("*.py")):
        wrong += _logging_use(path)[0]
    assert wrong == []
    assert [p for p in REPORTING if not _logging_use(ROOT / p)[1]] == []


@pytest.fixture
def root_logger():
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield root
    root.handlers[:], root.level = handlers, level


def test_a_workers_records_name_it_and_configuring_twice_keeps_one_handler(root_logger,
                                                                           monkeypatch):
    stderr = io.StringIO()
    monkeypatch.setattr("sys.stderr", stderr)
    logs.configure("info")
    logs.configure(logging.DEBUG, process="voc%oder")
    ours = [h for h in root_logger.handlers if isinstance(h, logs._Handler)]
    assert len(ours) == 1 and root_logger.level == logging.DEBUG
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        logging.getLogger("launcher.worker.stages").exception("stage 'x' failed request 3")
    text = stderr.getvalue()
    assert " ERROR worker voc%oder (pid " in text
    assert ") launcher.worker.stages: stage 'x' failed request 3\nTraceback" in text
    assert text.rstrip().endswith("RuntimeError: boom")


def test_a_worker_logs_at_the_launching_processs_level(root_logger):
    logging.getLogger("launcher").setLevel(logging.INFO)
    try:
        assert logs.worker_level() == logging.INFO
    finally:
        logging.getLogger("launcher").setLevel(logging.NOTSET)
    assert logs.level_number("Warning") == logging.WARNING
    with pytest.raises(ValueError, match="debug, info, warning, error"):
        logs.level_number("loud")


def test_serve_takes_a_log_level_and_refuses_an_unknown_one(capsys):
    from planner.app.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["serve", "qwen3-tts", "--log-level", "loud"])
    assert exc.value.code == 2
    assert "--log-level: invalid choice: 'loud'" in capsys.readouterr().err
