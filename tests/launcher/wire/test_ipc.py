import gc
import os
import threading
import time

import numpy as np
import pytest
import torch

from launcher.wire import ipc

from tests.waiting import wait_until

PREFIX = "stageplanner-test-"


@pytest.fixture
def pool():
    p = ipc.SegmentPool(PREFIX, "sender")
    yield p
    p.close()


@pytest.fixture
def receiver(pool):
    """Gives its blocks straight back to `pool`, as the supervisor's routing would."""
    r = ipc.Receiver(pool.release)
    yield r
    r.close()


def collected(condition):
    """`condition`, asked after a garbage collection: a block goes back to its pool when the
    last view of it is collected."""
    def ask():
        gc.collect()
        return condition()
    return ask


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool,
                                   torch.uint8, torch.float16, torch.complex64])
def test_round_trip_is_exact_and_in_place(pool, receiver, dtype):
    data = {
        "a": (torch.randn(3, 5) * 100).to(dtype),
        "scalar": torch.tensor(7).to(dtype),
        "empty": torch.empty(0, 4, dtype=dtype),
        "strided": torch.arange(20).reshape(4, 5).T.to(dtype),
        "odd": torch.arange(7).to(dtype),  # 7 elements: the next tensor must still be aligned
        "text": "hello",
        "n": 3,
    }
    packed = pool.pack(data, "dest")
    assert packed.segment and os.path.exists(os.path.join(ipc.SHM_DIR, packed.segment))
    assert all(ref.offset % 64 == 0 for ref in packed.tensors)
    out = receiver.unpack(packed)
    assert out["text"] == "hello" and out["n"] == 3
    for key in ("a", "scalar", "empty", "strided", "odd"):
        assert out[key].dtype == dtype and out[key].shape == data[key].shape
        assert torch.equal(out[key], data[key])
    # In place: the tensors view the block, which the receiver's process maps.
    assert packed.segment in receiver.mapped()
    assert out["a"].untyped_storage().data_ptr() == out["odd"].untyped_storage().data_ptr()


def test_zero_size_and_tensorless_payloads_need_no_block(pool, receiver):
    packed = pool.pack({"text": "x", "e": torch.empty(0, 3, dtype=torch.bfloat16)}, "d")
    assert packed.segment is None
    out = receiver.unpack(packed)
    assert out["text"] == "x" and out["e"].shape == (0, 3) and out["e"].dtype == torch.bfloat16
    assert pool.pack({"text": "y"}, "d") == ipc.Packed(None, (), {"text": "y"})
    assert not pool.names() and not ipc.segments(PREFIX)


def test_block_is_reused_only_after_the_receiver_drops_every_view(pool, receiver):
    first = pool.pack({"t": torch.arange(1000.0), "u": torch.ones(5, dtype=torch.int64)}, "dest")
    out = receiver.unpack(first)
    kept = out["t"][10:20]  # a view of a view still pins the block
    del out
    gc.collect()
    time.sleep(0.05)
    assert pool.lent() == {first.segment: "dest"}
    second = pool.pack({"t": torch.zeros(1000)}, "dest")
    assert second.segment != first.segment  # lent blocks are never written
    assert torch.equal(kept, torch.arange(10.0, 20.0))
    with torch.inference_mode():
        derived = kept[2:4]  # views made under inference_mode pin it too
    del kept
    gc.collect()
    time.sleep(0.05)
    assert first.segment in pool.lent()
    del derived
    wait_until(collected(lambda: first.segment not in pool.lent()), what="the block's return")
    third = pool.pack({"t": torch.full((1000,), 3.0)}, "dest")
    assert third.segment == first.segment and len(pool.names()) == 2
    assert torch.equal(receiver.unpack(third)["t"], torch.full((1000,), 3.0))


def test_a_tensor_kept_alive_keeps_its_block_lent(pool, receiver):
    packed = pool.pack({"t": torch.arange(64, dtype=torch.int64)}, "dest")
    kept = receiver.unpack(packed)["t"]
    for _ in range(5):
        other = pool.pack({"t": torch.zeros(64, dtype=torch.int64)}, "dest")
        del receiver.unpack(other)["t"]
        wait_until(collected(lambda: other.segment not in pool.lent()), what="the block's return")
        assert packed.segment in pool.lent()
        assert torch.equal(kept, torch.arange(64, dtype=torch.int64))
    assert len(pool.names()) == 2


def test_stale_and_duplicate_releases_are_ignored(pool):
    packed = pool.pack({"t": torch.ones(4)}, "a")
    assert pool.release(packed.segment, packed.lease)
    assert not pool.release(packed.segment, packed.lease)  # twice
    again = pool.pack({"t": torch.ones(4)}, "b")
    assert again.segment == packed.segment and again.lease != packed.lease
    assert not pool.release(packed.segment, packed.lease)  # the old lease frees nothing
    assert pool.lent() == {again.segment: "b"}
    assert not pool.release("stageplanner-test-unknown.1.0", again.lease)


def test_blocks_come_in_power_of_two_classes_and_small_payloads_skip_huge_blocks(pool):
    big = pool.pack({"t": torch.zeros(300_000, dtype=torch.uint8)}, "d")
    size = lambda name: os.path.getsize(os.path.join(ipc.SHM_DIR, name))  # noqa: E731
    assert size(big.segment) == 512 << 10
    pool.release(big.segment, big.lease)
    mid = pool.pack({"t": torch.zeros(100_000, dtype=torch.uint8)}, "d")
    assert mid.segment == big.segment  # free and not too large: reused
    small = pool.pack({"t": torch.zeros(10, dtype=torch.uint8)}, "d")
    assert size(small.segment) == ipc.MIN_BLOCK


def test_owner_is_in_the_name_and_pool_close_sweeps_its_files(receiver):
    a = ipc.SegmentPool(PREFIX, "one.x")  # sanitised: no '.'
    b = ipc.SegmentPool(PREFIX, "two")
    pa = a.pack({"t": torch.ones(3)}, "d")
    b.pack({"t": torch.ones(3)}, "d")
    assert pa.segment.startswith(ipc.owner_prefix(PREFIX, "one_x"))
    assert ipc.owner_pid(pa.segment) == os.getpid()
    view = receiver.unpack(pa)["t"]
    a.close()
    assert ipc.segments(PREFIX) == b.names()
    assert torch.equal(view, torch.ones(3))  # an unlinked block stays valid while mapped
    with pytest.raises(RuntimeError):
        a.pack({"t": torch.ones(3)}, "d")
    b.close()
    b.close()  # idempotent
    assert not ipc.segments(PREFIX)
    receiver.forget(ipc.owner_prefix(PREFIX, "one_x"))
    assert not receiver.mapped() and torch.equal(view, torch.ones(3))


def test_a_block_being_created_while_its_process_exits_leaves_no_file(monkeypatch):
    """A worker told to exit (SIGTERM, its supervisor gone) while another of its threads is still
    creating a block file must not leave that file behind once it has exited."""
    pool = ipc.SegmentPool(PREFIX, "exiting")
    create, outcome = ipc._create, []

    def slow_create(name, size):  # the file appears only once the pool is being abandoned
        wait_until(lambda: pool._closed, 60, "the pool to be abandoned")
        return create(name, size)

    def pack():
        try:
            pool.pack({"t": torch.ones(4096)}, "d")
        except RuntimeError as e:
            outcome.append(e)

    monkeypatch.setattr(ipc, "_create", slow_create)
    packer = threading.Thread(target=pack)
    packer.start()
    wait_until(lambda: pool._creating, 60, "the packer to start creating its block")
    pool.abandon(wait_s=60)
    packer.join(60)
    assert not ipc.segments(ipc.owner_prefix(PREFIX, "exiting"))
    assert outcome and "closed" in str(outcome[0])


def test_sweep_removes_by_prefix():
    a, b = ipc.SegmentPool(PREFIX, "one"), ipc.SegmentPool(PREFIX, "two")
    try:
        a.pack({"t": torch.ones(3)}, "d")
        b.pack({"t": torch.ones(3)}, "d")
        assert ipc.sweep(f"{PREFIX}two.") == 1
        assert ipc.segments(PREFIX) == a.names()
    finally:
        a.close()
        b.close()
    assert not ipc.segments(PREFIX)


def test_release_from_a_finalizer_on_another_thread_reaches_the_callback():
    calls = []
    with ipc.SegmentPool(PREFIX, "s") as pool:
        receiver = ipc.Receiver(
            lambda seg, lease: calls.append((seg, lease, pool.release(seg, lease))))
        packed = pool.pack({"t": torch.ones(10)}, "d")
        box = [receiver.unpack(packed)]
        t = threading.Thread(target=box.clear)
        t.start()
        t.join()
        wait_until(collected(lambda: calls), what="the release call")
        assert calls == [(packed.segment, packed.lease, True)]
        receiver.close()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool,
                                   torch.complex64])
def test_small_payloads_travel_inline_exactly_and_need_no_block(dtype):
    with ipc.SegmentPool(PREFIX, "sender", inline_bytes=1 << 16) as pool:
        data = {"a": (torch.randn(3, 5) * 100).to(dtype), "strided": torch.arange(20).reshape(
            4, 5).T.to(dtype), "scalar": torch.tensor(7).to(dtype),
            "empty": torch.empty(0, 2, dtype=dtype), "flat": torch.arange(6).to(dtype),
            "text": "hi"}
        packed = pool.pack(data, "dest")
        assert packed.segment is None and packed.inline is not None and not pool.names()
        out = ipc.Receiver(lambda *_: pytest.fail("an inline payload has no lease")).unpack(
            packed)
        for key in ("a", "strided", "scalar", "empty", "flat"):
            assert out[key].dtype == dtype and torch.equal(out[key], data[key])
        assert out["text"] == "hi"
        big = pool.pack({"t": torch.zeros(1 << 15)}, "dest")  # 128 KiB: over the limit
        assert big.segment is not None and big.inline is None


def test_an_owner_reclaims_what_it_lent_to_a_reader_that_died(pool):
    dead = pool.pack({"t": torch.ones(100)}, "vocoder:111")
    alive = pool.pack({"t": torch.ones(100)}, "vocoder:222")
    assert pool.reclaim("vocoder:111") == 1
    assert pool.lent() == {alive.segment: "vocoder:222"}
    assert not pool.release(dead.segment, dead.lease)  # a late give-back of it changes nothing
    again = pool.pack({"t": torch.ones(100)}, "vocoder:222")
    assert again.segment == dead.segment  # reused


def test_a_later_start_sweeps_blocks_whose_owner_process_is_dead():
    dead_pid = _a_dead_pid()
    orphan = f"{PREFIX}vocoder.{dead_pid}.0"
    with open(os.path.join(ipc.SHM_DIR, orphan), "wb") as f:
        f.write(b"x")
    with ipc.SegmentPool(PREFIX, "alive") as pool:
        pool.pack({"t": torch.ones(3)}, "d")
        assert ipc.sweep_orphans(PREFIX) == 1
        assert ipc.segments(PREFIX) == pool.names()  # the live owner's block stays


def _a_dead_pid() -> int:
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


NUMPY_DTYPES = [np.float32, np.float64, np.float16, np.int64, np.int16, np.uint8, np.bool_,
                np.complex64, np.dtype(">i4")]


def _arrays(dtype) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "a": (rng.standard_normal((3, 5)) * 100).astype(dtype),
        "scalar": np.array(7, dtype=dtype),
        "empty": np.empty((0, 4), dtype=dtype),
        "strided": np.arange(20).reshape(4, 5).T.astype(dtype),
        "odd": np.arange(7).astype(dtype),
    }


@pytest.mark.parametrize("inline_bytes", [0, 1 << 16], ids=["shared", "inline"])
@pytest.mark.parametrize("dtype", NUMPY_DTYPES, ids=str)
def test_numpy_arrays_arrive_as_numpy_arrays_with_dtype_shape_and_values(dtype, inline_bytes):
    with ipc.SegmentPool(PREFIX, "sender", inline_bytes=inline_bytes) as pool:
        receiver = ipc.Receiver(pool.release)
        try:
            data = {**_arrays(dtype), "tensor": torch.arange(4.0), "n": 3}
            packed = pool.pack(data, "dest")
            assert (packed.segment is None) == bool(inline_bytes)
            out = receiver.unpack(packed)
            for key, sent in _arrays(dtype).items():
                got = out[key]
                assert type(got) is np.ndarray and got.dtype == sent.dtype
                assert got.shape == sent.shape and np.array_equal(got, sent)
            assert isinstance(out["tensor"], torch.Tensor)
            assert torch.equal(out["tensor"], torch.arange(4.0)) and out["n"] == 3
            if not inline_bytes:  # in place: a view of the mapped block, no copy
                assert not out["a"].flags.owndata and packed.segment in receiver.mapped()
        finally:
            receiver.close()


def test_a_numpy_view_pins_its_block_until_it_dies(pool, receiver):
    first = pool.pack({"a": np.arange(1000.0)}, "dest")
    kept = receiver.unpack(first)["a"][10:20]
    gc.collect()
    time.sleep(0.05)
    assert first.segment in pool.lent()
    assert np.array_equal(kept, np.arange(10.0, 20.0))
    del kept
    wait_until(lambda: first.segment not in pool.lent())


def test_object_arrays_go_by_value():
    with ipc.SegmentPool(PREFIX, "sender") as pool:
        packed = pool.pack({"words": np.array(["a", None], dtype=object)}, "dest")
        assert packed.segment is None and not packed.tensors
        assert list(packed.values["words"]) == ["a", None]


def test_numpy_payloads_never_load_torch_in_either_process():
    import subprocess
    import sys

    code = (
        "import sys, numpy as np\n"
        "from launcher.wire import ipc\n"
        f"pool = ipc.SegmentPool({PREFIX!r}, 'np-only', inline_bytes=64)\n"
        "r = ipc.Receiver(pool.release)\n"
        "for n in (4, 100000):\n"
        "    out = r.unpack(pool.pack({'z': np.ones((2, n), np.float32)}, 'd'))\n"
        "    assert out['z'].sum() == 2 * n\n"
        "r.close(); pool.close()\n"
        "assert 'torch' not in sys.modules, 'ipc imported torch'\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert done.returncode == 0, done.stderr
