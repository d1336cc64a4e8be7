"""Tensor-parallel lock step: rank 0 runs the stage as any worker does and tells the other ranks
what to do; they run the same stage on the same inputs (the stage does its own collectives) and
discard the outputs.

Everything rank 0 sends is one `broadcast_object_list`: a payload to run, `None` to keep idle
ranks inside gloo's collective timeout, and before each chunk of a stream, whether to pull it
(so a cancelled stream is closed on every rank at the same step).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from launcher import cancellation

IDLE_BROADCAST_S = 30.0  # keeps idle follower ranks inside gloo's collective timeout


def _broadcast(value: Any) -> Any:
    import torch.distributed as dist

    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def keep_alive() -> None:
    _broadcast(None)


def share_input(data: Mapping[str, Any]) -> None:
    """Rank 0: the input of the next invocation. Received tensors are views of a shared block;
    pickling a view would ship the whole block, so the followers get compact copies."""
    import torch  # a tensor-parallel stage is a torch stage: loaded already

    _broadcast({k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in data.items()})


def decide(go: bool) -> bool:
    """Rank 0's decision to pull the next chunk; every rank gets rank 0's value."""
    return bool(_broadcast(go))


def follow(stage: Callable[[Mapping[str, Any]], Any]) -> None:
    """A follower rank's whole life: run what rank 0 runs, in the same order (its cancellation
    points too: rank 0 decides at each)."""
    cancellation.want_points()
    while True:
        payload = _broadcast(None)
        if payload is None:  # idle keep-alive
            continue
        try:
            out = stage(payload)
            if isinstance(out, Mapping):
                continue
            iterator = iter(out)
            try:
                while decide(True):
                    try:
                        next(iterator)
                    except StopIteration:
                        break
            finally:
                close = getattr(iterator, "close", None)
                if close is not None:
                    close()
        except Exception:  # noqa: BLE001, S110 - rank 0 hits the same error and reports it
            pass
