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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from planner.flags import COPIES, PIN, THREADS, flag
from planner.limits import MAX_COPIES, MAX_THREADS
from planner.pipeline import Pipeline
from planner.plan import ComputeRequest, Copies, Diagnostic, Pin, Threads, cpu_text

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
         stages: tuple[str, ...] = ()) -> Diagnostic:
    return Diagnostic(code=CODE, message=f"`{flag(request)}` {message}", stages=stages,
                      because=(because,), hint=hint)


def _count_problem(request: ComputeRequest, what: str, most: int, example: str) -> Diagnostic | None:
    option = THREADS if isinstance(request, Threads) else COPIES
    name = request.stage if isinstance(request, Threads) else request.process
    if not name or request.text is not None and "=" not in request.text:
        return _bad(request, f"is not {'STAGE' if option == THREADS else 'PROCESS'}=N",
                    f"{option} reads left to right: give {what} a whole number",
                    f"write it as `{option} {name or example}=2`")
    if request.count is None or not 1 <= request.count <= most:
        shown = "not a whole number" if request.count is None else f"{request.count}"
        return _bad(request, f"asks for {shown} {what}",
                    f"{what} are a whole number from 1 to {most}",
                    f"write it as `{option} {name}=2`")
    return None


def resolve(pipeline: Pipeline, target: Mapping[str, str],
            given: Sequence[ComputeRequest]) -> tuple[Compute, tuple[Diagnostic, ...]]:
    """Resolve compute requests against `pipeline`, whose non-TP stages are asked to run in
    `target` (stage -> process). Every request error is a diagnostic; valid requests still apply."""
    diags: list[Diagnostic] = []
    threads = {s.name: s.threads or 1 for s in pipeline.stages}
    processes = tuple(dict.fromkeys(target.values()))
    copies = {p: n for p, n in pipeline.process_copies if p in processes and n > 1}
    cpus = {p: c for p, c in pipeline.process_cpus if p in processes}
    devices = {p: d for p, d in pipeline.process_gpus if p in processes}
    thread_flags: dict[str, Threads] = {}
    copy_flags: dict[str, Copies] = {}
    pin_flags: dict[str, Pin] = {}
    example = pipeline.stage_names[-1]
    for r in given:
        if isinstance(r, Threads):
            problem = _count_problem(r, "threads", MAX_THREADS, example)
            if problem is not None:
                diags.append(problem)
                continue
            stage = _stage_of(pipeline, r.stage)
            if stage is None:
                diags.append(Diagnostic(
                    code="unknown-stage",
                    message=f"`{flag(r)}` names {r.stage!r}, which is neither a stage nor a role "
                            f"of {pipeline.name}",
                    stages=(r.stage,),
                    because=(f"the stages of {pipeline.name} are "
                             f"{', '.join(pipeline.stage_names)}",),
                    hint=f"name one of those stages, e.g. `{THREADS} {example}={r.count}`"))
                continue
            if stage in thread_flags:
                diags.append(_set_twice(r, f"the threads of {stage}", thread_flags[stage],
                                        (stage,)))
                continue
            threads[stage] = r.count
            thread_flags[stage] = r
        elif isinstance(r, Pin):
            if not r.process or r.text is not None and "=" not in r.text or not r.cpus:
                diags.append(_bad(r, "is not PROCESS=CPUS",
                                  f"{PIN} reads a process group, '=', and the CPUs its copies may "
                                  "run on: a CPU, a range or a comma list, as taskset reads them",
                                  f"write it as `{PIN} {r.process or processes[-1]}=0-1`"))
                continue
            process = _group_named(r, pipeline, target, processes, diags)
            if process is None:
                continue
            if process in pin_flags:
                diags.append(_set_twice(r, f"the CPUs of process {process}", pin_flags[process]))
                continue
            cpus[process] = r.cpus
            pin_flags[process] = r
        else:
            problem = _count_problem(r, "copies", MAX_COPIES, processes[-1])
            if problem is not None:
                diags.append(problem)
                continue
            process = _group_named(r, pipeline, target, processes, diags)
            if process is None:
                continue
            if process in copy_flags:
                diags.append(_set_twice(r, f"the copies of process {process}",
                                        copy_flags[process]))
                continue
            copies[process] = r.count
            copy_flags[process] = r
    copies = {p: n for p, n in copies.items() if n > 1 or p in copy_flags}
    diags += _over_pinned(target, threads, copies, cpus, pin_flags)
    devices, device_diags = _copy_devices(pipeline, target, devices, copies, copy_flags)
    return (Compute(threads, copies, thread_flags, copy_flags, cpus, pin_flags, devices),
            tuple(diags) + device_diags)


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
                f"ask for at most {len(gpus)}, e.g. `{COPIES} {process}={len(gpus)}`, or list "
                f"{n} GPUs in the config"))
        else:
            out[process] = gpus[:n]
    return out, tuple(diags)


def _set_twice(r: ComputeRequest, what: str, first: ComputeRequest,
               stages: tuple[str, ...] = ()) -> Diagnostic:
    return _bad(r, f"sets {what} a second time", f"`{flag(first)}` already sets them",
                f"keep one of them, e.g. `{flag(r)}`", stages)


def _group_named(r: Copies | Pin, pipeline: Pipeline, target: Mapping[str, str],
                 processes: tuple[str, ...], diags: list[Diagnostic]) -> str | None:
    """The process group a `--process-copies`/`--process-cpus` request names (a stage names the
    group that holds it), or None with the diagnostic added."""
    if r.process in processes:
        return r.process
    stage = _stage_of(pipeline, r.process)
    if stage is not None and stage in target:
        return target[stage]
    option, verb, done = ((COPIES, "copies", "copied") if isinstance(r, Copies)
                          else (PIN, "pins", "pinned"))
    example = (f"{r.count}" if isinstance(r, Copies) else cpu_text(r.cpus or (0,)))
    if stage is not None:
        diags.append(_bad(
            r, f"{verb} tensor-parallel stage {stage}",
            f"{stage} runs one process per rank; its ranks are not {done}",
            f"drop `{flag(r)}`; {'copy' if done == 'copied' else 'pin'} the process groups "
            "around it instead", (stage,)))
    else:
        diags.append(_bad(
            r, f"names {r.process!r}, which is neither a process group nor a stage",
            f"the process groups of this placement are {', '.join(processes)}",
            f"name one of them, e.g. `{option} {processes[-1]}={example}`"))
    return None


def _over_pinned(target: Mapping[str, str], threads: Mapping[str, int],
                 copies: Mapping[str, int], cpus: Mapping[str, tuple[int, ...]],
                 pin_flags: Mapping[str, Pin]) -> list[Diagnostic]:
    """A pinned group's copies share its CPUs, so one stage's threads in every copy must fit
    them (the node-wide form of this is the `over-cpus` rule); more would queue for CPUs the
    plan itself withheld."""
    out = []
    for process, pinned in cpus.items():
        n = copies.get(process, 1)
        over = [(s, threads[s]) for s, p in target.items() if p == process
                and threads[s] * n > len(pinned)]
        if not over:
            continue
        stage, widest = max(over, key=lambda sv: sv[1])
        need = widest * n
        set_by = (f"`{flag(pin_flags[process])}`" if process in pin_flags
                  else "the config's `processes:`")
        shown = f"{process}={cpu_text(pinned)}"
        out.append(Diagnostic(
            code=CODE,
            message=f"process {process} is pinned to {len(pinned)} CPU"
                    f"{'s' if len(pinned) != 1 else ''} ({shown}, set by {set_by}) but its "
                    f"stage {stage} runs {widest} thread{'s' if widest != 1 else ''}"
                    + (f" in each of its {n} copies" if n > 1 else ""),
            stages=(stage,),
            because=(f"a pinned process's threads, every copy's, run on its CPUs alone, and "
                     f"{stage}'s {need} would take turns on {len(pinned)}",),
            hint=f"pin it to {need} CPUs, e.g. `{PIN} {process}=0-{need - 1}`, or give {stage} "
                 f"fewer threads: `{THREADS} {stage}={max(1, len(pinned) // n)}`"))
    return out
