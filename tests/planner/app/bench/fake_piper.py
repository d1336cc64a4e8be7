"""A stand-in for piper-tts's HTTP server (`python -m piper.http_server`), which the tests never
install: `POST /synthesize` with `{"text": ...}` answers a whole 16-bit mono WAV file of
`SECONDS_PER_CHAR` seconds per character of the text, at `RATE` Hz; `GET /info` answers JSON.
A real HTTP/1.1 server on 127.0.0.1 in a thread of the test process; it records each request's
path and body."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self

from launcher.audio import wav_header

RATE = 22_050
SECONDS_PER_CHAR = 0.01


def audio_seconds(text: str) -> float:
    return round(len(text) * SECONDS_PER_CHAR * RATE) / RATE


class FakePiper:
    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.requests: list[tuple[str, dict]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as Werkzeug's threaded server

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                self._answer(200, json.dumps({"voice": {"name": "fake"}}).encode(),
                             "application/json")

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                owner.requests.append((self.path, body))
                if self.path != "/synthesize":
                    self._answer(404, b"not found", "text/html")
                elif owner.status != 200:
                    self._answer(owner.status, b"<h1>Internal Server Error</h1>", "text/html")
                else:
                    samples = round(len(body["text"]) * SECONDS_PER_CHAR * RATE)
                    # Flask answers the bytes piper returns as text/html, as here
                    self._answer(200, wav_header(RATE, 2 * samples) + bytes(2 * samples),
                                 "text/html; charset=utf-8")

            def _answer(self, status: int, data: bytes, kind: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)
