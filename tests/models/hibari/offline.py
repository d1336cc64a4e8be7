"""`planner serve hibari-heart` with no network, asked what a client asks; prints a JSON report.

Run by test_served.py inside a network namespace whose only interface is loopback (`unshare -n`,
this script brings `lo` up), or, where no namespace can be made, under no_network/'s audit hook.
The server, its workers and this client share that namespace. Response bodies are written to the
folder given as the first argument; everything else the test checks is in the report.

    unshare -n python -m tests.models.hibari.offline OUT [planner serve flags...]
"""

from __future__ import annotations

import fcntl
import http.client
import json
import os
import re
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

from tests.processes import interrupt

ROOT = Path(__file__).resolve().parents[3]
TEXT = "A parcel arrived this morning, wrapped in brown paper and tied with string."
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1


def loopback_up() -> None:
    """Bring `lo` up: a new network namespace starts with it down (a no-op when it is up)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        flags = struct.unpack("16sH", fcntl.ioctl(s, SIOCGIFFLAGS, struct.pack("16sH", b"lo", 0))
                              [:18])[1]
        if not flags & IFF_UP:
            fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH", b"lo", flags | IFF_UP))


def internet() -> list[str]:
    """What of the internet this process can reach (nothing, here)."""
    reached = []
    for what, attempt in (("dns", lambda: socket.getaddrinfo("huggingface.co", 443)),
                          ("ip", lambda: socket.create_connection(("1.1.1.1", 443), 5).close())):
        try:
            attempt()
            reached.append(what)
        except OSError:
            pass
    return reached


def serve(flags: list[str]) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen([sys.executable, "-m", "planner", "serve", "hibari-heart", "--port",
                             "0", *flags], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    deadline, seen = time.monotonic() + 300, []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(line)
        if m := re.search(r"ready: hibari-heart on http://127\.0\.0\.1:(\d+)", line):
            return proc, int(m.group(1))
    proc.kill()
    proc.wait()
    raise SystemExit("server did not get ready:\n" + "".join(seen[-20:]))


def ask(port: int, method: str, path: str, body: dict | None = None) -> tuple[int, dict, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request(method, path, json.dumps(body) if body is not None else None,
                     {"content-type": "application/json"})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def main(out: Path, flags: list[str]) -> dict:
    loopback_up()
    report: dict = {"internet": internet()}
    proc, port = serve(flags)
    try:
        for name, path in (("models", "/v1/models"), ("voices", "/v1/audio/voices")):
            status, _, body = ask(port, "GET", path)
            report[name] = {"status": status, "json": json.loads(body)}
        speech = {"model": "hibari-heart", "input": TEXT, "voice": "heart"}
        # the stream asked as `planner bench`'s client asks (OpenAI's model name, `default`)
        stream = {"model": "tts-1", "voice": "default", "response_format": "pcm", "stream": True}
        for name, extra in (("wav", {}), ("stream", stream), ("bella", {"voice": "bella"})):
            status, headers, body = ask(port, "POST", "/v1/audio/speech", {**speech, **extra})
            (out / name).write_bytes(body)
            report[name] = {"status": status, "rate": headers.get("x-sample-rate")}
    finally:
        report["server_exit"] = interrupt(proc)
        report["server_output"] = proc.stdout.read()[-4000:]
    report["hibari_home"] = sorted(os.listdir(os.environ["HIBARI_HOME"]))
    return report


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]), sys.argv[2:])))
