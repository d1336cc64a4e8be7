"""hibari-tts behind the HTTP server a user writes for it: one process, one `Hibari` shared by
the threads that answer requests. A child process of `peer_hibari.py` (the `server-tN` rows).

It is the few lines a user writes with the libraries this project's own server stands on
(Starlette on uvicorn, uvloop and httptools where installed, as `pip install uvicorn[standard]`
gives them), as FastAPI writes a plain `def` endpoint: the body read on the event loop, the
synthesis and the WAV file (the library's `write_wav`, what `Hibari.save` writes) on a thread of
the server's pool, so C requests at once are C threads sharing the one instance (its documented
use). It answers `POST /v1/audio/speech` (`{"input": ...}`; OpenAI's other fields are ignored)
with a whole WAV file, and `GET /health` once the voice is loaded and warmed.

    python -m benchmarks.peer_hibari_server --threads 1 --port 8010
"""

from __future__ import annotations

import argparse
import io
import sys


def app_for(threads: int):
    from hibari import Hibari
    from hibari.tts import write_wav
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.responses import PlainTextResponse, Response
    from starlette.routing import Route

    tts = Hibari(threads=threads)

    def wav(text: str) -> bytes:
        out = io.BytesIO()
        write_wav(out, tts(text))
        return out.getvalue()

    wav("Warm up the voice once.")

    async def speech(request):
        body = await request.json()
        return Response(await run_in_threadpool(wav, body["input"]), media_type="audio/wav")

    async def health(request):
        return PlainTextResponse("ok")

    return Starlette(routes=[Route("/v1/audio/speech", speech, methods=["POST"]),
                             Route("/health", health)])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="peer_hibari_server.py")
    p.add_argument("--threads", type=int, default=1, help="Hibari(threads=N) (default 1)")
    p.add_argument("--port", type=int, required=True)
    args = p.parse_args(argv)
    import uvicorn

    uvicorn.run(app_for(args.threads), host="127.0.0.1", port=args.port, log_level="warning",
                access_log=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
