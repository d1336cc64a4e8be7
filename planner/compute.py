"""Compute as a placed resource: CPU threads per stage, copies and CPUs per process group.

A stage's threads are the CPU intra-op threads of its one call (onnxruntime's or torch's), in
every copy of its process; a group's copies are separate OS processes running the same stages,
each request using one copy of each group for its life. Each value comes from, first to last: a
flag (`--stage-threads STAGE=N`, `--process-copies PROCESS=N`, `--process-cpus PROCESS=CPUS`),
the config (a stage's `threads`, `processes: {NAME: {copies: N, cpus: CPUS}}`), else 1 (and no
pinning: the OS places the threads).

Request errors (malformed, unknown stage or process, out of range) are diagnostics, as the
placement requests' are; whether the values fit the node's CPUs is a placement rule
(`planner.rules.cpu_limit`), since it depends on where the solver puts each stage.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from planner.flags import COPIES, PIN, THREADS, flag
from planner.limits import MAX_COPIES, MAX_THREADS
from planner.pipeline import Pipeline
from planner.conflicts import OverPinned
from planner.plan import ComputeRequest, Copies, Diagnostic, Fix, Pin, Threads

CODE = "invalid-compute"


@dataclass(frozen=True)
class Compute:
    """Threads and copies as asked, resolved against one pipeline and its requested processes."""

    threads: Mapping[str, int]  # every stage
    copies: Mapping[str, int]  # process name -> copies, where more than one was asked
    thread_flags: Mapping[str, Threads]  # stage -> the flag that set its threads
    copy_flags: Mapping[str, Copies]  # process -> the flag that set its copies
    cpus: Mapping[str, tuple[int, ...]] = field(default_factory=dict)  # process -> pinned CPUs
    pin_flags: Mapping[str, Pin] = field(default_factory=dict)  # process -> the flag that set them
    # process -> the GPU of each copy (the config's `processes: {P: {gpus: [...]}}`)
    devices: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    # Flags that set a value again, by the flag that set it first (each an `invalid-compute`
    # error): a fix that replaces the value drops them too.
    repeats: Mapping[ComputeRequest, tuple[ComputeRequest, ...]] = field(default_factory=dict)

    def setting(self, first: ComputeRequest | None) -> tuple[ComputeRequest, ...]:
        """`first` (the flag that set a value) and every later flag that set it again."""
        return () if first is None else (first,) + tuple(self.repeats.get(first, ()))

    def copies_of(self, process: str) -> int:
        return self.copies.get(process, 1)

    def cpus_of(self, process: str) -> tuple[int, ...]:
        """The CPUs `process` is pinned to; () where the OS places its threads."""
        return self.cpus.get(process, ())

    def devices_of(self, process: str) -> tuple[int, ...]:
        """The GPU of each copy of `process`; () where every copy runs on its stages' GPU."""
        return self.devices.get(process, ())

    @property
    def asked(self) -> bool:
        """More than the default one thread a stage, one copy a group, somewhere."""
        return any(n > 1 for n in self.threads.values()) or any(
            n > 1 for n in self.copies.values())


def _stage_of(pipeline: Pipeline, name: str) -> str | None:
    if name in pipeline.stage_names:
        return name
    return pipeline.role_target(name)


def _bad(request: ComputeRequest, message: str, because: str, hint: str,
         stages: tuple[str, ...] = (), instead: ComputeRequest | None = None) -> Diagnostic:
    """A request error. With `instead`, the hint is `hint` and the request to write in its
    place; without, dropping it (`hint` says why where it ends in "drop it")."""
    if instead is not None:
        hint = f"{hint} `{flag(instead)}`"
    elif not hint.startswith("drop it"):
        hint = "drop it"
    return Diagnostic(code=CODE, message=f"`{flag(request)}` {message}", stages=stages,
                      because=(because,), hint=hint,
                      fix=Fix(drop=(request,), add=(instead,) if instead is not None else ()))


def _count_problem(request: ComputeRequest, what: str, most: int,
                   instead: Callable[[str], ComputeRequest | None]) -> Diagnostic | None:
    option = THREADS if isinstance(request, Threads) else COPIES
    name = request.stage if isinstance(request, Threads) else request.process
    if not name or request.text is not None and "=" not in request.text:
        return _bad(request, f"is not {'STAGE' if option == THREADS else 'PROCESS'}=N",
                    f"{option} reads left to right: give {what} a whole number",
                    "write it as", instead=instead(name))
    if request.count is None or not 1 <= request.count <= most:
        shown = "not a whole number" if request.count is None else f"{request.count}"
        return _bad(request, f"asks for {shown} {what}",
                    f"{what} are a whole number from 1 to {most}",
                    "write it as", instead=instead(name))
    return None


class _Free:
    """Requests a hint may write in place of a wrong one without setting what another flag of
    the command already sets (which would only trade one error for another)."""

    def __init__(self, pipeline: Pipeline, target: Mapping[str, str],
                 given: Sequence[ComputeRequest], node: Sequence[int] | None):
        self.pipeline, self.target, self.node = pipeline, target, node
        self.processes = tuple(dict.fromkeys(target.values()))
        self.taken = {k for r in given if (k := self._key(r)) is not None}

    def _group(self, name: str) -> str | None:
        if name in self.processes:
            return name
        stage = _stage_of(self.pipeline, name)
        return self.target.get(stage) if stage is not None else None

    def _key(self, r: ComputeRequest) -> tuple | None:
        if isinstance(r, Threads):
            ok = r.count is not None and 1 <= r.count <= MAX_THREADS
            return (Threads, _stage_of(self.pipeline, r.stage)) if ok and r.stage else None
        ok = bool(r.cpus) if isinstance(r, Pin) else (
            r.count is not None and 1 <= r.count <= MAX_COPIES)
        group = self._group(r.process) if r.process else None
        return (type(r), group) if ok and group is not None else None

    def threads(self, name: str, count: int = 2) -> Threads | None:
        names = ([name] if _stage_of(self.pipeline, name) else []) + list(
            reversed(self.pipeline.stage_names))
        return next((Threads(n, count) for n in names
                     if (Threads, _stage_of(self.pipeline, n)) not in self.taken), None)

    def copies(self, name: str, count: int = 2) -> Copies | None:
        return self._grouped(Copies, name, count)

    def pin(self, name: str, cpus: tuple[int, ...] | None = None) -> Pin | None:
        return self._grouped(Pin, name, cpus or tuple(self.node or (0,))[:2])

    def _grouped(self, kind, name: str, value):
        names = ([name] if self._group(name) else []) + list(reversed(self.processes))
        return next((kind(n, value) for n in names
                     if (kind, self._group(n)) not in self.taken), None)


def resolve(pipeline: Pipeline, target: Mapping[str, str], given: Sequence[ComputeRequest],
            node: Sequence[int] | None = None) -> tuple[Compute, tuple[Diagnostic, ...]]:
    """Resolve compute requests against `pipeline`, whose non-TP stages are asked to run in
    `target` (stage -> process), for a node with CPUs `node` (None: not known). Every request
    error is a diagnostic; valid requests still apply."""
    diags: list[Diagnostic] = []
    threads = {s.name: s.threads or 1 for s in pipeline.stages}
    processes = tuple(dict.fromkeys(target.values()))
    copies = {p: n for p, n in pipeline.process_copies if p in processes and n > 1}
    cpus = {p: c for p, c in pipeline.process_cpus if p in processes}
    devices = {p: d for p, d in pipeline.process_gpus if p in processes}
    thread_flags: dict[str, Threads] = {}
    copy_flags: dict[str, Copies] = {}
    pin_flags: dict[str, Pin] = {}
    free = _Free(pipeline, target, given, node)
    repeats: dict[ComputeRequest, list[ComputeRequest]] = {}
    for r in given:
        if isinstance(r, Threads):
            problem = _count_problem(r, "threads", MAX_THREADS, free.threads)
            if problem is not None:
                diags.append(problem)
                continue
            stage = _stage_of(pipeline, r.stage)
            if stage is None:
                instead = free.threads("", r.count)
                diags.append(Diagnostic(
                    code="unknown-stage",
                    message=f"`{flag(r)}` names {r.stage!r}, which is neither a stage nor a role "
                            f"of {pipeline.name}",
                    stages=(r.stage,),
                    because=(f"the stages of {pipeline.name} are "
                             f"{', '.join(pipeline.stage_names)}",),
                    hint=f"name one of those stages, e.g. `{flag(instead)}`" if instead
                    else "drop it: every stage's threads are set already",
                    fix=Fix(drop=(r,), add=(instead,) if instead else ())))
                continue
            if stage in thread_flags:
                diags.append(_set_twice(r, f"the threads of {stage}", thread_flags[stage],
                                        (stage,)))
                repeats.setdefault(thread_flags[stage], []).append(r)
                continue
            threads[stage] = r.count
            thread_flags[stage] = r
        elif isinstance(r, Pin):
            if not r.process or r.text is not None and "=" not in r.text or not r.cpus:
                diags.append(_bad(r, "is not PROCESS=CPUS",
                                  f"{PIN} reads a process group, '=', and the CPUs its copies may "
                                  "run on: a CPU, a range or a comma list, as taskset reads them",
                                  "write it as", instead=free.pin(r.process)))
                continue
            process = _group_named(r, pipeline, target, processes, diags, free)
            if process is None:
                continue
            if process in pin_flags:
                diags.append(_set_twice(r, f"the CPUs of process {process}", pin_flags[process]))
                repeats.setdefault(pin_flags[process], []).append(r)
                continue
            cpus[process] = r.cpus
            pin_flags[process] = r
        else:
            problem = _count_problem(r, "copies", MAX_COPIES, free.copies)
            if problem is not None:
                diags.append(problem)
                continue
            process = _group_named(r, pipeline, target, processes, diags, free)
            if process is None:
                continue
            if process in copy_flags:
                diags.append(_set_twice(r, f"the copies of process {process}",
                                        copy_flags[process]))
                repeats.setdefault(copy_flags[process], []).append(r)
                continue
            copies[process] = r.count
            copy_flags[process] = r
    copies = {p: n for p, n in copies.items() if n > 1 or p in copy_flags}
    devices, device_diags = _copy_devices(pipeline, target, devices, copies, copy_flags)
    asked = Compute(threads, copies, thread_flags, copy_flags, cpus, pin_flags, devices,
                    {k: tuple(v) for k, v in repeats.items()})
    return asked, tuple(diags) + _over_pinned(pipeline, target, asked, node) + device_diags


def _copy_devices(pipeline: Pipeline, target: Mapping[str, str],
                  devices: dict[str, tuple[int, ...]], copies: Mapping[str, int],
                  copy_flags: Mapping[str, Copies]
                  ) -> tuple[dict[str, tuple[int, ...]], tuple[Diagnostic, ...]]:
    """The config's GPU of each copy, fitted to the copies asked: `--process-copies P=N` for
    fewer copies than the config lists keeps the first N; more than it lists has no GPU to name.
    A group with no GPU stage has nothing to place on them."""
    out: dict[str, tuple[int, ...]] = {}
    diags: list[Diagnostic] = []
    for process, gpus in devices.items():
        n = copies.get(process, 1)
        members = [s for s, p in target.items() if p == process]
        if not any(pipeline.stage(s).on_gpu for s in members):
            diags.append(Diagnostic(
                code=CODE, message=f"process {process} lists a GPU for each copy "
                f"({', '.join(map(str, gpus))}) but runs no GPU stage", stages=tuple(members),
                because=(f"its stages {', '.join(members)} run on CPU",),
                hint=f"drop `gpus` (sglang-omni: `replica_devices`) from processes.{process}"))
        elif n > len(gpus):
            flag_ = copy_flags[process]
            diags.append(_bad(
                flag_, f"asks for {n} copies but the config lists {len(gpus)} GPU"
                f"{'s' if len(gpus) != 1 else ''} for process {process}",
                f"processes.{process}.gpus names the GPU of each copy: "
                f"{', '.join(map(str, gpus))}",
                "ask for one copy per GPU listed:", instead=Copies(process, len(gpus))))
        else:
            out[process] = gpus[:n]
    return out, tuple(diags)


def _set_twice(r: ComputeRequest, what: str, first: ComputeRequest,
               stages: tuple[str, ...] = ()) -> Diagnostic:
    return _bad(r, f"sets {what} a second time", f"`{flag(first)}` already sets them",
                "drop it: one flag sets them", stages)


def _group_named(r: Copies | Pin, pipeline: Pipeline, target: Mapping[str, str],
                 processes: tuple[str, ...], diags: list[Diagnostic], free: _Free) -> str | None:
    """The process group a `--process-copies`/`--process-cpus` request names (a stage names the
    group that holds it), or None with the diagnostic added."""
    if r.process in processes:
        return r.process
    stage = _stage_of(pipeline, r.process)
    if stage is not None and stage in target:
        return target[stage]
    verb, done = ("copies", "copied") if isinstance(r, Copies) else ("pins", "pinned")
    if stage is not None:
        diags.append(_bad(
            r, f"{verb} tensor-parallel stage {stage}",
            f"{stage} runs one process per rank; its ranks are not {done}",
            f"drop it; {'copy' if done == 'copied' else 'pin'} the process groups around it "
            "instead", (stage,)))
    else:
        instead = free.copies("", r.count) if isinstance(r, Copies) else free.pin("", r.cpus)
        diags.append(_bad(
            r, f"names {r.process!r}, which is neither a process group nor a stage",
            f"the process groups of this placement are {', '.join(processes)}",
            "name one of them, e.g.", instead=instead))
    return None


def _over_pinned(pipeline: Pipeline, target: Mapping[str, str], asked: Compute,
                 node: Sequence[int] | None) -> tuple[Diagnostic, ...]:
    """A pinned group's copies each run on their share of its CPUs (`ProcessGroup.copy_cpus`),
    so one stage's threads in every copy must fit them (the node-wide form of this is the
    `over-cpus` rule); more would queue for CPUs the plan itself withheld. The fix pins the
    group to as many CPUs (where the node has them), or gives the stage as many threads as its
    share of the pinned CPUs."""
    out = []
    for process, pinned in asked.cpus.items():
        n = asked.copies_of(process)
        over = [(s, asked.threads[s]) for s, p in target.items() if p == process
                and asked.threads[s] * n > len(pinned)]
        if not over:
            continue
        stage, widest = max(over, key=lambda sv: sv[1])
        pin_flag, thread_flag = asked.pin_flags.get(process), asked.thread_flags.get(stage)
        conflict = OverPinned(
            process=process, stage=stage, threads=widest, copies=n, pinned=pinned,
            pin_flag=pin_flag, thread_flag=thread_flag, copy_flag=asked.copy_flags.get(process),
            declared_threads=thread_flag is None and pipeline.stage(stage).threads is not None)
        room = len(pinned)
        flags_of = [f for s, _ in over for f in asked.setting(asked.thread_flags.get(s))]
        fewer = [Fix(drop=tuple(flags_of), add=tuple(Threads(s, room // n) for s, _ in over))
                 ] if room // n >= 1 else []
        dropped_copies = asked.setting(asked.copy_flags.get(process))
        if n > 1 and room // widest >= 1:
            fewer.append(Fix(drop=dropped_copies, add=(Copies(process, room // widest),)))
        if not fewer:  # one copy, and each stage as many threads as the pinned CPUs
            fewer.append(Fix(drop=dropped_copies + tuple(flags_of),
                             add=(Copies(process, 1),) + tuple(Threads(s, room) for s, _ in over)))
        wider = _wider_pin(process, pinned, widest * n, node, asked)
        if wider is not None:
            fewer.insert(0, Fix(drop=asked.setting(pin_flag), add=(wider,)))
        fix = None
        for choice in reversed(fewer):
            fix = replace(choice, otherwise=fix)
        # Worded where the library words every typed conflict (`planner.api.worded`).
        out.append(Diagnostic(code=CODE, message="", stages=(stage,), fix=fix,
                              conflict=conflict))
    return tuple(out)


def _wider_pin(process: str, pinned: tuple[int, ...], need: int, node: Sequence[int] | None,
               asked: Compute) -> Pin | None:
    """A pin of `process` to `need` CPUs of the node: its own first, then CPUs no other group is
    pinned to; None where the node has too few (or is not known)."""
    if node is None or len(node) < need:
        return None
    others = {c for p, cs in asked.cpus.items() if p != process for c in cs}
    order = [c for c in pinned if c in node] + [c for c in node if c not in others] + list(node)
    return Pin(process, tuple(sorted(list(dict.fromkeys(order))[:need])))
