"""Cross-process handoff: tensor bytes in a reusable shared-memory block, a small picklable message.

Blocks are plain files in /dev/shm (POSIX shared memory on Linux) opened directly rather than
through `multiprocessing.shared_memory`, whose resource tracker unlinks and warns about segments
that another process legitimately owns by then.

Creating, sizing, mapping and first-touching a fresh file on every handoff costs far more than
moving the bytes (page faults and syscalls dominate), so blocks live as long as their owner:

- A payload's arrays are torch tensors or numpy arrays, and arrive as what they left as (dtype
  and shape kept): `TensorRef.dtype` is a torch dtype's name ('float32') or a numpy dtype's
  `str` ('<f4', '|b1'), whose first character is never a letter. This module imports torch only
  for a payload that holds a tensor, so a process whose stages speak numpy never loads it.
- Each sending process has a `SegmentPool`. `pack` copies a payload's tensors into a free block
  (one copy; no page faults once the pool is warm), lends the block under a fresh lease number,
  and returns a `Packed` control message. The owner never writes a lent block.
- Each receiving process has a `Receiver`, which maps every block once and hands out tensors that
  are views of the mapping: no copy on receive. When the last view of a handoff dies, the lease is
  given back through the `release` callback, and the owner's pool may reuse the block.
- A reader that keeps a tensor keeps its block lent, and the owner's pool grows instead (the
  `stage_planner_shm_blocks` metric shows it): a stage that stores an input should clone it.
- Leases, not block names, are what gets released: a late or duplicated release of an old lease
  (a request that failed while its message was in flight, a reader that died) can then never free
  a block that has since been lent again.

- A small payload (at most the pool's `inline_bytes`) skips the block: its tensors travel as raw
  bytes inside the control message. Below some tens of KiB, copying the bytes through the socket
  is cheaper than a lease's round trip; the reader's tensors then view its own copy.
- A destination names one incarnation of a reader (`process:pid`): when it dies, its owner
  `reclaim`s every block lent to it, and a later release of those leases is ignored.

Block files are named `<deployment prefix><owner>.<owner pid>.<n>`, so a release finds the right
incarnation of the owner, and what a dead owner left behind can be removed (`sweep`, and
`sweep_orphans` for blocks whose owner process no longer exists at all). A reader that still maps
an unlinked file keeps valid memory until it unmaps it.
"""

from __future__ import annotations

import itertools
import mmap
import os
import queue
import re
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from launcher.wire import arrays

SHM_DIR = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
_ALIGN = 64
MIN_BLOCK = 64 << 10
# A pool's `inline_bytes` that sends every payload inside its message, whatever its size (no
# shared memory: a backend whose processes may sit on other machines).
ALL_INLINE = 1 << 62
# A small payload must not pin a block this many times larger than it needs; it gets its own.
_MAX_OVERSIZE = 8
# Fault every page in when mapping (once per block and process) rather than one fault per page.
_MAP_FLAGS = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)


@dataclass(frozen=True)
class TensorRef:
    key: str
    dtype: str
    shape: tuple[int, ...]
    offset: int
    nbytes: int


@dataclass(frozen=True)
class Packed:
    """The control message for one handoff: tensors by reference, everything else by value."""

    segment: str | None  # None when no tensor has any bytes
    tensors: tuple[TensorRef, ...]
    values: Mapping[str, Any]
    lease: int = 0
    used: int = 0  # bytes of the block the tensors occupy
    inline: bytearray | None = None  # the tensors' bytes, when they travel in the message


@dataclass(frozen=True)
class PoolUsage:
    lent: int = 0  # blocks a reader still views
    free: int = 0  # blocks ready for the next handoff
    bytes: int = 0  # size of all blocks


def safe_name(name: str) -> str:
    """Process names go into file names; '.' separates fields, so it must not appear in one."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)


def owner_prefix(prefix: str, owner: str, pid: int | None = None) -> str:
    """The name prefix of every block `owner` (process `pid`, by default this one) creates."""
    return f"{prefix}{safe_name(owner)}.{os.getpid() if pid is None else pid}."


def owner_pid(segment: str) -> int | None:
    """The pid of the process that created block `segment`, or None for a foreign name."""
    parts = segment.rsplit(".", 2)
    if len(parts) != 3 or not parts[1].isdigit():
        return None
    return int(parts[1])


class _Block:
    __slots__ = ("name", "size", "mm", "bytes", "lease", "destination")

    def __init__(self, name: str, size: int, mm: mmap.mmap) -> None:
        self.name, self.size, self.mm = name, size, mm
        self.bytes = np.frombuffer(mm, dtype=np.uint8)
        self.lease = 0  # 0: free
        self.destination: str | None = None


class SegmentPool:
    """The shared-memory blocks one process sends from. Thread-safe: every stage thread packs."""

    def __init__(self, prefix: str, owner: str, inline_bytes: int = 0) -> None:
        self.prefix = owner_prefix(prefix, owner)
        self.inline_bytes = inline_bytes
        self._lock = threading.Lock()
        self._blocks: dict[str, _Block] = {}
        self._free: list[_Block] = []
        self._names = itertools.count()
        self._leases = itertools.count(1)
        self._closed = False
        self._creating = 0  # files being created outside the lock

    def pack(self, data: Mapping[str, Any], destination: str) -> Packed:
        """Copy the tensors of `data` into a block lent to `destination`; values go by value."""
        tensors, values, refs, used = {}, {}, [], 0
        tensor = arrays.tensor_type()
        for key, v in data.items():  # one pass: this runs on every handoff
            if type(v) is np.ndarray and arrays.shareable(v):
                tensors[key] = v
                nbytes, dtype = v.nbytes, v.dtype.str
            elif tensor is not None and isinstance(v, tensor):
                tensors[key] = t = v.detach()
                nbytes = t.nbytes
                dtype = arrays.torch_name(t.dtype)
            else:
                values[key] = v
                continue
            refs.append(TensorRef(key, dtype, tuple(v.shape), used, nbytes))
            used += -(-nbytes // _ALIGN) * _ALIGN
        if used == 0:  # only empty tensors (or none): their shapes say everything
            return Packed(None, tuple(refs), values)
        if used <= self.inline_bytes:
            inline = arrays.pack_inline(refs, tensors, used)
            return Packed(None, tuple(refs), values, used=used, inline=inline)
        block = self._take(used, destination)
        try:
            arrays.copy_in(block.bytes, refs, tensors)
        except BaseException:
            self.release(block.name, block.lease)
            raise
        return Packed(block.name, tuple(refs), values, block.lease, used)

    def _take(self, nbytes: int, destination: str) -> _Block:
        with self._lock:
            if self._closed:
                raise RuntimeError("segment pool is closed")
            fits = [b for b in self._free if b.size >= nbytes]
            block = min(fits, key=lambda b: b.size, default=None)
            if block is not None and block.size > _MAX_OVERSIZE * _size_class(nbytes):
                block = None
            if block is not None:
                self._free.remove(block)
            else:
                name = f"{self.prefix}{next(self._names)}"
                self._creating += 1
        if block is None:
            # Outside the lock: sizing and populating a large file must not stall other packers.
            try:
                block = _create(name, _size_class(nbytes))
            except BaseException:
                with self._lock:
                    self._creating -= 1
                raise
            with self._lock:
                self._creating -= 1
                if self._closed:
                    _destroy(block)
                    raise RuntimeError("segment pool is closed")
                self._blocks[block.name] = block
        with self._lock:
            block.lease = next(self._leases)
            block.destination = destination
        return block

    def release(self, segment: str, lease: int) -> bool:
        """Give back one lease; False (and nothing changes) if it is not the block's current one."""
        with self._lock:
            block = self._blocks.get(segment)
            if block is None or lease == 0 or block.lease != lease:
                return False
            block.lease, block.destination = 0, None
            self._free.append(block)
            return True

    def reclaim(self, destination: str) -> int:
        """Take back every block lent to `destination` (a reader that died); how many."""
        with self._lock:
            gone = [b for b in self._blocks.values() if b.lease and b.destination == destination]
            for block in gone:
                block.lease, block.destination = 0, None
                self._free.append(block)
        return len(gone)

    def lent(self) -> dict[str, str]:
        """Block name -> destination, for every block currently lent."""
        with self._lock:
            return {b.name: b.destination for b in self._blocks.values() if b.lease}

    def usage(self) -> PoolUsage:
        with self._lock:
            lent = sum(1 for b in self._blocks.values() if b.lease)
            return PoolUsage(lent, len(self._blocks) - lent,
                             sum(b.size for b in self._blocks.values()))

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._blocks)

    def close(self) -> None:
        """Unlink every block. Readers that still map one keep valid memory until they unmap it."""
        with self._lock:
            self._closed = True
            blocks, self._blocks, self._free = list(self._blocks.values()), {}, []
        for block in blocks:
            _destroy(block)

    def abandon(self, wait_s: float = 1.0) -> int:
        """Unlink every block file of this owner before the process exits at once: refuse new
        blocks, give a creation already under way (another thread, outside the lock) up to
        `wait_s` to finish, then remove the files by name. It takes no lock, so a signal handler
        may call it; without the wait, a block created while the process exits would outlive it."""
        self._closed = True
        deadline = time.monotonic() + wait_s
        # A packer between its look at `_closed` and counting its creation holds the lock: once
        # the lock is free, every creation is counted. With a timeout, since a signal handler
        # may have interrupted this very thread while it held the lock.
        if self._lock.acquire(timeout=wait_s):
            self._lock.release()
        while self._creating and time.monotonic() < deadline:
            time.sleep(0.001)
        return sweep(self.prefix)

    def __enter__(self) -> SegmentPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _size_class(nbytes: int) -> int:
    return max(MIN_BLOCK, 1 << (nbytes - 1).bit_length())


def _create(name: str, size: int) -> _Block:
    path = os.path.join(SHM_DIR, name)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.ftruncate(fd, size)
        mm = mmap.mmap(fd, size, flags=_MAP_FLAGS)
    except BaseException:
        os.unlink(path)
        raise
    finally:
        os.close(fd)
    return _Block(name, size, mm)


def _destroy(block: _Block) -> None:
    block.bytes = None  # the mmap cannot close while a tensor still exports its buffer
    try:
        block.mm.close()
    except BufferError:
        pass  # someone in this process still views it; unmapped when that view dies
    try:
        os.unlink(os.path.join(SHM_DIR, block.name))
    except FileNotFoundError:
        pass  # already swept by the supervisor


class Receiver:
    """Maps other processes' blocks (each once) and turns control messages into tensor views.

    `release(segment, lease)` is called once per handoff after the last tensor viewing it has
    died. Tensors can die on any thread, inside garbage collection, even while that thread holds a
    lock the callback needs, so the callback never runs there: releases are queued and a
    dedicated thread calls it.
    """

    def __init__(self, release: Callable[[str, int], None]) -> None:
        self._release = release
        self._maps: dict[str, mmap.mmap] = {}
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue = queue.SimpleQueue()  # put() is safe from finalizers
        self._thread: threading.Thread | None = None

    def unpack(self, packed: Packed) -> dict[str, Any]:
        """The payload, each tensor a view of the shared block (writable: the block is lent to
        this process alone until every view is gone)."""
        data = dict(packed.values)
        if packed.segment is None:
            for ref in packed.tensors:
                if arrays.is_numpy(ref.dtype):
                    data[ref.key] = arrays.inline_array(packed.inline, ref)
                    continue
                import torch

                dtype = arrays.torch_dtype(ref.dtype)
                if packed.inline is None or ref.nbytes == 0:
                    data[ref.key] = torch.empty(ref.shape, dtype=dtype)
                else:  # a view of the message's own bytes: the message is this reader's copy
                    t = torch.frombuffer(packed.inline, dtype=dtype, offset=ref.offset,
                                         count=ref.nbytes // dtype.itemsize)
                    # (a 1-D tensor has its shape already; `view` costs more than the rest)
                    data[ref.key] = t if len(ref.shape) == 1 else t.view(ref.shape)
            return data
        if self._thread is None:
            self._start()
        try:
            mm = self._map(packed.segment)
            block = np.frombuffer(mm, dtype=np.uint8, count=packed.used)
        except BaseException:
            self._queue_release(packed.segment, packed.lease)
            raise
        # `block` is the base of every array below (numpy collapses a view's base to it), and
        # the storage of every tensor (`torch.from_numpy` holds it until the last tensor sharing
        # that storage dies, however it was derived, views made under inference_mode included):
        # it dies with the last view of the handoff. A finalizer on one tensor or array could
        # fire earlier than that.
        done = weakref.finalize(block, self._queue_release, packed.segment, packed.lease)
        done.atexit = False
        tensor_base = None
        for ref in packed.tensors:
            if arrays.is_numpy(ref.dtype):
                dtype = arrays.np_dtype(ref.dtype)
                if ref.nbytes == 0:
                    data[ref.key] = np.empty(ref.shape, dtype=dtype)
                else:
                    data[ref.key] = (block[ref.offset:ref.offset + ref.nbytes].view(dtype)
                                     .reshape(ref.shape))
                continue
            import torch

            dtype = arrays.torch_dtype(ref.dtype)
            if ref.nbytes == 0:
                data[ref.key] = torch.empty(ref.shape, dtype=dtype)
                continue
            if tensor_base is None:
                tensor_base = torch.from_numpy(block)
            data[ref.key] = (tensor_base[ref.offset:ref.offset + ref.nbytes].view(dtype)
                             .view(ref.shape))
        del block, tensor_base
        return data

    def _map(self, segment: str) -> mmap.mmap:
        with self._lock:
            mm = self._maps.get(segment)
            if mm is None:
                fd = os.open(os.path.join(SHM_DIR, segment), os.O_RDWR)
                try:
                    mm = mmap.mmap(fd, os.fstat(fd).st_size, flags=_MAP_FLAGS)
                finally:
                    os.close(fd)
                self._maps[segment] = mm
            return mm

    def _queue_release(self, segment: str, lease: int) -> None:
        self._queue.put((segment, lease))

    def _start(self) -> None:
        # Started here, never from a finalizer, which may run while this thread holds _lock.
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._releases, daemon=True,
                                                name="shm-release")
                self._thread.start()

    def _releases(self) -> None:
        while (item := self._queue.get()) is not None:
            try:
                self._release(*item)
            except Exception:  # noqa: BLE001 - an unreachable owner is the supervisor's to handle
                pass

    def forget(self, prefix: str) -> None:
        """Unmap cached blocks whose names start with `prefix` (their owner died): views still
        alive keep their mapping until they die."""
        with self._lock:
            gone = [name for name in self._maps if name.startswith(prefix)]
            for name in gone:
                mm = self._maps.pop(name)
                try:
                    mm.close()
                except BufferError:
                    pass

    def mapped(self) -> list[str]:
        with self._lock:
            return sorted(self._maps)

    def close(self) -> None:
        """Stop the release thread after the releases already queued, and unmap what is unused.
        Releases of views that outlive this are dropped: their owners are closing too."""
        self.forget("")
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join(timeout=5)


def segments(prefix: str) -> list[str]:
    try:
        return sorted(n for n in os.listdir(SHM_DIR) if n.startswith(prefix))
    except FileNotFoundError:
        return []


def sweep_orphans(prefix: str) -> int:
    """Unlink every block under `prefix` whose owner process no longer exists (its owner and
    that owner's supervisor were both killed before they could clean up); how many."""
    return _unlink(n for n in segments(prefix)
                   if (pid := owner_pid(n)) is not None and not pid_alive(pid))


def pid_alive(pid: int) -> bool:
    """Whether process `pid` exists (someone else's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


def sweep(prefix: str) -> int:
    """Unlink every segment whose name starts with `prefix`; returns how many there were."""
    return _unlink(segments(prefix))


def _unlink(names: Iterable[str]) -> int:
    removed = 0
    for name in names:
        try:
            os.unlink(os.path.join(SHM_DIR, name))
            removed += 1
        except FileNotFoundError:
            pass
    return removed
