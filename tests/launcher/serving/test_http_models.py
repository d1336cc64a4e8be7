"""What a server speaks: the `model` names a request may give, input with nothing to speak, and the
model and voice lists an OpenAI client discovers them from; the same behind a replica set's front
door. In process on the real piper-joe plan with stand-in deployments (no worker starts)."""

from __future__ import annotations

import threading
import warnings

import openai
import pytest
import torch

import planner
from launcher.audio import Audio
from launcher.control.states import DeploymentState
from launcher.serving.catalog import OPENAI_ALIASES
from launcher.serving.http import create_app
from launcher.serving.replica_set import ReplicaSet
from launcher.serving.catalog import OPENAI_VOICES, Catalog
from tests.launcher.serving.handles import AwaitableReads

with warnings.catch_warnings():
    warnings.simplefilter("ignore", UserWarning)  # Starlette's note about httpx2
    from starlette.testclient import TestClient

SPEECH = "/v1/audio/speech"
PIPER_PATH = "rhasspy/piper-voices/en_US-joe-medium"  # one of piper-joe's model paths


class Handle(AwaitableReads):
    done = False

    def result(self, timeout=None):
        return Audio(torch.zeros(100), 22_050)

    def cancel(self):
        self.done = True


class Replica:
    """What create_app and ReplicaSet use of a Deployment; `submitted` is what reached it."""

    device, note, state, in_flight = "cpu", None, DeploymentState.RUNNING, 0
    failed = threading.Event()

    def __init__(self, plan):
        self.plan, self.submitted, self.voices = plan, [], []

    def refusal(self):
        return None

    def submit(self, text, voice=None, stream=False, options=None):
        self.submitted.append(text)
        self.voices.append(voice)
        return Handle()


@pytest.fixture(scope="module")
def piper():
    return planner.solve("piper-joe").plan


@pytest.fixture(scope="module")
def qwen():
    return planner.solve("qwen3-tts").plan


def single(plan):
    d = Replica(plan)
    return TestClient(create_app(d, {})), [d]


def replicated(plan):
    replicas = [Replica(plan), Replica(plan)]
    return TestClient(create_app(ReplicaSet(plan, replicas, ["a", "b"], "local"), {})), replicas


FRONT_DOORS = pytest.mark.parametrize("front_door", [single, replicated],
                                      ids=["one-deployment", "replica-set"])


@FRONT_DOORS
def test_an_unknown_model_is_a_400_naming_every_name_this_server_takes(front_door, piper):
    client, replicas = front_door(piper)
    r = client.post(SPEECH, json={"model": "no-such-model", "input": "hello"})
    assert r.status_code == 400
    error = r.json()["error"]
    assert error["code"] == "model_not_found" and error["type"] == "invalid_request_error"
    for name in ("'no-such-model'", "piper-joe", PIPER_PATH, "tts-1", "/v1/models"):
        assert name in error["message"]
    assert not any(d.submitted for d in replicas)


@FRONT_DOORS
@pytest.mark.parametrize("body", [
    {}, {"model": None}, {"model": "piper-joe"}, {"model": "PIPER-JOE"}, {"model": PIPER_PATH},
    {"model": PIPER_PATH.upper()}, *({"model": alias} for alias in OPENAI_ALIASES),
], ids=repr)
def test_the_card_its_model_paths_openais_names_and_no_model_are_spoken(front_door, piper, body):
    client, replicas = front_door(piper)
    r = client.post(SPEECH, json={"input": "hello", **body})
    assert r.status_code == 200 and r.headers["content-type"] == "audio/wav"
    assert [t for d in replicas for t in d.submitted] == ["hello"]


@FRONT_DOORS
@pytest.mark.parametrize("text", [".", "?!", "…", " - ", "😀", "\u3002"])
def test_input_with_no_letter_or_digit_is_a_400_before_any_stage(front_door, piper, text):
    client, replicas = front_door(piper)
    r = client.post(SPEECH, json={"input": text})
    assert r.status_code == 400
    error = r.json()["error"]
    assert error["code"] == "nothing_to_speak" and "'input'" in error["message"]
    assert "letter or digit" in error["message"]
    assert not any(d.submitted for d in replicas)


@pytest.mark.parametrize("text", ["a.", "42", "٣", "日本", "Ωμέγα?"])
def test_a_letter_or_digit_of_any_script_is_something_to_speak(piper, text):
    client, replicas = single(piper)
    assert client.post(SPEECH, json={"input": text}).status_code == 200
    assert replicas[0].submitted == [text]


def test_blank_input_is_still_a_missing_input(piper):
    client, _ = single(piper)
    r = client.post(SPEECH, json={"input": "   "})
    assert r.status_code == 400 and r.json()["error"]["code"] == "missing_input"


@FRONT_DOORS
def test_models_are_listed_in_openais_shape_card_first(front_door, piper):
    client, _ = front_door(piper)
    body = client.get("/v1/models").json()
    assert body["object"] == "list"
    ids = [m["id"] for m in body["data"]]
    assert ids == ["piper-joe", *piper.model_paths, *OPENAI_ALIASES]
    for m in body["data"]:
        assert m["object"] == "model" and m["owned_by"] == "stage-planner"
        assert isinstance(m["created"], int) and m["created"] > 0 and m["root"] == "piper-joe"


@FRONT_DOORS
def test_an_unchanged_openai_client_lists_and_retrieves_the_models(front_door, piper):
    client, _ = front_door(piper)
    with client:
        oa = openai.OpenAI(base_url="http://testserver/v1", api_key="unused", http_client=client,
                           max_retries=0)
        assert [m.id for m in oa.models.list()][:2] == ["piper-joe", PIPER_PATH]
        assert oa.models.retrieve(PIPER_PATH).root == "piper-joe"
        with pytest.raises(openai.NotFoundError) as missing:
            oa.models.retrieve("no-such-model")
        assert "piper-joe" in str(missing.value)


@FRONT_DOORS
def test_voices_are_listed_default_first(front_door, piper, qwen):
    client, _ = front_door(piper)
    assert client.get("/v1/audio/voices").json() == {
        "object": "list", "model": "piper-joe", "any_voice": False,
        "data": [{"id": "joe", "object": "voice", "default": True}] + [
            {"id": name, "object": "voice", "default": False, "alias_of": "joe"}
            for name in OPENAI_VOICES]}
    r = client.post(SPEECH, json={"input": "hello", "voice": "nosuch"})
    assert r.status_code == 400 and "/v1/audio/voices" in r.json()["error"]["message"]
    assert "'nosuch'" in r.json()["error"]["message"]
    anything, _ = front_door(qwen)  # a card that lists no voices takes any name
    assert anything.get("/v1/audio/voices").json() == {
        "object": "list", "model": "qwen3-tts", "any_voice": True,
        "data": [{"id": "default", "object": "voice", "default": True}]}
    assert anything.post(SPEECH, json={"input": "hello", "voice": "alloy"}).status_code == 200


def test_openai_voice_names_stand_for_the_voice_of_a_one_voice_card(piper):
    client, (replica,) = single(piper)
    for name in ("alloy", "echo", "nova", "joe", "default"):
        assert client.post(SPEECH, json={"model": "tts-1", "input": "hello",
                                         "voice": name}).status_code == 200
    assert replica.voices == ["joe", "joe", "joe", "joe", "default"]  # the stages get its own
    # Several voices: each is its own, and no OpenAI name is taken for one of them.
    two = Catalog("two", voices=("anna", "nova"))
    assert two.voice_aliases == () and two.voice_problem("alloy") is not None
    assert two.voice_for("nova") == "nova" and two.voice_problem("nova") is None
    # A card named a voice as OpenAI does keeps it, and the other names stand for it.
    own = Catalog("mine", voices=("nova",))
    assert "nova" not in own.voice_aliases and own.voice_for("alloy") == "nova"
    # A card that lists no voices takes any name as it is.
    assert Catalog("any").voice_for("alloy") == "alloy"
