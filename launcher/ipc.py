"""Cross-process handoff: tensor bytes in one shared-memory segment, a small picklable control message.

Segments are plain files in /dev/shm (POSIX shared memory on Linux) opened directly rather than
through `multiprocessing.shared_memory`, whose resource tracker unlinks and warns about segments
that another process legitimately owns by then. Ownership is simple instead: the sender creates a
segment, the single receiver copies the tensors out and unlinks it at once. Every name starts with
the deployment's prefix and the destination process, so the supervisor can remove what a killed
process left behind (`sweep`).
"""

from __future__ import annotations

import itertools
import mmap
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

SHM_DIR = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
_ALIGN = 64
_counter = itertools.count()


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

    segment: str | None
    tensors: tuple[TensorRef, ...]
    values: Mapping[str, Any]


def safe_name(name: str) -> str:
    """Process names go into file names; '.' separates fields, so it must not appear in one."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)


def segment_name(prefix: str, destination: str) -> str:
    return f"{prefix}{safe_name(destination)}.{os.getpid()}.{next(_counter)}"


def pack(data: Mapping[str, Any], name: str) -> Packed:
    """Copy the tensors of `data` into a new segment called `name` (none if there are no tensors)."""
    tensors = {k: v.detach() for k, v in data.items() if isinstance(v, torch.Tensor)}
    values = {k: v for k, v in data.items() if not isinstance(v, torch.Tensor)}
    if not tensors:
        return Packed(None, (), values)
    refs, offset = [], 0
    for key, t in tensors.items():
        nbytes = t.numel() * t.element_size()
        refs.append(TensorRef(key, str(t.dtype).removeprefix("torch."), tuple(t.shape), offset, nbytes))
        offset += -(-nbytes // _ALIGN) * _ALIGN
    path = os.path.join(SHM_DIR, name)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.ftruncate(fd, max(offset, 1))
        with mmap.mmap(fd, max(offset, 1)) as mm:
            for ref in refs:
                if ref.nbytes:
                    src = tensors[ref.key].to("cpu").contiguous().reshape(-1)
                    dst = torch.frombuffer(mm, dtype=src.dtype, count=src.numel(), offset=ref.offset)
                    dst.copy_(src)
                    del dst  # the mmap cannot close while a tensor still exports its buffer
    except BaseException:
        os.unlink(path)
        raise
    finally:
        os.close(fd)
    return Packed(name, tuple(refs), values)


def unpack(packed: Packed) -> dict[str, Any]:
    """Rebuild the payload (tensors on CPU) and unlink the segment: each segment is read once."""
    data = dict(packed.values)
    if packed.segment is None:
        return data
    path = os.path.join(SHM_DIR, packed.segment)
    fd = os.open(path, os.O_RDWR)
    try:
        size = os.fstat(fd).st_size
        with mmap.mmap(fd, size) as mm:
            for ref in packed.tensors:
                dtype = getattr(torch, ref.dtype)
                if ref.nbytes == 0:
                    data[ref.key] = torch.empty(ref.shape, dtype=dtype)
                    continue
                count = ref.nbytes // torch.empty((), dtype=dtype).element_size()
                view = torch.frombuffer(mm, dtype=dtype, count=count, offset=ref.offset)
                data[ref.key] = view.clone().reshape(ref.shape)
                del view
    finally:
        os.close(fd)
        discard(packed)
    return data


def discard(packed: Packed | None) -> None:
    """Drop a control message that will never be read (its request failed or its reader died)."""
    if packed is not None and packed.segment is not None:
        try:
            os.unlink(os.path.join(SHM_DIR, packed.segment))
        except FileNotFoundError:
            pass


def segments(prefix: str) -> list[str]:
    try:
        return sorted(n for n in os.listdir(SHM_DIR) if n.startswith(prefix))
    except FileNotFoundError:
        return []


def sweep(prefix: str) -> int:
    """Unlink every segment whose name starts with `prefix`; returns how many there were."""
    removed = 0
    for name in segments(prefix):
        try:
            os.unlink(os.path.join(SHM_DIR, name))
            removed += 1
        except FileNotFoundError:
            pass
    return removed
