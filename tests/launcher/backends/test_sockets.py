"""Sockets nobody else can stall: a worker's listener lives in a private 0700 directory, and a
peer that connects and says nothing holds up no request."""

from __future__ import annotations

import os
import socket
import stat

import pytest

from launcher import launch
from launcher.backends import links

from tests.launcher import plans
from tests.launcher.conftest import DEVICE, TINY

TEXT = "a silent neighbour stalls nothing"


def test_the_socket_directory_is_private_and_a_foreign_one_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(links.tempfile, "gettempdir", lambda: str(tmp_path))
    where = links.address("t0ken", "pipe/line")
    assert os.path.dirname(where) == str(tmp_path / f"stage-planner-{os.getuid()}-t0ken")
    assert stat.S_IMODE(os.stat(os.path.dirname(where)).st_mode) == 0o700
    open_dir = tmp_path / f"stage-planner-{os.getuid()}-other"
    open_dir.mkdir(mode=0o755)
    open_dir.chmod(0o755)
    with pytest.raises(PermissionError, match="not a private directory"):
        links.address("other", "vocoder")
    links.remove_socket_dir("t0ken")
    assert not os.path.exists(os.path.dirname(where))


@pytest.mark.slow
def test_a_silent_connection_to_a_worker_stalls_no_request():
    with launch(plans.qwen3("vocoder"), device=DEVICE, factory_defaults=TINY) as d:
        token = d._backend.token
        where = links.address(token, "vocoder")
        assert stat.S_IMODE(os.stat(os.path.dirname(where)).st_mode) == 0o700
        silent = [socket.socket(socket.AF_UNIX) for _ in range(3)]
        try:
            for s in silent:  # before the first handoff: the real link must get past them
                s.connect(where)
            for _ in range(3):
                assert d.synthesize(TEXT, timeout=30).samples.numel() > 0
        finally:
            for s in silent:
                s.close()
    assert not os.path.exists(os.path.dirname(where))  # removed with the deployment
