"""The HTTP front door in process, on a stand-in deployment: what reaches the stages, status codes,
headers and logs. No worker process is started, so these run in milliseconds."""

from __future__ import annotations

import asyncio
import json
import logging
import warnings

import pytest
import torch

with warnings.catch_warnings():
    # Starlette 1.x suggests httpx2 for its test client; httpx is what the serve extra installs.
    warnings.simplefilter("ignore", UserWarning)
    from starlette.testclient import TestClient

from launcher import Unavailable, WorkerDied
from launcher.control.states import DeploymentState
from launcher.serving.http import create_app

from tests.launcher import plans
from tests.launcher.serving.handles import AwaitableReads

SPEECH = "/v1/audio/speech"


class FakeHandle(AwaitableReads):
    """A request that streams silence until it is cancelled."""

    def __init__(self, fail: Exception | None = None) -> None:
        self.fail, self.done, self.cancelled = fail, False, False

    def chunks(self, timeout=None):
        if self.fail is not None:
            raise self.fail
        while not self.cancelled:
            yield torch.zeros(480)

    def result(self, timeout=None):
        if self.fail is not None:
            raise self.fail
        raise AssertionError("not used here")

    def cancel(self) -> None:
        self.cancelled = self.done = True


class FakeDeployment:
    """What create_app uses of a Deployment; `submitted` is what reached the stages."""

    state = DeploymentState.RUNNING
    plan = plans.qwen3()

    def __init__(self, refuse: Exception | None = None, fail: Exception | None = None) -> None:
        self.refuse, self.fail = refuse, fail
        self.submitted: list[tuple] = []
        self.handles: list[FakeHandle] = []

    def submit(self, text, voice=None, stream=False, options=None):
        if self.refuse is not None:
            raise self.refuse
        self.submitted.append((text, voice, stream))
        self.handles.append(FakeHandle(self.fail))
        return self.handles[-1]

    def retry_after(self) -> int:
        return 7

    def health(self):
        return {"status": "degraded", "processes": []}


def client(deployment: FakeDeployment) -> TestClient:
    return TestClient(create_app(deployment, {}))


def test_a_body_nested_too_deeply_for_the_parser_is_a_400_naming_the_body():
    d = FakeDeployment()
    r = client(d).post(SPEECH, content=b"[" * 100_000,
                       headers={"content-type": "application/json"})
    assert r.status_code == 400
    error = r.json()["error"]
    assert error["code"] == "invalid_json" and "body" in error["message"]
    assert d.submitted == []


@pytest.mark.parametrize("chunked", [False, True], ids=["with-length", "chunked"])
def test_a_body_over_the_limit_is_a_413_and_one_at_it_is_read(chunked):
    from launcher.serving.limits import MAX_BODY_BYTES

    def body(size):
        raw = json.dumps({"input": "hello", "pad": "x" * size}).encode()
        return raw + b" " * (MAX_BODY_BYTES - len(raw)) if size == 0 else raw

    def post(raw):
        content = iter([raw[:1000], raw[1000:]]) if chunked else raw  # no length when chunked
        # (the fake's audio is not asked for here: what reached the stages is the answer)
        return TestClient(create_app(d, {}), raise_server_exceptions=False).post(
            SPEECH, content=content, headers={"content-type": "application/json"})

    d = FakeDeployment()
    r = post(body(MAX_BODY_BYTES))
    assert r.status_code == 413
    assert r.json()["error"]["code"] == "body_too_large" and d.submitted == []
    assert len(body(0)) == MAX_BODY_BYTES
    post(body(0))  # at the limit: read, and past the checks to the stages
    assert d.submitted == [("hello", None, False)]


@pytest.mark.parametrize("field", ["input", "voice"])
def test_a_lone_surrogate_is_a_400_naming_the_field_before_any_stage_sees_it(field):
    d = FakeDeployment()
    body = {"input": "hello", field: "a\ud800b"}
    raw = json.dumps(body).encode()  # ASCII: the surrogate travels as the JSON escape \ud800
    r = client(d).post(SPEECH, content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 400
    error = r.json()["error"]
    assert error["code"] == f"invalid_{field}"
    assert f"'{field}'" in error["message"] and "U+D800" in error["message"]
    assert d.submitted == []


VOCODER = "process 'vocoder' (pid 1, stages: vocoder)"


@pytest.mark.parametrize("deployment", [
    FakeDeployment(refuse=Unavailable(f"{VOCODER} is restarting")),
    FakeDeployment(fail=WorkerDied(f"{VOCODER} was killed by SIGKILL")),
], ids=["refused", "died-in-flight"])
@pytest.mark.parametrize("stream", [False, True])
def test_every_503_says_when_to_retry(deployment, stream):
    c = client(deployment)
    r = c.post(SPEECH, json={"input": "hello", "stream": stream})
    assert r.status_code == 503 and r.headers["retry-after"] == "7"
    assert "process 'vocoder'" in r.json()["error"]["message"]
    health = c.get("/health")
    assert health.status_code == 503 and health.headers["retry-after"] == "7"


def _run(app, scope_extra: dict, messages: list[dict], send_fails_after: int | None = None):
    """Drive one ASGI request: `messages` are what the client sends, then it disconnects once the
    server has sent one body chunk (or, on ASGI spec 2.4, the server's next send fails)."""
    sent: list[dict] = []

    async def main():
        first_chunk = asyncio.Event()
        queue = list(messages)

        async def receive():
            if queue:
                return queue.pop(0)
            await first_chunk.wait()
            return {"type": "http.disconnect"}

        async def send(message):
            if send_fails_after is not None and len(sent) >= send_fails_after:
                raise OSError("connection reset by peer")
            sent.append(message)
            if message["type"] == "http.response.body" and message.get("body"):
                first_chunk.set()

        scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"},
                 "http_version": "1.1", "method": "POST", "scheme": "http", "path": SPEECH,
                 "raw_path": SPEECH.encode(), "query_string": b"", "root_path": "",
                 "headers": [(b"content-type", b"application/json")],
                 "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 2), **scope_extra}
        await asyncio.wait_for(app(scope, receive, send), 10)

    asyncio.run(main())
    return sent


STREAM = json.dumps({"input": "hello", "stream": True}).encode()


@pytest.mark.parametrize("case", ["mid-upload", "mid-stream", "mid-stream, ASGI 2.4"])
def test_a_client_disconnect_is_one_log_line_and_cancels_its_request(case, caplog):
    d = FakeDeployment()
    app = create_app(d, {})
    caplog.set_level(logging.INFO)
    if case == "mid-upload":
        _run(app, {}, [{"type": "http.request", "body": b'{"input": "hel', "more_body": True},
                       {"type": "http.disconnect"}])
        assert d.submitted == []
    elif case == "mid-stream":
        sent = _run(app, {}, [{"type": "http.request", "body": STREAM}])
        assert sent[0]["status"] == 200
    else:
        _run(app, {"asgi": {"version": "3.0", "spec_version": "2.4"}},
             [{"type": "http.request", "body": STREAM}], send_fails_after=3)
    if d.handles:
        assert d.handles[0].cancelled
    lines = [r for r in caplog.records if r.levelno >= logging.INFO]
    assert len(lines) == 1, [r.getMessage() for r in lines]
    assert lines[0].exc_info is None and "\n" not in lines[0].getMessage()
    assert lines[0].getMessage().startswith(f"client disconnected during POST {SPEECH}")


class WaitingHandle(FakeHandle):
    """A non-streamed request whose audio never comes; cancelling it ends the wait."""

    async def result_async(self, timeout=None):
        while not self.cancelled:
            await asyncio.sleep(0.005)
        raise Unavailable("cancelled by the client")


def test_a_client_that_leaves_while_waiting_for_a_whole_response_cancels_it(caplog):
    d = FakeDeployment()
    d.submit = lambda text, voice=None, stream=False, options=None: \
        d.handles.append(WaitingHandle()) or d.handles[-1]
    app = create_app(d, {})
    sent: list[dict] = []

    async def main():
        messages = [{"type": "http.request", "body": json.dumps({"input": "hello"}).encode()}]

        async def receive():
            if messages:
                return messages.pop(0)
            await asyncio.sleep(0.05)  # the client gives up while the audio is being made
            return {"type": "http.disconnect"}

        async def send(message):
            sent.append(message)

        scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"},
                 "http_version": "1.1", "method": "POST", "scheme": "http", "path": SPEECH,
                 "raw_path": SPEECH.encode(), "query_string": b"", "root_path": "",
                 "headers": [(b"content-type", b"application/json")],
                 "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 2)}
        await asyncio.wait_for(app(scope, receive, send), 10)

    caplog.set_level(logging.INFO)
    asyncio.run(main())
    assert d.handles[0].cancelled and sent == []
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    assert len(lines) == 1 and lines[0].startswith(f"client disconnected during POST {SPEECH}")
