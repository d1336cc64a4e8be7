"""Imported by every Python process started with this folder first on PYTHONPATH: an audit hook
refuses any name lookup or connection that is not this machine's loopback. The offline test's
stand-in for a network namespace where none can be made (no root, no user namespaces)."""

import socket
import sys

LOOPBACK = {None, "localhost", "127.0.0.1", "::1", b"localhost", b"127.0.0.1", b"::1"}


def _refuse(event: str, args: tuple) -> None:
    if event == "socket.getaddrinfo" and args[0] not in LOOPBACK:
        raise socket.gaierror(socket.EAI_NONAME, f"no network in this test ({args[0]!r})")
    if event == "socket.connect" and isinstance(args[1], tuple) and args[1][0] not in LOOPBACK:
        raise OSError(101, f"no network in this test ({args[1][0]!r})")


sys.addaudithook(_refuse)
