"""How refusals read: a 429 from admission control and a 503 say when to retry, except from a
server that is going away, which says `Connection: close` and no `Retry-After`."""

from __future__ import annotations

import warnings

import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore", UserWarning)
    from starlette.testclient import TestClient

from launcher.control.states import DeploymentState
from launcher.errors import Overloaded, Unavailable
from launcher.serving.http import create_app

from tests.launcher import plans


class Refusing:
    """What create_app uses of a Deployment, refusing every request with `error`."""

    plan = plans.qwen3()

    def __init__(self, state: str, error: Exception) -> None:
        self.state, self.error = DeploymentState(state), error

    def submit(self, text, voice=None, stream=False, options=None):
        raise self.error

    def retry_after(self) -> int:
        return 3

    def health(self):
        return {"status": self.state, "processes": []}


def test_a_full_deployment_answers_429_with_retry_after():
    c = TestClient(create_app(Refusing("running", Overloaded("holds 64 requests")), {}))
    r = c.post("/v1/audio/speech", json={"input": "hello"})
    assert r.status_code == 429 and r.headers["retry-after"] == "3"


@pytest.mark.parametrize("state", ["draining", "stopping", "failed"])
def test_a_server_going_away_says_close_not_retry_after(state):
    c = TestClient(create_app(Refusing(state, Unavailable(f"deployment is {state}")), {}))
    r = c.post("/v1/audio/speech", json={"input": "hello"})
    assert r.status_code == 503 and "retry-after" not in r.headers
    assert r.headers["connection"] == "close"
    health = c.get("/health")
    assert health.status_code == 503 and "retry-after" not in health.headers
