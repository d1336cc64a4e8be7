"""Typed conflicts: what a broken rule is about, as data. Each rule module builds one from a
minimal core; `planner.render.prose` writes the sentences people read, and `--format json` carries
the fields as they are, so that scripts never parse prose.

Shared field meanings:
- `requests`: the requests of the core (each with the stage it resolved to and the process it
  asks for); empty when the declared configuration breaks the rule by itself.
- `nearest`: the requests of the nearest placement that avoids the conflict, from the declared
  topology (`()`: drop every request; None: no placement near the request avoids it).
- `card`: where a YAML hint goes: the card (and variant) the user started from when no config file
  was given, an `EngineTarget` when the user spoke an engine's dialect (sglang-omni's file or
  dotted flags), else None (the user's own config).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from planner.pipeline import ProcessLine
from planner.plan import ComputeRequest, Request


@dataclass(frozen=True)
class Blame:
    """One request of a core, as given, and what it resolved to."""

    request: Request
    stage: str
    process: str
    noop: bool = False  # an isolation of a stage that already runs alone: it changed nothing


@dataclass(frozen=True)
class CardTarget:
    """A YAML hint for a user who gave no config file: a new overlay on this card."""

    model: str
    variant: str


@dataclass(frozen=True)
class EngineTarget:
    """A hint for a user who wrote an engine's dialect (sglang-omni): said as its dotted flags
    and its `stages:` mapping, so that it pastes into what they wrote."""

    dialect: str


@dataclass(frozen=True)
class UnsupportedHandoff:
    """A request splits a handoff the model does not declare process-safe."""

    code: ClassVar[str] = "unsupported-handoff"
    model: str
    edge: tuple[str, str]
    reason: str
    requests: tuple[Blame, ...]
    nearest: tuple[Request, ...] | None
    # The stages the requests moved, and the nearest placement that keeps them where asked by
    # moving their partner along (None: the nearest fix does not undo a move).
    moved: tuple[str, ...] = ()
    along: tuple[Request, ...] | None = None

    @property
    def stages(self) -> tuple[str, ...]:
        return self.edge


@dataclass(frozen=True)
class MovedBy:
    """An end of a declared split placed by a config line."""

    stage: str
    line: ProcessLine
    process: str  # the process it runs in (a fused group's name when fusion renamed it)


@dataclass(frozen=True)
class Stay:
    """An end of a declared split whose process no config line set."""

    stage: str
    process: str
    fused_with: tuple[str, ...] = ()  # its fused partners, when fusion put it there


@dataclass(frozen=True)
class DeclaredSplit:
    """The declared topology itself (a config line, a variant, a complete pipeline, fusion)
    splits a handoff the model does not declare process-safe."""

    code: ClassVar[str] = "unsupported-handoff"
    model: str
    edge: tuple[str, str]
    reason: str
    lines: tuple[MovedBy, ...]
    stays: tuple[Stay, ...]
    declared_by: str  # the pipeline's source, for ends no line names
    blamed: tuple[str, ...]  # the sources the message names
    placement: tuple[tuple[str, str], ...] | None  # (stage, process) lines that join them again
    nearest: tuple[Request, ...] | None
    card: EngineTarget | None = None  # the user wrote an engine's dialect: the fix is said in it

    @property
    def stages(self) -> tuple[str, ...]:
        return self.edge


@dataclass(frozen=True)
class ConflictingRecommendation:
    code: ClassVar[str] = "conflicting-recommendation"
    model: str
    stage: str
    recommendations: tuple[tuple[tuple[str, str], float], ...]  # (split edge, fraction)
    requests: tuple[Blame, ...]
    nearest: tuple[Request, ...] | None

    @property
    def stages(self) -> tuple[str, ...]:
        return (self.stage,)


@dataclass(frozen=True)
class OverLimit:
    code: ClassVar[str] = "over-limit"
    gpu: int
    fractions: tuple[tuple[str, float], ...]  # (stage, fraction) as the request would set them
    total: float
    limit: float
    requests: tuple[Blame, ...]
    proposal: tuple[tuple[str, float], ...]  # fractions that fit
    card: CardTarget | None
    copies: tuple[tuple[str, int], ...] = ()  # (stage, copies of its process) where more than 1

    @property
    def excess(self) -> float:
        return self.total - self.limit

    @property
    def stages(self) -> tuple[str, ...]:
        return tuple(sorted(s for s, _ in self.fractions))


@dataclass(frozen=True)
class OverCpus:
    """A stage's threads times its process's copies exceed the node's CPUs."""

    code: ClassVar[str] = "over-cpus"
    process: str
    threads: tuple[tuple[str, int], ...]  # (stage, threads) of the stages that do not fit
    copies: int
    cpus: int
    asked: tuple[ComputeRequest, ...]  # the compute flags that set these values
    declared: tuple[str, ...]  # stages whose threads the config (or card) sets, no flag
    placement: tuple[Blame, ...]  # the placement requests that put the stages in `process`
    proposal: tuple[ComputeRequest, ...]  # values that fit
    card: CardTarget | None
    ranks: bool = False  # the stage is tensor-parallel: `process` names its rank processes

    @property
    def stages(self) -> tuple[str, ...]:
        return tuple(s for s, _ in self.threads)


@dataclass(frozen=True)
class PinOutsideNode:
    """A process group is pinned to CPUs the node does not have."""

    code: ClassVar[str] = "pin-outside-node"
    process: str
    pinned: tuple[int, ...]
    missing: tuple[int, ...]  # the pinned CPUs the node lacks
    node_cpus: tuple[int, ...]
    asked: ComputeRequest | None  # the `--process-cpus` flag; None: the config's `processes:`
    proposal: ComputeRequest  # a pin to CPUs the node has
    card: CardTarget | None
    members: tuple[str, ...] = ()

    @property
    def stages(self) -> tuple[str, ...]:
        return self.members


@dataclass(frozen=True)
class OverPinned:
    """A pinned process group's stage runs more threads, every copy counted, than it has CPUs
    (a request error: it is known before any placement is solved)."""

    code: ClassVar[str] = "invalid-compute"
    process: str
    stage: str
    threads: int
    copies: int
    pinned: tuple[int, ...]
    pin_flag: ComputeRequest | None  # None: the config's `processes:` pins it
    thread_flag: ComputeRequest | None
    copy_flag: ComputeRequest | None
    declared_threads: bool  # the config sets the stage's threads (else the default, 1)

    @property
    def stages(self) -> tuple[str, ...]:
        return (self.stage,)


@dataclass(frozen=True)
class SpansGpus:
    code: ClassVar[str] = "spans-gpus"
    process: str
    placed: tuple[tuple[str, int], ...]  # (GPU stage, its GPU) in the process
    members: tuple[str, ...]
    requests: tuple[Blame, ...]
    nearest: tuple[Request, ...] | None

    @property
    def gpus(self) -> tuple[int, ...]:
        return tuple(sorted({g for _, g in self.placed}))

    @property
    def stages(self) -> tuple[str, ...]:
        return tuple(sorted(self.members))


@dataclass(frozen=True)
class RankNameTaken:
    """A process group would take the name of a tensor-parallel rank process."""

    code: ClassVar[str] = "process-name-conflict"
    process: str
    tp_stage: str
    requests: tuple[Blame, ...]
    nearest: tuple[Request, ...] | None

    @property
    def rank(self) -> str:
        return self.process.rsplit("_tp", 1)[-1]

    @property
    def stages(self) -> tuple[str, ...]:
        return tuple(sorted(b.stage for b in self.requests)) or (self.tp_stage,)


@dataclass(frozen=True)
class SharedRankNames:
    """Two tensor-parallel stages produce the same rank process names."""

    code: ClassVar[str] = "process-name-conflict"
    process: str
    tp_stages: tuple[str, ...]
    rename: str  # the stage the hint gives its own process name
    card: CardTarget | None

    @property
    def stages(self) -> tuple[str, ...]:
        return tuple(sorted(self.tp_stages))


@dataclass(frozen=True)
class MissingFraction:
    code: ClassVar[str] = "missing-fraction"
    model: str
    gpu: int
    processes: tuple[str, ...]
    missing: tuple[str, ...]
    requests: tuple[Blame, ...]
    requested: bool  # a request (not the declared config) shares the GPU
    proposal: tuple[tuple[str, float], ...]
    card: CardTarget | None

    @property
    def stages(self) -> tuple[str, ...]:
        return self.missing


@dataclass(frozen=True)
class IsolationConflict:
    """A stage asked to run alone would share its process."""

    code: ClassVar[str] = "isolation-conflict"
    isolated: Blame
    others: tuple[str, ...]
    fused_group: tuple[str, ...]  # when fusion binds the others to it
    requests: tuple[Blame, ...]
    nearest: tuple[Request, ...] | None

    @property
    def stages(self) -> tuple[str, ...]:
        return (self.isolated.stage, *self.others)


@dataclass(frozen=True)
class FusedSplit:
    """A request moves part of a fused group away from its partners."""

    group: tuple[str, ...]
    moved: tuple[str, ...]
    partners: tuple[str, ...]
    isolating: bool  # a member was asked to run alone
    requests: tuple[Blame, ...]
    nearest: tuple[Request, ...] | None

    @property
    def code(self) -> str:  # type: ignore[override]
        return "isolation-conflict" if self.isolating else "process-name-conflict"

    @property
    def stages(self) -> tuple[str, ...]:
        return tuple(sorted(self.group))


@dataclass(frozen=True)
class NodeShortfall:
    """How many replicas a kind of node holds, and which of its resources runs out first."""

    nodes: tuple[str, ...]
    gpus: int
    cpus: int | None
    most: int
    by_gpu: int | None  # None: a replica needs no GPU
    by_cpu: int | None


@dataclass(frozen=True)
class InsufficientCapacity:
    """More replicas were asked for than the cluster holds."""

    code: ClassVar[str] = "insufficient-capacity"
    model: str
    requested: int | None  # None: `--replicas max`
    most: int  # the largest number that fits
    proved: bool  # False: a time limit cut a proof short
    gpu_need: tuple[tuple[int, float], ...]  # one replica: (logical GPU, share of a GPU)
    cpu_need: int
    cluster: str
    shortfall: tuple[NodeShortfall, ...]
    sharing: tuple[tuple[str, float], ...] | None  # fractions that let two replicas share a GPU
    sharing_most: int | None  # how many fit with them
    card: CardTarget | None

    @property
    def stages(self) -> tuple[str, ...]:
        return ()


Conflict = (UnsupportedHandoff | DeclaredSplit | ConflictingRecommendation | OverLimit | OverCpus
            | PinOutsideNode | OverPinned | SpansGpus
            | RankNameTaken | SharedRankNames | MissingFraction | IsolationConflict | FusedSplit
            | InsufficientCapacity)
