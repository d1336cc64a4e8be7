"""`planner serve` address errors: one paragraph and exit 2, before any worker starts."""

from __future__ import annotations

import io

import pytest
import torch

import launcher.serving.serve
from launcher.errors import LaunchError
from planner.app.cli import main

from tests.launcher import plans


@pytest.fixture
def never_launched(monkeypatch):
    def launch(*args, **kwargs):
        raise AssertionError("workers were started")

    monkeypatch.setattr(launcher.serving.serve, "launch", launch)


@pytest.mark.parametrize("port", ["99999", "-1", "80a"])
def test_a_port_outside_0_to_65535_is_a_usage_error(port, capsys, never_launched):
    with pytest.raises(SystemExit) as exc:
        main(["serve", "qwen3-tts", "--port", port])
    assert exc.value.code == 2
    err = " ".join(capsys.readouterr().err.split())
    assert (f"argument --port: '{port}' is not a TCP port; give a number from 0 to 65535 "
            "(0 picks any free port)") in err
    # The Python API refuses it too, instead of listening on port % 65536.
    if port.lstrip("-").isdigit():
        buf = io.StringIO()
        assert launcher.serving.serve.serve(plans.qwen3(), {}, port=int(port), err=buf) == 2
        assert "is not a TCP port" in buf.getvalue()


def test_a_host_that_does_not_resolve_is_named_with_a_valid_example(capsys, never_launched):
    assert main(["serve", "qwen3-tts", "--host", "nosuch.invalid", "--port", "0"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "cannot listen on nosuch.invalid:0: host 'nosuch.invalid' could not be resolved" in err
    assert "nothing was started" in err and "--host" in err
    assert "127.0.0.1" in err and "0.0.0.0" in err and "free port" not in err


def test_the_serving_process_keeps_torch_to_one_intra_op_thread(monkeypatch):
    # Its tensor work is small; a second thread would spin-wait after every op, taking CPU
    # from the workers under load.
    seen = []

    def launch(*args, **kwargs):
        seen.append(torch.get_num_threads())
        raise LaunchError("stopped here by the test")

    monkeypatch.setattr(launcher.serving.serve, "launch", launch)
    threads = torch.get_num_threads()
    try:
        assert launcher.serving.serve.serve(plans.qwen3(), {}, port=0, err=io.StringIO()) == 3
    finally:
        torch.set_num_threads(threads)
    assert seen == [1]
