"""Every message type survives the wire (a real pipe, as the local backend sends it) unchanged,
and is told apart by `match` on its class, as both sides dispatch it; frames keep their bounds."""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
import threading

import pytest

from launcher.wire import ipc, protocol
from launcher.wire.protocol import (
    BuildError,
    Building,
    Cancel,
    Deliver,
    Free,
    HandedOver,
    Hello,
    PassedOn,
    PeerGone,
    Ready,
    Released,
    Result,
    StageError,
    Started,
    Stats,
    Stop,
    Undeliverable,
)

PACKED = ipc.Packed("stageplanner-1-ab-pipeline.42.0",
                    (ipc.TensorRef("codes", "int64", (4, 8), 0, 256),),
                    {"text": "hi", "context_frames": 2}, lease=7, used=256)
INLINE = ipc.Packed(None, (ipc.TensorRef("audio", "float32", (2,), 0, 8),), {},
                    used=8, inline=bytearray(b"\x00\x00\x80?\x00\x00\x00@"))

EXAMPLES = [
    Deliver("vocoder", 3, "tts_engine", 0, False, PACKED),
    Deliver("preprocessing", 4, "__client__", None, True, ipc.Packed(None, (), {"text": "x"})),
    Free("stageplanner-1-ab-pipeline.42.0", 7),
    Cancel(3),
    PeerGone("vocoder", 1234),
    Stop(),
    Hello("pipeline", 42, "vocoder"),
    Started(42),
    Building("tts_engine"),
    BuildError("vocoder", "RuntimeError: no weights", "Traceback ...\nRuntimeError: no weights"),
    Ready(),
    Result(3, "vocoder", 5, True, INLINE),
    StageError(3, "tts_engine", "ValueError: bad"),
    HandedOver(3, "vocoder", 1234),
    Released(3),
    PassedOn(3, "vocoder", 1234),
    Undeliverable(3, "tts_engine", "vocoder", "process 'vocoder' is not accepting handoffs"),
    Stats({"vocoder": (0.01, 0.02)}, {"vocoder": 0}, None, ipc.PoolUsage(1, 2, 3 << 20)),
]


def test_every_message_type_has_an_example_here():
    assert {type(m) for m in EXAMPLES} == set(protocol.MESSAGES)
    for cls in protocol.MESSAGES:
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen, cls


@pytest.fixture(scope="module")
def pipe():
    a, b = mp.Pipe()
    yield a, b
    a.close()
    b.close()


def kind(message) -> str:
    """Dispatch as the worker and supervisor do: by class, fields by position."""
    match message:
        case Deliver(target, request_id, source, chunk, last, packed):
            return f"deliver {target} {request_id} {source} {chunk} {last} {packed.segment}"
        case Free(segment, lease):
            return f"free {segment} {lease}"
        case Cancel(request_id) | Released(request_id):
            return f"{type(message).__name__.lower()} {request_id}"
        case PeerGone(process, pid) | Hello(process, pid):
            return f"{type(message).__name__.lower()} {process} {pid}"
        case Stop() | Ready():
            return type(message).__name__.lower()
        case Started(pid):
            return f"started {pid}"
        case Building(what):
            return f"building {what}"
        case BuildError(stage, summary, _):
            return f"build-error {stage} {summary}"
        case Result(request_id, stage, chunk, last, packed):
            return f"result {request_id} {stage} {chunk} {last} {bytes(packed.inline or b'')}"
        case StageError(request_id, stage, message_):
            return f"stage-error {request_id} {stage} {message_}"
        case HandedOver(request_id, process, pid):
            return f"handed-over {request_id} {process} {pid}"
        case PassedOn(request_id, process, pid):
            return f"passed-on {request_id} {process} {pid}"
        case Undeliverable(request_id, source, process, _):
            return f"undeliverable {request_id} {source} {process}"
        case Stats(latencies, depths, cuda_allocated, shm):
            return f"stats {dict(latencies)} {dict(depths)} {cuda_allocated} {shm}"
    raise AssertionError(f"no case for {message!r}")


@pytest.mark.parametrize("message", EXAMPLES, ids=lambda m: type(m).__name__)
def test_round_trip_through_a_pipe(message, pipe):
    a, b = pipe
    protocol.write_frame(a, protocol.encode(message))
    back = protocol.decode(b.recv_bytes())
    assert back == message and type(back) is type(message)
    assert kind(back) == kind(message)
    with pytest.raises(dataclasses.FrozenInstanceError):
        back.x = 1  # frozen: a message is a value


def test_a_frame_carries_several_messages_in_order(pipe):
    a, b = pipe
    frame = (Result(1, "vocoder", None, True, INLINE), HandedOver(2, "vocoder", 9), Released(2))
    a.send_bytes(protocol.encode(frame))
    assert protocol.decode(b.recv_bytes()) == frame


def test_frames_written_at_once_are_read_back_whole_and_in_order(pipe):
    a, b = pipe
    sizes = [0, 1, 3, 70_000, 5]  # one larger than a socket's buffer: written in several calls
    frames = [bytes([n % 251]) * n for n in sizes]
    reader, got = protocol.FrameReader(b.fileno()), []

    def read_all() -> None:
        while len(got) < len(frames):
            got.extend(reader.read())

    t = threading.Thread(target=read_all)
    t.start()
    for frame in frames:
        protocol.write_frame(a, frame)
    t.join(10)
    assert got == frames
    protocol.write_frame(a, b"as send_bytes writes it")
    assert b.recv_bytes() == b"as send_bytes writes it"


def test_a_closed_connection_refuses_a_frame():
    a, b = mp.Pipe()
    a.close()
    with pytest.raises(OSError):
        protocol.write_frame(a, b"x")
    b.close()


def test_an_inline_payload_is_read_back_as_its_tensors():
    import torch

    back = protocol.decode(protocol.encode(Result(1, "vocoder", None, True, INLINE)))
    data = ipc.Receiver(lambda *_: None).unpack(back.packed)
    assert torch.equal(data["audio"], torch.tensor([1.0, 2.0]))
