"""The bytes of a handoff's arrays: numpy arrays and torch tensors into a buffer at their
offsets, and views of a buffer back out (see `ipc`). torch is imported only for a tensor.

A ref's dtype is a torch dtype's name ('float32') or a numpy dtype's `str` ('<f4', '|b1'), whose
first character is never a letter: that is how a reader tells which kind to hand out.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from launcher.wire.ipc import TensorRef


def torch_dtype(name: str):
    import torch

    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"unknown tensor dtype {name!r} in a handoff")
    return dtype


def is_numpy(dtype_name: str) -> bool:
    return not dtype_name[:1].isalpha()


def np_dtype(name: str) -> np.dtype:
    try:
        return np.dtype(name)
    except TypeError:
        raise ValueError(f"unknown array dtype {name!r} in a handoff") from None


def shareable(a: np.ndarray) -> bool:
    """Plain numbers only: objects are pointers, and a structured dtype's `str` loses its fields
    (both go by value, pickled)."""
    return not a.dtype.hasobject and a.dtype.fields is None


def tensor_type() -> type | None:
    """torch.Tensor when this process has loaded torch (a payload cannot hold a tensor else)."""
    torch = sys.modules.get("torch")
    return getattr(torch, "Tensor", None)


def pack_inline(refs: list[TensorRef], tensors: Mapping[str, Any], used: int) -> bytearray:
    """The tensors' bytes at their offsets; a tensor through numpy when it can (a few
    microseconds less per tensor, which is what a small handoff costs)."""
    out = bytearray(used)
    view, rest = memoryview(out), []
    for ref in refs:
        t = tensors[ref.key]
        if not ref.nbytes:
            continue
        if not is_numpy(ref.dtype) and t.is_cpu and ref.dtype in NUMPY_VIEWABLE:
            try:
                view[ref.offset:ref.offset + ref.nbytes] = memoryview(t.numpy()).cast("B")
                continue
            except (RuntimeError, TypeError, ValueError):
                # a lazy view numpy refuses (conjugate, negative bit), or a strided one a flat
                # byte view cannot cast: torch copies it
                pass
        rest.append(ref)
    if rest:
        copy_in(np.frombuffer(out, dtype=np.uint8), rest, tensors)
    return out


# torch dtypes (by name) whose tensors `numpy()` can view
NUMPY_VIEWABLE = frozenset({"float64", "float32", "float16", "int64", "int32", "int16", "int8",
                             "uint8", "bool", "complex64", "complex128"})
# torch.float32 -> "float32" (what `torch_dtype` reads back), without formatting a string per tensor
TORCH_NAMES: dict[Any, str] = {}


def torch_name(dtype: Any) -> str:
    name = TORCH_NAMES.get(dtype)
    if name is None:
        name = TORCH_NAMES[dtype] = str(dtype).removeprefix("torch.")
    return name


def copy_in(dst: np.ndarray, refs: list[TensorRef], tensors: Mapping[str, Any]) -> None:
    """Each array's bytes into `dst` (bytes) at its offset; torch only for torch tensors."""
    torch_dst = None
    for ref in refs:
        if not ref.nbytes:
            continue
        t = tensors[ref.key]
        window = dst[ref.offset:ref.offset + ref.nbytes]
        if is_numpy(ref.dtype):
            window.view(t.dtype).reshape(t.shape)[...] = t  # strided sources copy straight in
            continue
        if torch_dst is None:
            import torch

            torch_dst = torch.from_numpy(dst)
        window = torch_dst[ref.offset:ref.offset + ref.nbytes].view(t.dtype)
        window.view(t.shape).copy_(t)  # strided and device sources copy straight in


def inline_array(inline: bytearray | None, ref: TensorRef) -> np.ndarray:
    """A numpy array of an inline payload: a view of the message's own bytes (writable)."""
    dtype = np_dtype(ref.dtype)
    if inline is None or ref.nbytes == 0:
        return np.empty(ref.shape, dtype=dtype)
    return np.frombuffer(inline, dtype=dtype, offset=ref.offset,
                         count=ref.nbytes // dtype.itemsize).reshape(ref.shape)
