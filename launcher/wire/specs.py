"""What one worker process is told to be: its stages, device, memory fraction and peers.

Built by `layout` from a `Plan` in the supervisor, handed to the backend, read by the worker.
Plain frozen values: picklable, and never re-decided downstream.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

CLIENT = "__client__"  # the source name of a request's initial payload
PARENT = "__parent__"  # the destination name of a terminal stage's output (the supervisor)


@dataclass(frozen=True)
class Successor:
    stage: str
    streaming: bool  # a `stream_to` edge: chunks are handed on one by one
    process: str  # the process hosting `stage` (rank 0 for a tensor-parallel stage)
    # `process` is a group of several copies: the request's route names the one to hand it to.
    copied: bool = False


@dataclass(frozen=True)
class StageSpec:
    name: str
    factory: str
    kwargs: tuple[tuple[str, Any], ...]  # from the config: always passed
    defaults: tuple[tuple[str, Any], ...]  # from the launcher: passed when the signature takes them
    predecessors: tuple[str, ...]  # (CLIENT,) for an entry stage
    successors: tuple[Successor, ...]
    device: str
    remote_inputs: bool = False  # some predecessor runs in another process
    threads: int = 1  # CPU intra-op threads the plan gives the stage (offered as `threads`)


@dataclass(frozen=True)
class TpSpec:
    rank: int
    world_size: int
    init_method: str
    backend: str


@dataclass(frozen=True)
class WorkerSpec:
    name: str
    stages: tuple[StageSpec, ...]  # pipeline order
    gpu: int | None  # cuda device index when running on CUDA, else None
    memory_fraction: float | None  # sum of the process's stage fractions on `gpu`
    shm_prefix: str
    inline_bytes: int = 0  # payloads up to this size travel in the message, not in a block
    tp: TpSpec | None = None
    gpu_compute_percentage: int | None = None  # CUDA MPS active threads; None: the whole GPU
    cpus: tuple[int, ...] = ()  # its CPUs (its share: `ProcessGroup.copy_cpus`); (): any
    log_level: int = logging.WARNING  # what it logs (`launcher.logs.worker_level`)

    @property
    def threads(self) -> int:
        """The intra-op threads of the process's torch pool: its widest stage's (torch has one
        pool per process; onnxruntime sessions take each stage's own count)."""
        return max((s.threads for s in self.stages), default=1)

    def describe(self, pid: int | None) -> str:
        stages = ", ".join(s.name for s in self.stages)
        return f"process '{self.name}' (pid {pid}, stages: {stages})"
