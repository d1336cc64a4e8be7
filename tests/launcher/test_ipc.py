import os

import pytest
import torch

from launcher import ipc

PREFIX = "stageplanner-test-"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool,
                                   torch.uint8, torch.float16])
def test_round_trip_is_exact_and_unlinks(dtype):
    data = {
        "a": (torch.randn(3, 5) * 100).to(dtype),
        "scalar": torch.tensor(7).to(dtype),
        "empty": torch.empty(0, 4, dtype=dtype),
        "strided": torch.arange(20).reshape(4, 5).T.to(dtype),
        "text": "hello",
        "n": 3,
    }
    packed = ipc.pack(data, ipc.segment_name(PREFIX, "dest"))
    assert packed.segment and os.path.exists(os.path.join(ipc.SHM_DIR, packed.segment))
    out = ipc.unpack(packed)
    assert not ipc.segments(PREFIX)
    assert out["text"] == "hello" and out["n"] == 3
    for key in ("a", "scalar", "empty", "strided"):
        assert out[key].dtype == dtype and torch.equal(out[key], data[key])


def test_no_tensors_means_no_segment():
    packed = ipc.pack({"text": "x"}, ipc.segment_name(PREFIX, "d"))
    assert packed.segment is None and ipc.unpack(packed) == {"text": "x"}


def test_discard_and_sweep_remove_segments():
    a = ipc.pack({"t": torch.ones(3)}, ipc.segment_name(PREFIX, "one"))
    ipc.pack({"t": torch.ones(3)}, ipc.segment_name(PREFIX, "two"))
    ipc.pack({"t": torch.ones(3)}, ipc.segment_name(PREFIX, "two.x"))  # sanitised: no '.'
    ipc.discard(a)
    ipc.discard(a)  # idempotent
    assert len(ipc.segments(PREFIX)) == 2
    assert ipc.sweep(f"{PREFIX}two.") == 1
    assert ipc.sweep(PREFIX) == 1
    assert not ipc.segments(PREFIX)
