"""Handoff cost: one tensor from one stage to the next, three ways, for 1 MiB and 64 MiB.

- copy: `torch.Tensor.copy_` into a preallocated tensor of the same size; the physical limit of
  moving the bytes once, and the baseline of the ratios;
- in-process: what the launcher does between stages of one process, a queue put of the payload
  dict read by another thread (no copy at all);
- cross-process: what it does between processes, `launcher.ipc.pack` into a shared-memory segment,
  a control message over a pipe, and `ipc.unpack` (copy out, unlink) in the receiving process,
  timed until the receiver acknowledges. (In a deployment the control message makes one more hop
  through the supervisor; it is a few hundred bytes either way.)

Prints medians with min/max, and ratios. No pass/fail.

    python benchmarks/handoff_cost.py            # full run (a few seconds)
    python benchmarks/handoff_cost.py --quick    # fewer repetitions
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import platform
import queue
import statistics
import threading
import time
from datetime import date

import torch

from launcher import ipc

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
    while (packed := conn.recv()) is not None:
        data = ipc.unpack(packed)
        conn.send(data["codes"].numel())


def cross_process(nbytes: int, repeat: int) -> list[float]:
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_receiver, args=(child,), daemon=True)
    proc.start()
    child.close()
    tensor = _tensor(nbytes)
    out = []
    try:
        for i in range(repeat + 1):  # the first one pays for the receiver's imports
            t = time.perf_counter()
            packed = ipc.pack({"codes": tensor, "context_frames": 2},
                              ipc.segment_name(PREFIX, "receiver"))
            parent.send(packed)
            assert parent.recv() == tensor.numel()
            if i:
                out.append(time.perf_counter() - t)
    finally:
        parent.send(None)
        proc.join(5)
        if proc.is_alive():
            proc.kill()
        ipc.sweep(PREFIX)
    return out


def fmt(ts: list[float]) -> str:
    return (f"median {statistics.median(ts) * 1e3:9.3f} ms  "
            f"(min {min(ts) * 1e3:.3f}, max {max(ts) * 1e3:.3f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    torch.set_num_threads(1)  # as in a worker process
    print(f"handoff cost, {date.today()}, {platform.processor() or platform.machine()}, "
          f"torch {torch.__version__}, shared memory in {ipc.SHM_DIR}")
    for nbytes in SIZES:
        repeat = (5 if args.quick else 20) if nbytes >= 16 * MIB else (20 if args.quick else 200)
        copy = memory_copy(nbytes, repeat)
        local = in_process(nbytes, repeat)
        remote = cross_process(nbytes, repeat)
        base = statistics.median(copy)
        print(f"\n{nbytes // MIB} MiB tensor, {repeat} repetitions")
        for name, ts in (("copy_ (baseline)", copy), ("in-process handoff", local),
                         ("cross-process handoff", remote)):
            med = statistics.median(ts)
            # A queue put moves no bytes, so a rate would mean nothing there.
            rate = "" if ts is local else f"  {nbytes / med / 1e9:6.2f} GB/s"
            print(f"  {name:24s} {fmt(ts)}  {med / base:8.2f}x copy{rate}")
        print(f"  cross-process / in-process: "
              f"{statistics.median(remote) / statistics.median(local):.0f}x")


if __name__ == "__main__":
    main()
