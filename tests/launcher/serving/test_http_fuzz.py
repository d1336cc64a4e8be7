"""Hostile and arbitrary requests against one real served deployment (uvicorn, worker process).

The server starts once for this module; it must answer every request without a 5xx, keep its
connections and its worker, and log no traceback.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys

import httpx
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from launcher import standins

from tests.launcher.conftest import leftovers
from tests.waiting import wait_until

pytestmark = pytest.mark.slow
# The repository root (tests/launcher/serving/ is three levels down): subprocesses run there.
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SPEECH = "/v1/audio/speech"


@pytest.fixture(autouse=True)
def nothing_left_behind():
    """Overrides conftest's per-test check: the server outlives each test here, and `served`
    checks that nothing is left once it has stopped."""
    yield


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(url, the server's stderr file) of `serve` on the declared Qwen3 plan with tiny stand-ins."""
    log = tmp_path_factory.mktemp("served") / "stderr"
    with open(log, "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "tests.launcher.serve_main", "-"],
                                cwd=ROOT, stdout=subprocess.PIPE, stderr=err, text=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        line = proc.stdout.readline()
        match = re.search(r"http://[\d.]+:\d+", line)
        assert match, f"no ready line: {line!r} {log.read_text()}"
        yield match.group(), log
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    wait_until(lambda: not any(leftovers()), 3.0, fail=False)
    procs, segments = leftovers()
    assert not procs and not segments, (procs, segments)
    assert "Traceback" not in log.read_text(), log.read_text()


@pytest.fixture(scope="module")
def http(served):
    # One connection, kept alive across requests and examples: a request that broke it shows.
    with httpx.Client(base_url=served[0], timeout=60,
                      limits=httpx.Limits(max_connections=1)) as client:
        yield client


def _local_port(response: httpx.Response) -> int:
    return response.extensions["network_stream"].get_extra_info("socket").getsockname()[1]


def test_a_malformed_field_is_a_4xx_naming_it_and_the_connection_stays_usable(http):
    bad = http.post(SPEECH, json={"input": "hi", "response_format": ["wav"]})
    assert bad.status_code == 400 and "connection" not in bad.headers
    assert "'response_format'" in bad.json()["error"]["message"]
    good = http.post(SPEECH, json={"input": "hi"})
    assert good.status_code == 200 and good.headers["content-type"] == "audio/wav"
    assert _local_port(good) == _local_port(bad)  # the same connection served both


# Any JSON value; text of any code point, lone surrogates included (sent as JSON escapes or, in
# a body that is not ASCII-only, as bytes that are not UTF-8).
chars = st.characters() | st.characters(categories=["Cs"])
texts = st.lists(chars, max_size=12).map("".join)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=10,
)


def _field(plausible: st.SearchStrategy) -> st.SearchStrategy:
    """Any JSON value, or (twice as likely) one of the kind the field takes."""
    return st.one_of(json_values, plausible, plausible)


# Objects with the real keys (other than `input`, each present or not) holding anything or a
# plausible value. (Bodies without `input` are the `json_values` objects.)
requests = st.fixed_dictionaries({
    "input": _field(texts | st.text(min_size=1, max_size=12)),
}, optional={
    "voice": _field(texts | st.text(max_size=8)),
    "model": _field(texts | st.just("tts-1")),
    "response_format": _field(st.sampled_from(["wav", "pcm"])),
    "stream": _field(st.booleans()),
})


def _encode(body, ascii_only: bool) -> bytes:
    # NaN/Infinity come out as bare words (not JSON); non-ASCII surrogates as bytes no UTF-8 has.
    return json.dumps(body, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")


def _check(response: httpx.Response) -> None:
    assert response.status_code < 500, response.text
    if response.status_code == 200:
        assert response.headers["content-type"] in ("audio/wav", "audio/pcm")
        assert response.content
    else:
        error = response.json()["error"]
        assert error["type"] == "invalid_request_error"
        assert error["message"] and error["code"]


def _health(served) -> dict:
    report = httpx.get(f"{served[0]}/health").json()
    assert report["status"] == "ok"
    assert [p["restarts"] for p in report["processes"]] == [0]
    return report


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=st.one_of(json_values, requests, requests), ascii_only=st.booleans())
def test_no_body_of_any_shape_gets_a_5xx(served, http, body, ascii_only):
    response = http.post(SPEECH, content=_encode(body, ascii_only),
                         headers={"content-type": "application/json"})
    event(f"HTTP {response.status_code}")
    _check(response)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text(min_size=1, max_size=16).filter(lambda t: any(c.isalnum() for c in t)),
       stream=st.booleans(),
       voice=st.none() | st.text(max_size=8))
def test_any_valid_text_is_spoken(served, http, text, stream, voice):
    body = {"input": text, "voice": voice, "stream": stream, "response_format": "pcm"}
    with http.stream("POST", SPEECH, json=body) as response:
        assert response.status_code == 200, response.read()
        audio = response.read()
    assert len(audio) == 2 * standins.expected_samples(text)


def test_the_worker_survived_the_fuzzing_and_speaking(served):
    _health(served)


def test_a_restarting_worker_gets_503_with_retry_after(served, http):
    pid = _health(served)["processes"][0]["pid"]
    os.kill(pid, signal.SIGKILL)
    r = wait_until(lambda: (r := http.post(SPEECH, json={"input": "hi"})).status_code != 200 and r,
                   10, "the kill to be noticed")
    assert r.status_code == 503 and 1 <= int(r.headers["retry-after"]) <= 2, r.headers
    health = httpx.get(f"{served[0]}/health")
    if health.status_code == 503:
        assert int(health.headers["retry-after"]) >= 1
    wait_until(lambda: httpx.get(f"{served[0]}/health").json()["status"] == "ok",  # for teardown
               30, "the worker to come back")
