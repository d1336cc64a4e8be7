"""The validated description of one pipeline: stages, handoffs and the model's placement facts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Hz of the audio the terminal stage returns when a card declares no `sample_rate`: the stand-in
# stages' rate. A card of a real model declares its own (piper-joe: 22,050).
DEFAULT_SAMPLE_RATE = 24_000


@dataclass(frozen=True)
class StageConfig:
    name: str
    process: str | None
    gpus: tuple[int, ...]  # () = CPU; one id per tensor-parallel rank
    tp_size: int = 1
    next: tuple[str, ...] = ()
    stream_to: tuple[str, ...] = ()
    wait_for: tuple[str, ...] = ()
    terminal: bool = False
    factory: str | None = None
    args: tuple[tuple[str, Any], ...] = ()
    fraction: float | None = None  # runtime.resources.total_gpu_memory_fraction
    threads: int | None = None  # CPU intra-op threads the config gives it (None: not declared)
    # runtime.resources.gpu_compute_fraction: the share of its GPU's compute (CUDA MPS's active
    # threads) the stage's process may use; None: the whole GPU.
    gpu_compute_fraction: float | None = None
    # runtime.resources.host_memory_mib: what the stage adds to a process's memory, measured
    # (None: not declared, and the memory of its process is unknown).
    host_memory_mib: float | None = None

    @property
    def is_tp(self) -> bool:
        return self.tp_size > 1

    @property
    def on_gpu(self) -> bool:
        return bool(self.gpus)


@dataclass(frozen=True)
class EdgeResources:
    """`process_edge_resources`: fractions to apply when a request newly splits `edge`."""

    edge: tuple[str, str]
    fractions: tuple[tuple[str, float], ...]


@dataclass(frozen=True)
class ProcessLine:
    """Where a config set a stage's `process`: the YAML line a declared split is blamed on."""

    source: str  # the config file, "<config>" for a dict, or "card NAME variant V"
    key: str  # key path, e.g. "stages[0].process"
    process: str

    def __str__(self) -> str:
        return f"`{self.key}: {self.process}` in {self.source}"


@dataclass(frozen=True)
class Carried:
    """A key of an engine's config that the planner does not model (sglang-omni's `engine.*`,
    `factory.*`, `relay_backend`, ...): kept as given, listed as "carried, not planned" and
    written back out by the engine writers (`planner.render.engines`)."""

    path: tuple[str, ...]  # e.g. ("stages", "tts_engine", "engine", "mem_fraction_static")
    value: Any

    @property
    def key(self) -> str:
        return ".".join(self.path)


MPS_MODES = ("off", "on", "auto")  # sglang-omni's `mps`: CUDA MPS for same-GPU processes


@dataclass(frozen=True)
class PlacementPolicy:
    max_total_gpu_memory_fraction_per_gpu: float = 1.0
    require_memory_fraction_for_colocation: bool = True


@dataclass(frozen=True)
class Pipeline:
    name: str  # card name or the config's own name
    variant: str
    stages: tuple[StageConfig, ...]  # pipeline order
    roles: tuple[tuple[str, str], ...] = ()
    process_safe_edges: frozenset[tuple[str, str]] = frozenset()
    unsupported_reasons: tuple[tuple[tuple[str, str], str], ...] = ()
    edge_resources: tuple[EdgeResources, ...] = ()
    fused_stages: tuple[tuple[str, ...], ...] = ()
    placement: PlacementPolicy = field(default_factory=PlacementPolicy)
    source: str = ""
    sample_rate: int = DEFAULT_SAMPLE_RATE  # Hz of the terminal stage's audio (the card's `sample_rate`)
    voices: tuple[str, ...] = ()  # the voices a request may name; () = any
    word_timestamps: bool = False  # the stages yield word timings (the card's `word_timestamps`)
    # `processes: {NAME: {copies: N}}`: copies of a process group the config declares.
    process_copies: tuple[tuple[str, int], ...] = ()
    # `processes: {NAME: {cpus: 0-1}}`: the CPUs a declared process group is pinned to.
    process_cpus: tuple[tuple[str, tuple[int, ...]], ...] = ()
    # `processes: {NAME: {gpus: [1, 2]}}` (sglang-omni's `replica_devices`): the GPU of each copy
    # of a group, in copy order; a group without one runs every copy on its stages' GPU.
    process_gpus: tuple[tuple[str, tuple[int, ...]], ...] = ()
    mps: str | None = None  # `mps: off|on|auto` (None: not said; engines default to off)
    # Keys of an engine's config the planner does not model, carried through to what it writes.
    carried: tuple[Carried, ...] = ()
    # The dialect the user's config (or dotted flags) spoke: "planner" or "sglang-omni"; hints
    # that say what to write are said in it.
    dialect: str = "planner"
    model_paths: tuple[str, ...] = ()  # the card's model paths (none for a complete pipeline)
    # Stages whose declared process a config or variant set, away from where the card puts them
    # (every stage of a complete pipeline): the lines a declared split of an unsafe edge is blamed on.
    process_lines: tuple[tuple[str, ProcessLine], ...] = ()
    # True when the layout is a built-in card with a variant or a user overlay (`model:`): those
    # are requests against the card's declared topology and their unsafe splits are checked. A
    # complete pipeline (`name:`) declares its own topology, which is the baseline
    # (specification, "Which edges are checked"): its declared splits are only warned about.
    over_card: bool = False
    # Whose layout `planner solve` starts from, for the person reading it: "card" (a built-in card
    # or its variant) or "config" (a complete pipeline, or an overlay that moves a stage).
    declared_by: str = "config"

    def stage(self, name: str) -> StageConfig:
        for s in self.stages:
            if s.name == name:
                return s
        raise KeyError(name)

    @property
    def stage_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.stages)

    def index(self, name: str) -> int:
        return self.stage_names.index(name)

    def handoffs(self) -> dict[tuple[str, str], tuple[str, ...]]:
        """Every handoff edge with its kinds, in pipeline order of (source, target).

        `next` and `stream_to` to one target are one handoff; `wait_for: [x]` on stage s is x -> s.
        """
        kinds: dict[tuple[str, str], list[str]] = {}
        for s in self.stages:
            for t in s.next:
                kinds.setdefault((s.name, t), []).append("next")
            for t in s.stream_to:
                kinds.setdefault((s.name, t), []).append("stream")
            for src in s.wait_for:
                kinds.setdefault((src, s.name), []).append("wait_for")
        order = {n: i for i, n in enumerate(self.stage_names)}
        return {
            e: tuple(dict.fromkeys(k))
            for e, k in sorted(kinds.items(), key=lambda kv: (order[kv[0][0]], order[kv[0][1]]))
        }

    def unsupported_reason(self, edge: tuple[str, str]) -> str | None:
        """Why a handoff must stay in one process; None when it is process-safe."""
        if edge in self.process_safe_edges:
            return None
        for e, reason in self.unsupported_reasons:
            if e == edge:
                return reason
        return "the model does not declare this handoff process-safe"

    def role_target(self, alias: str) -> str | None:
        return dict(self.roles).get(alias)

    def process_line(self, stage: str) -> ProcessLine | None:
        return dict(self.process_lines).get(stage)
