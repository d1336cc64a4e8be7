"""Every message that crosses a process boundary, one frozen dataclass each, matched with `match`.

Three directions, three unions:

- `ToWorker`: supervisor -> worker (control plane: a new request, a lease it read, a cancellation,
  a peer's death, stop).
- `ToPeer`: worker -> worker (data plane: a stage's output for a stage in another process, and
  the lease given back to its owner once the reader dropped the last view of it).
- `FromWorker`: worker -> supervisor (lifecycle, terminal results and stage errors, and the
  bookkeeping that lets the supervisor fail exactly the requests a dead process held).

Who holds a request (the supervisor's request table):
- `submit` records the entry processes before it sends the first `Deliver`;
- a worker that hands a request to a stage in another process sends `HandedOver` (naming the
  receiver's pid) once the `Deliver` is on its way, and never after its own `Released` (both go
  in one frame on one pipe), so the sender holds the request until the receiver is on record;
- a worker sends `Released` once every stage of its own has emitted its final output for it;
  `PassedOn` says both at once (the usual case in the middle of a pipeline: the last output goes
  to one process and, with it, the request leaves), and a terminal `Result` with `last` set
  needs no `Released` at all (the request ends there). The supervisor is the one process every
  request passes through, so the fewer bookkeeping messages per crossing, the more requests it
  can serve.
A request held by a process that dies is failed with 503. A `HandedOver` that arrives after its
receiver died names a dead pid and fails its request then. So no request is lost between two
processes, and none is failed for a death that did not touch it. Bookkeeping (`BOOKKEEPING`) only
serves to judge deaths, so a backend may deliver it late, as long as it never delivers it after
the `Exited` of a process it was sent before; a `Cancel` therefore goes to every process.

Tensors never travel in these messages as tensors: `ipc.Packed` carries them by reference to a
shared block or, when small, as raw bytes. On the wire a frame is `encode`d as plain tuples
with plain pickle (see "the wire form" below; no file descriptor or connection ever travels, so
multiprocessing's reducers are not needed) and written with `write_frame`; a worker's frame to
the supervisor is a tuple of messages, sent together (a terminal `Result` with the `Released`
that follows it, say).
"""

from __future__ import annotations

import os
import pickle
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from multiprocessing.connection import Connection
from operator import attrgetter

from launcher.wire.ipc import Packed, PoolUsage, TensorRef

# -- to a worker (from the supervisor; Deliver and Free also from a peer) ------------------------


# The copy of each copied process group a request is bound to, (group, copy) in plan order
# (`launcher.control.copies`); groups with one copy are not named.
Route = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Deliver:
    """A payload for stage `target`: from the client (`source` is CLIENT) or from stage `source`.

    `chunk` is the index in a chunk stream (None for a whole payload); `last` marks the final
    message from `source` for this request. `route`: the request's copies, carried on every
    `Deliver` so that each process hands the request on to the copies it is bound to."""

    target: str
    request_id: int
    source: str
    chunk: int | None
    last: bool
    packed: Packed
    route: Route = ()


@dataclass(frozen=True)
class Free:
    """Lease `lease` of block `segment` is given back: its reader dropped the last view of it."""

    segment: str
    lease: int


@dataclass(frozen=True)
class Cancel:
    """Drop request `request_id` at its next chunk or stage boundary (failed, or client gone)."""

    request_id: int


@dataclass(frozen=True)
class PeerGone:
    """Process `process` (incarnation `pid`) died: reclaim what was lent to it, unmap its blocks."""

    process: str
    pid: int


@dataclass(frozen=True)
class Stop:
    """Exit now: unlink this process's blocks first."""


# -- between workers (link handshake) ------------------------------------------------------------


@dataclass(frozen=True)
class Hello:
    """First message each way on a new worker-to-worker link: who is at the other end (and,
    from the side that connects, which of the other side's stages the link is for)."""

    process: str
    pid: int
    stage: str | None = None


# -- from a worker -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Started:
    """The worker's own code runs (multiprocessing's bootstrap is over)."""

    pid: int


@dataclass(frozen=True)
class Building:
    """Now building `what` (a stage, or "torch.distributed")."""

    what: str


@dataclass(frozen=True)
class BuildError:
    stage: str
    summary: str  # one line: "RuntimeError: weights not found"
    traceback: str


@dataclass(frozen=True)
class Ready:
    """Every stage is built and the worker accepts payloads."""


@dataclass(frozen=True)
class Result:
    """Output of terminal stage `stage` for the client."""

    request_id: int
    stage: str
    chunk: int | None
    last: bool
    packed: Packed


@dataclass(frozen=True)
class StageError:
    """Stage `stage` failed request `request_id`; the process is fine. `traceback`: where the
    stage raised, as its worker logged it ("" when it did not raise: a broken handoff)."""

    request_id: int
    stage: str
    message: str  # one line: "RuntimeError: weights not found"
    traceback: str = ""


@dataclass(frozen=True)
class HandedOver:
    """Request `request_id` was handed to `process` (pid `pid`)."""

    request_id: int
    process: str
    pid: int


@dataclass(frozen=True)
class Released:
    """Every stage of this process is done with request `request_id`."""

    request_id: int


@dataclass(frozen=True)
class PassedOn:
    """`HandedOver(request_id, process, pid)` then `Released(request_id)`, in one message."""

    request_id: int
    process: str
    pid: int


@dataclass(frozen=True)
class Undeliverable:
    """Stage `source` could not hand request `request_id` to process `process` (not listening:
    restarting, or just died)."""

    request_id: int
    source: str
    process: str
    reason: str


@dataclass(frozen=True)
class Stats:
    """Sent every `STATS_INTERVAL_S`: stage timings since the last report and current gauges."""

    latencies: Mapping[str, tuple[float, ...]]
    depths: Mapping[str, int]  # payloads waiting per stage inbox
    cuda_allocated: int | None
    shm: PoolUsage  # this process's shared-memory pool
    core_wait_s: Mapping[str, float] = field(default_factory=dict)  # per stage, in `latencies`


ToWorker = Deliver | Free | Cancel | PeerGone | Stop
# What the supervisor needs only to judge a death, not to answer anyone: a backend may hand it
# over late, but never after the `Exited` of any process it was sent before.
BOOKKEEPING = (HandedOver, Released, PassedOn, Stats)
ToPeer = Hello | Deliver | Free
FromWorker = (Started | Building | BuildError | Ready | Result | StageError | HandedOver | Released
              | PassedOn | Undeliverable | Stats)

MESSAGES: tuple[type, ...] = (
    Deliver, Free, Cancel, PeerGone, Stop, Hello, Started, Building, BuildError, Ready, Result,
    StageError, HandedOver, Released, PassedOn, Undeliverable, Stats,
)



# -- the wire form ---------------------------------------------------------------------------------
# A message travels as a flat tuple: its class's index in MESSAGES, then its fields in order, with
# a `Packed` (and its `TensorRef`s) flattened to tuples too; a frame of several messages travels
# as a list of those. Pickle then sees only builtins, which it writes and reads several times
# faster than the dataclasses themselves (which it reduces and rebuilds through copyreg): a
# 1 KiB `Deliver` takes ~2 us to encode and ~3.5 us to decode instead of 5 and 5, and a handoff
# pays both for its payload and again for its bookkeeping.

def _getter(cls: type) -> Callable[[object], tuple]:
    """A message's fields as a tuple, in order (`attrgetter` returns a bare value for one name)."""
    names = [f.name for f in fields(cls)]
    if len(names) > 1:
        return attrgetter(*names)
    return lambda message: tuple(getattr(message, name) for name in names)


_INDEX = {cls: i for i, cls in enumerate(MESSAGES)}
_FIELDS = {cls: _getter(cls) for cls in MESSAGES}
# Where each message that carries a `Packed` has it, among its fields.
_PACKED_AT = {cls: [f.name for f in fields(cls)].index("packed") for cls in (Deliver, Result)}


def _flat(message: object) -> tuple:
    cls = type(message)
    at = _PACKED_AT.get(cls)
    if at is not None:
        values = _FIELDS[cls](message)
        p = values[at]
        refs = tuple((r.key, r.dtype, r.shape, r.offset, r.nbytes) for r in p.tensors)
        return (_INDEX[cls], *values[:at], (p.segment, refs, p.values, p.lease, p.used, p.inline),
                *values[at + 1:])
    return (_INDEX[cls], *_FIELDS[cls](message))


def _message(flat: tuple) -> object:
    cls = MESSAGES[flat[0]]
    at = _PACKED_AT.get(cls)
    if at is not None:
        segment, refs, values, lease, used, inline = flat[at + 1]
        packed = Packed(segment, tuple(TensorRef(*r) for r in refs), values, lease, used, inline)
        return cls(*flat[1:at + 1], packed, *flat[at + 2:])
    return cls(*flat[1:])


def encode(frame: object) -> bytes:
    """One message, or a tuple of messages sent together."""
    if type(frame) is tuple:
        return pickle.dumps([_flat(m) for m in frame], protocol=pickle.HIGHEST_PROTOCOL)
    return pickle.dumps(_flat(frame), protocol=pickle.HIGHEST_PROTOCOL)


def decode(data: bytes) -> object:
    """What `encode` was given: a message, or a tuple of messages."""
    wire = pickle.loads(data)
    if type(wire) is list:
        return tuple(_message(flat) for flat in wire)
    return _message(wire)


_LENGTH = struct.Struct("!i")
_LONG_LENGTH = struct.Struct("!iQ")


def write_frame(conn: Connection, data: bytes) -> None:
    """Write `data` as `conn.send_bytes(data)` would, in one system call and without its checks
    (a handoff pays this on every message): a closed `conn` raises OSError, as there."""
    fd = conn.fileno()
    n = len(data)
    head = _LENGTH.pack(n) if n <= 0x7FFFFFFF else _LONG_LENGTH.pack(-1, n)
    sent = os.writev(fd, (head, data))
    if sent < len(head) + n:  # a signal cut the write short (rare): write the rest as it goes
        rest = memoryview(head + data)[sent:]
        while rest:
            rest = rest[os.write(fd, rest):]


class FrameReader:
    """Frames as `multiprocessing.connection.Connection.send_bytes` writes them (a 4-byte
    big-endian length, or -1 and an 8-byte one, then the bytes), read from a file descriptor with
    one system call for whatever has arrived: under load, several frames per call. Use it after a
    selector said the descriptor is readable, and never mix it with the connection's own recv."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._buf = bytearray()

    def read(self) -> list[bytes]:
        """The frames complete so far (maybe none); raises EOFError at end of file."""
        chunk = os.read(self.fd, 1 << 18)
        if not chunk:
            raise EOFError
        self._buf += chunk
        out, pos, buf = [], 0, self._buf
        while len(buf) - pos >= 4:
            (size,), head = struct.unpack_from("!i", buf, pos), 4
            if size == -1:
                if len(buf) - pos < 12:
                    break
                (size,), head = struct.unpack_from("!Q", buf, pos + 4), 12
            if len(buf) - pos < head + size:
                break
            out.append(bytes(buf[pos + head:pos + head + size]))
            pos += head + size
        del buf[:pos]
        return out
