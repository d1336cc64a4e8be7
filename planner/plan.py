"""The planner's output: frozen values that the renderers and the launcher consume.

Nothing here decides anything; `planner.solver` builds these and everything downstream reads them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from planner.pipeline import DEFAULT_SAMPLE_RATE, Carried, PlacementPolicy

Status = Literal["ok", "infeasible", "error"]
FractionSource = Literal["declared", "recommended"]

# Exit codes of `planner solve` (and of `planner serve` before anything starts).
EXIT_OK = 0
EXIT_INFEASIBLE = 1
EXIT_INVALID = 2


@dataclass(frozen=True)
class Handoff:
    """One handoff edge of the pipeline, as planned."""

    source: str
    target: str
    kinds: tuple[str, ...]  # subset of ("next", "stream", "wait_for")
    crosses: bool  # the two ends run in different OS processes

    @property
    def streaming(self) -> bool:
        return "stream" in self.kinds


@dataclass(frozen=True)
class PlannedStage:
    """A stage with its resolved placement."""

    name: str
    process: str  # group name; for a TP stage the base of its rank names
    gpus: tuple[int, ...]  # () = CPU; one id per TP rank otherwise
    tp_size: int
    fraction: float | None  # per GPU (per rank for TP stages)
    fraction_source: FractionSource | None
    factory: str | None
    args: tuple[tuple[str, Any], ...] = ()  # keyword arguments for the factory, from the config
    threads: int = 1  # CPU intra-op threads of the stage, in each copy of its process
    gpu_compute_fraction: float | None = None  # share of its GPU's compute; None: all of it
    host_memory_mib: float | None = None  # what it adds to its process's memory (card; measured)

    @property
    def gpu(self) -> int | list[int] | None:
        """JSON shape: null for CPU, an int for one GPU, a list for tensor parallelism."""
        if not self.gpus:
            return None
        if self.tp_size > 1:
            return list(self.gpus)
        return self.gpus[0]

    @property
    def is_tp(self) -> bool:
        return self.tp_size > 1

    def factory_kwargs(self) -> dict[str, Any]:
        return dict(self.args)


@dataclass(frozen=True)
class ProcessGroup:
    """One OS process holding one or more non-TP stages, in pipeline order."""

    name: str
    stages: tuple[str, ...]
    gpu: int | None
    changed: bool = False  # differs from the declared topology (members or name)
    copies: int = 1  # OS processes running these stages side by side; a request uses one
    # The CPUs the group's threads may run on (`--process-cpus`), each copy on its share of them
    # (`copy_cpus`); () leaves it to the OS. Pinned, a process's interpreter-lock hand-overs
    # cannot wake a thread onto a CPU where another process's thread runs (benchmarks/
    # EVIDENCE.md, "Where the cores idle").
    cpus: tuple[int, ...] = ()
    # The GPU of each copy, in copy order, where its copies do not all run on `gpu`
    # (`processes: {NAME: {gpus: [...]}}`, sglang-omni's `replica_devices`); () otherwise.
    devices: tuple[int, ...] = ()

    def copy_names(self) -> tuple[str, ...]:
        """`vocoder` for one copy; `vocoder.0`, `vocoder.1`, ... for several."""
        if self.copies == 1:
            return (self.name,)
        return tuple(f"{self.name}.{i}" for i in range(self.copies))

    def copy_cpus(self) -> tuple[tuple[int, ...], ...]:
        """The CPUs each copy runs on, in copy order: the group's CPUs cut in order into as
        many shares as copies, as even as they go (`0-3` for two copies: `0-1`, `2-3`), so two
        copies never take turns on one core. A plan has at least one CPU per copy (a stage's
        threads times the copies fit the pin: `compute._over_pinned`); with fewer, each copy
        gets them all. () for each copy of a group not pinned."""
        n, cpus = self.copies, tuple(sorted(self.cpus))
        if n == 1 or len(cpus) < n:
            return (cpus,) * n
        return tuple(cpus[i * len(cpus) // n:(i + 1) * len(cpus) // n] for i in range(n))

    def copy_gpus(self) -> tuple[int | None, ...]:
        """The GPU each copy runs its GPU stages on (None: a CPU-only group), in copy order."""
        return self.devices or (self.gpu,) * self.copies


@dataclass(frozen=True)
class TpProcess:
    """One tensor-parallel rank process of a TP stage."""

    stage: str
    rank: int
    name: str
    gpu: int


@dataclass(frozen=True)
class GpuUsage:
    id: int
    total: float
    limit: float
    processes: tuple[str, ...]
    missing_fraction: tuple[str, ...] = ()


# A worker process with no stage (interpreter, launcher, numpy): proportional set size, measured
# by benchmarks/stage_memory.py ("(none)" row; see docs/performance.md, "Memory").
WORKER_BASE_MIB = 18.5


@dataclass(frozen=True)
class CpuUsage:
    """The CPU threads a plan runs, every copy counted, against the node it is planned for."""

    threads: int  # intra-op threads of every stage in every copy, TP ranks included
    cpus: int | None  # the node's CPUs (None: not known)
    asked: bool = False  # some stage has more than one thread or some group more than one copy

    @property
    def oversubscribed(self) -> bool:
        return self.cpus is not None and self.threads > self.cpus


@dataclass(frozen=True)
class Plan:
    """A feasible placement: what runs where, with which memory fractions."""

    model: str
    variant: str
    stages: tuple[PlannedStage, ...]  # pipeline order
    groups: tuple[ProcessGroup, ...]
    tp_processes: tuple[TpProcess, ...]
    gpus: tuple[GpuUsage, ...]
    handoffs: tuple[Handoff, ...]
    entry_stages: tuple[str, ...] = ()  # stages no handoff leads into
    terminal_stages: tuple[str, ...] = ()  # stages with no outgoing handoff
    sample_rate: int = DEFAULT_SAMPLE_RATE  # Hz of the audio the terminal stage returns (from the card)
    voices: tuple[str, ...] = ()  # the voices a request may name (from the card); () = any
    word_timestamps: bool = False  # its stages yield word timings (the card's `word_timestamps`)
    cpu: CpuUsage | None = None  # threads against the node's CPUs
    model_paths: tuple[str, ...] = ()  # the card's model paths: other names `model` goes by
    placement: PlacementPolicy = field(default_factory=PlacementPolicy)
    mps: str | None = None  # `mps: off|on|auto` as the config says (None: not said)
    # Keys of an engine's config the planner does not model, kept to be written back out.
    carried: tuple[Carried, ...] = ()

    def stage(self, name: str) -> PlannedStage:
        for s in self.stages:
            if s.name == name:
                return s
        raise KeyError(name)

    def group_of(self, stage: str) -> ProcessGroup | None:
        for g in self.groups:
            if stage in g.stages:
                return g
        return None

    def process_memory_mib(self, stages: tuple[str, ...]) -> float | None:
        """Host memory of one process running `stages`: a worker's own plus each stage's
        declared figure (an upper bound: stages in one process share libraries); None when
        some stage declares none."""
        declared = [self.stage(s).host_memory_mib for s in stages]
        if any(m is None for m in declared):
            return None
        return WORKER_BASE_MIB + sum(declared)

    def memory_mib(self) -> float | None:
        """Host memory of every worker process, every copy and TP rank counted (see
        `process_memory_mib`); None when some stage declares none."""
        per = [(self.process_memory_mib(g.stages), g.copies) for g in self.groups]
        per += [(self.process_memory_mib((p.stage,)), 1) for p in self.tp_processes]
        if any(m is None for m, _ in per):
            return None
        return sum(m * n for m, n in per)

    def process_count(self) -> int:
        """OS processes the plan starts: every copy of every group, and the TP ranks."""
        return sum(g.copies for g in self.groups) + len(self.tp_processes)

    def gpu_stages(self, gpu: int) -> tuple[str, ...]:
        """The stages with a copy (or a TP rank) on `gpu`, in pipeline order."""
        on = {m for g in self.groups if gpu in g.copy_gpus() for m in g.stages
              if self.stage(m).gpus}
        on |= {t.stage for t in self.tp_processes if t.gpu == gpu}
        return tuple(s.name for s in self.stages if s.name in on)

    def copies_of(self, stage: str) -> int:
        group = self.group_of(stage)
        return 1 if group is None else group.copies

    def cpu_demand(self) -> int:
        """CPUs one replica of the plan takes on a node: each copy of a group as many as its
        widest stage has threads (a process copy's stages hand a request on to each other), each
        TP rank as many as its stage has threads."""
        widest = {g.name: max(self.stage(s).threads for s in g.stages) for g in self.groups}
        return (sum(g.copies * widest[g.name] for g in self.groups)
                + sum(self.stage(t.stage).threads for t in self.tp_processes))

    def overlapping_stages(self) -> frozenset[str]:
        """Stages that run beside another stage of the same request in their process, and so
        wait for its interpreter lock even with one request in flight: the two ends of a
        streaming edge inside one process, and, where a stage fans out to parallel branches,
        every stage that shares its process."""
        out = {n for h in self.handoffs if h.streaming and not h.crosses
               for n in (h.source, h.target)}
        fan_out = Counter(h.source for h in self.handoffs)
        if any(n > 1 for n in fan_out.values()):
            per_process = Counter(s.process for s in self.stages)
            out |= {s.name for s in self.stages if per_process[s.process] > 1}
        return frozenset(out)


@dataclass(frozen=True)
class Isolate:
    """Run `stage` (a stage or role name) in a process of its own: `--isolate-stage STAGE`."""

    stage: str


@dataclass(frozen=True)
class Assign:
    """Place `stage` (a stage or role name) in `process`: `--stage-process STAGE=PROCESS`.

    `text` keeps what was typed after `--stage-process` when the request came from a flag, so
    that messages quote it exactly (also when it is malformed: no '=', an empty part)."""

    stage: str
    process: str
    text: str | None = field(default=None, compare=False)
    # The whole flag as typed when it came in sglang-omni's dotted spelling
    # (`--vocoder.process vocoder`), so that messages quote what the user wrote.
    spelling: str | None = field(default=None, compare=False)

    @classmethod
    def parse(cls, text: str) -> Assign:
        """`STAGE=PROCESS`, split at the first '=' and stripped; a malformed text is kept as typed
        and reported by the planner as `invalid-assignment`."""
        stage, _, process = text.partition("=")
        return cls(stage.strip(), process.strip(), text=text)

    @property
    def has_separator(self) -> bool:
        return self.text is None or "=" in self.text


# How a stage's threads are said in its process's environment (OpenMP and MKL read these): the
# engines' configs carry them, and the planner reads them back as threads.
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


@dataclass(frozen=True)
class Threads:
    """Give `stage` (a stage or role name) `count` CPU intra-op threads:
    `--stage-threads STAGE=N`. `text` keeps what was typed, as for `Assign`."""

    stage: str
    count: int | None  # None: the text after '=' is not a whole number
    text: str | None = field(default=None, compare=False)
    spelling: str | None = field(default=None, compare=False)  # as for `Assign`

    @classmethod
    def parse(cls, text: str) -> Threads:
        stage, _, count = text.partition("=")
        return cls(stage.strip(), _whole(count), text=text)


@dataclass(frozen=True)
class Copies:
    """Run `count` copies of process group `process` (or of the group holding stage
    `process`): `--process-copies PROCESS=N`."""

    process: str
    count: int | None
    text: str | None = field(default=None, compare=False)

    @classmethod
    def parse(cls, text: str) -> Copies:
        process, _, count = text.partition("=")
        return cls(process.strip(), _whole(count), text=text)


@dataclass(frozen=True)
class Pin:
    """Run every copy of process group `process` (or of the group holding stage `process`) on
    these CPUs only: `--process-cpus PROCESS=0-1`. `cpus` is None where the text after '=' is
    not a CPU list (`0`, `0-3`, `0,2`)."""

    process: str
    cpus: tuple[int, ...] | None
    text: str | None = field(default=None, compare=False)

    @classmethod
    def parse(cls, text: str) -> Pin:
        process, _, cpus = text.partition("=")
        return cls(process.strip(), cpu_list(cpus), text=text)


def cpu_list(text: str) -> tuple[int, ...] | None:
    """`0-2,5` -> (0, 1, 2, 5), the notation of taskset and cpusets; None if it is not one."""
    out: set[int] = set()
    for part in text.strip().split(","):
        low, dash, high = part.strip().partition("-")
        first, last = _whole(low), _whole(high) if dash else _whole(low)
        if first is None or last is None or first < 0 or last < first or last - first > 4096:
            return None
        out.update(range(first, last + 1))
    return tuple(sorted(out))


def cpu_text(cpus: tuple[int, ...]) -> str:
    """(0, 1, 2, 5) -> `0-2,5`."""
    runs: list[list[int]] = []
    for c in sorted(cpus):
        if runs and c == runs[-1][1] + 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs)


def _whole(text: str) -> int | None:
    text = text.strip()
    if not text or len(text) > 9 or not (text.isascii() and text.lstrip("-").isdigit()):
        return None
    return int(text)


Request = Isolate | Assign
ComputeRequest = Threads | Copies | Pin


@dataclass(frozen=True)
class Fix:
    """What a diagnostic's hint tells the user to change, in a form tools (and tests) apply.

    `drop`: requests of the command to remove, as they were given (one occurrence each); `add`:
    requests to add; `config`: a YAML overlay (as data) to merge into the config, stage entries by
    name (a new overlay on the card where no config was given). `otherwise`: the fix the hint
    offers after "or". Either one, applied, removes the diagnostic it came with.
    """

    drop: tuple[Request | ComputeRequest, ...] = ()
    add: tuple[Request | ComputeRequest, ...] = ()
    config: dict[str, Any] | None = None
    otherwise: Fix | None = None

    def applied(self, given: Sequence[Request | ComputeRequest]
                ) -> tuple[Request | ComputeRequest, ...]:
        """The command's requests with this fix's edits made (its `config` is the caller's)."""
        left = list(self.drop)
        kept = []
        for r in given:
            if r in left:
                left.remove(r)
            else:
                kept.append(r)
        return tuple(kept) + self.add

    @property
    def choices(self) -> tuple[Fix, ...]:
        """This fix and every one offered after it, in the hint's order."""
        return (self,) + (self.otherwise.choices if self.otherwise is not None else ())


@dataclass(frozen=True)
class Diagnostic:
    code: str
    message: str
    stages: tuple[str, ...] = ()
    edge: tuple[str, str] | None = None
    gpu: int | None = None
    because: tuple[str, ...] = ()
    hint: str = ""
    fix: Fix | None = None
    rule: str = ""  # the rule it breaks, as its module in `planner.rules` states it
    conflict: Any = None  # the typed conflict (`planner.conflicts`) the prose was rendered from

    @property
    def subject(self) -> tuple:
        """What the diagnostic is about; used to sort within one code and to match across runs."""
        return (self.edge or (), self.gpu if self.gpu is not None else -1, self.stages)


@dataclass(frozen=True)
class PlanWarning:
    code: str
    message: str
    stage: str | None = None
    edge: tuple[str, str] | None = None


@dataclass(frozen=True)
class Result:
    """What `planner.solve` returns for every request, good or bad."""

    model: str | None
    variant: str | None
    status: Status
    changed: bool = False  # flags moved a stage from the declared topology
    plan: Plan | None = None
    warnings: tuple[PlanWarning, ...] = ()
    # Who declared the topology the plan starts from: "card" or "config" (`Pipeline.declared_by`)
    declared_by: str | None = None
    diagnostics: tuple[Diagnostic, ...] = field(default_factory=tuple)
    # With --replicas: the cluster and where each replica goes (`planner.replicas.Packing`).
    cluster: Any = None
    packing: Any = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def exit_code(self) -> int:
        return {"ok": EXIT_OK, "infeasible": EXIT_INFEASIBLE, "error": EXIT_INVALID}[self.status]
