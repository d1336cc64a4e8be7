"""Handoff cost: one tensor from one stage to the next, three ways, for 1 MiB and 64 MiB.

- copy: `torch.Tensor.copy_` into a preallocated tensor of the same size; the physical limit of
  moving the bytes once, and the baseline of the ratios;
- in-process: what the launcher does between stages of one process, a queue put of the payload
  dict read by another thread (no copy at all);
- cross-process: what it does between processes, a copy into a block of the sender's warm
  `launcher.wire.ipc.SegmentPool`, a control message over a pipe, and `Receiver.unpack` in the
  receiving process (tensor views of the block, mapped once: no copy), timed until the receiver
  acknowledges with the tensor's last element (checked, so a stale block would show). The receiver
  then drops the tensor; its finalizer gives the lease back over the pipe, and the sender's pool
  reuses the block. (A deployment does the same worker to worker, over a Unix socket per link;
  it sends payloads of up to 64 KiB inside the message instead: `launcher_overhead.py`.)
- pipe round trip: the same control message and acknowledgement with no tensor at all, after the
  same busy time the sender spends packing; the floor under the cross-process handoff here.

Prints medians with min/max, and ratios. No pass/fail.

    python -m benchmarks.handoff_cost            # full run (a few seconds)
    python -m benchmarks.handoff_cost --quick    # fewer repetitions
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import queue
import statistics
import threading
import time
from datetime import date

import torch

from benchmarks.machine import cpu_name
from launcher.wire import ipc

MIB = 1 << 20
SIZES = (1 * MIB, 64 * MIB)
PREFIX = f"stageplanner-handoffbench-{id(object()):x}-"


def _tensor(nbytes: int) -> torch.Tensor:
    return torch.rand(nbytes // 4, dtype=torch.float32)


def memory_copy(nbytes: int, repeat: int) -> list[float]:
    src, dst = _tensor(nbytes), torch.empty(nbytes // 4, dtype=torch.float32)
    dst.copy_(src)  # touch the pages once, as a long-running server would have
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        dst.copy_(src)
        out.append(time.perf_counter() - t)
    return out


def in_process(nbytes: int, repeat: int) -> list[float]:
    inbox: queue.Queue = queue.Queue()
    got: queue.Queue = queue.Queue()

    def stage() -> None:
        while (item := inbox.get()) is not None:
            got.put((time.perf_counter(), item["codes"].shape))

    thread = threading.Thread(target=stage, daemon=True)
    thread.start()
    payload = {"codes": _tensor(nbytes)}
    out = []
    for _ in range(repeat + 1):
        t = time.perf_counter()
        inbox.put(dict(payload))
        arrived, _ = got.get()
        out.append(arrived - t)
    inbox.put(None)
    thread.join()
    return out[1:]


def _receiver(conn) -> None:
    lock = threading.Lock()  # the release thread sends too

    def give_back(segment: str, lease: int) -> None:
        with lock:
            conn.send(("free", segment, lease))

    receiver = ipc.Receiver(give_back)
    while (packed := conn.recv()) is not None:
        data = receiver.unpack(packed)
        with lock:
            conn.send(("ack", data["codes"][-1].item()))
        del data  # as a stage would once done with it: this gives the block back
    receiver.close()


def _echo(conn) -> None:
    while conn.recv() is not None:
        conn.send(("ack", 0))


def pipe_round_trip(packed: ipc.Packed, busy: float, repeat: int) -> list[float]:
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_echo, args=(child,), daemon=True)
    proc.start()
    child.close()
    out = []
    try:
        for i in range(repeat + WARMUP):
            start = time.perf_counter()
            while time.perf_counter() - start < busy:
                pass  # a receiver left idle longer wakes up more slowly: keep the gap the same
            t = time.perf_counter()
            parent.send(packed)
            parent.recv()
            if i >= WARMUP:
                out.append(time.perf_counter() - t)
    finally:
        parent.send(None)
        proc.join(5)
        if proc.is_alive():
            proc.kill()
    return out


WARMUP = 3  # the first handoff pays for the receiver's imports, the next ones fill the pool


def cross_process(nbytes: int, repeat: int) -> tuple[list[float], int, ipc.Packed, float]:
    """Timings, how many blocks the sender's pool made, a control message, median packing time."""
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_receiver, args=(child,), daemon=True)
    proc.start()
    child.close()
    tensor = _tensor(nbytes)
    pool = ipc.SegmentPool(PREFIX, "sender")
    out, packing = [], []
    try:
        for i in range(repeat + WARMUP):
            tensor[-1] = i
            t = time.perf_counter()
            packed = pool.pack({"codes": tensor, "context_frames": 2}, "receiver")
            sent = time.perf_counter()
            parent.send(packed)
            # Give-backs arriving here are handled at once, as a worker's receiver thread would;
            # one arriving after the ack waits for the next handoff, so the pool keeps two blocks.
            while (msg := parent.recv())[0] == "free":
                pool.release(msg[1], msg[2])
            elapsed = time.perf_counter() - t
            assert msg == ("ack", i), msg
            if i >= WARMUP:
                out.append(elapsed)
                packing.append(sent - t)
        return out, len(pool.names()), packed, statistics.median(packing)
    finally:
        parent.send(None)
        proc.join(5)
        if proc.is_alive():
            proc.kill()
        pool.close()
        ipc.sweep(PREFIX)


def fmt(ts: list[float]) -> str:
    return (f"median {statistics.median(ts) * 1e3:9.3f} ms  "
            f"(min {min(ts) * 1e3:.3f}, max {max(ts) * 1e3:.3f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    torch.set_num_threads(1)  # as in a worker process
    print(f"handoff cost, {date.today()}, {cpu_name()}, "
          f"torch {torch.__version__}, shared memory in {ipc.SHM_DIR}")
    for nbytes in SIZES:
        repeat = (5 if args.quick else 20) if nbytes >= 16 * MIB else (20 if args.quick else 200)
        copy = memory_copy(nbytes, repeat)
        local = in_process(nbytes, repeat)
        remote, blocks, packed, packing = cross_process(nbytes, repeat)
        floor = pipe_round_trip(packed, packing, repeat)
        base = statistics.median(copy)
        print(f"\n{nbytes // MIB} MiB tensor, {repeat} repetitions")
        for name, ts in (("copy_ (baseline)", copy), ("in-process handoff", local),
                         ("cross-process handoff", remote), ("pipe round trip", floor)):
            med = statistics.median(ts)
            # A queue put or a bare message moves no bytes, so a rate would mean nothing there.
            rate = "" if ts is local or ts is floor else f"  {nbytes / med / 1e9:6.2f} GB/s"
            print(f"  {name:24s} {fmt(ts)}  {med / base:8.2f}x copy{rate}")
        print(f"  cross-process / in-process: "
              f"{statistics.median(remote) / statistics.median(local):.0f}x; "
              f"blocks in the sender's pool: {blocks}; packing {packing * 1e3:.3f} ms of it")


if __name__ == "__main__":
    main()
