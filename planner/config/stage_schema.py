"""One raw stage entry checked on its own and turned into a StageConfig.

Each field has its own reader; a bad field is reported and read as its default, so that the other
fields are still checked and every problem of a stage is reported at once.
"""

from __future__ import annotations

from typing import Any

from planner.config.keys import STAGE_KEYS
from planner.config.values import (
    as_name_list,
    check_keys,
    check_name,
    describe,
    read_fraction,
)
from planner.errors import ConfigIssue
from planner.limits import MAX_GPU_ID, MAX_THREADS, MAX_TP_SIZE, shown
from planner.pipeline import StageConfig

_GPU_ALLOWED = "a GPU id (int), a list of ids for tensor parallelism, or null"


class _Fields:
    """Where one stage's problems go: its key path (`stages[name=...]`) and the issue list."""

    def __init__(self, source: str, key: str, issues: list[ConfigIssue]) -> None:
        self.source = source
        self.key = key
        self.issues = issues

    def issue(self, field: str, problem: str, allowed: str = "") -> None:
        key = f"{self.key}.{field}" if field else self.key
        self.issues.append(ConfigIssue(self.source, key, problem, allowed))


def read_stage(raw: Any, i: int, source: str, issues: list[ConfigIssue]) -> StageConfig | None:
    """The stage at `stages[i]`, or None when it has no usable name (reported in `issues`)."""
    key = f"stages[{i}]"
    if not isinstance(raw, dict):
        issues.append(ConfigIssue(source, key, f"got {describe(raw)}",
                                  "each stage is a mapping with a name"))
        return None
    if "name" not in raw:
        issues.append(ConfigIssue(source, f"{key}.name", "missing", "every stage needs a name"))
        return None
    name = raw["name"]
    if not check_name(name, source, f"{key}.name", issues, "stage"):
        return None
    fields = _Fields(source, f"stages[name={name}]", issues)
    check_keys(raw, STAGE_KEYS, source, fields.key, issues)
    # The readers run in this order so that the issues are listed in the order of the fields.
    tp = _tp_size(fields, raw.get("tp_size", 1))
    gpus = _gpus(fields, raw.get("gpu"), tp)
    process = _process(fields, raw.get("process"), tp)
    terminal, nxt = _terminal_and_next(fields, raw.get("terminal", False), raw.get("next"))
    factory = _factory(fields, raw.get("factory"))
    args = _args(fields, raw.get("args"))
    stage_fraction, compute_fraction, host_memory = _runtime_resources(fields, raw.get("runtime"))
    threads = _threads(fields, raw.get("threads"))
    return StageConfig(
        name=name,
        process=process or None,
        gpus=gpus,
        tp_size=tp,
        next=nxt,
        stream_to=as_name_list(raw.get("stream_to"), source, f"{fields.key}.stream_to", issues),
        wait_for=as_name_list(raw.get("wait_for"), source, f"{fields.key}.wait_for", issues),
        terminal=terminal,
        factory=factory,
        args=tuple(sorted(args.items())),
        fraction=stage_fraction,
        threads=threads,
        gpu_compute_fraction=compute_fraction,
        host_memory_mib=host_memory,
    )


def _threads(fields: _Fields, threads: Any) -> int | None:
    """The stage's CPU intra-op threads in each copy of its process (None: not declared)."""
    if threads is None:
        return None
    if isinstance(threads, bool) or not isinstance(threads, int) or not (
            1 <= threads <= MAX_THREADS):
        fields.issue("threads", f"got {shown(threads)}",
                     f"a whole number of CPU threads from 1 to {MAX_THREADS}, e.g. threads: 2")
        return None
    return threads


def _example_ids(n: int) -> str:
    return str(list(range(n))) if n <= 8 else f"[0, 1, ..., {n - 1}]"


def _tp_size(fields: _Fields, tp: Any) -> int:
    if isinstance(tp, bool) or not isinstance(tp, int) or not 1 <= tp <= MAX_TP_SIZE:
        fields.issue("tp_size", f"got {describe(tp)}", f"a whole number from 1 to {MAX_TP_SIZE}")
        return 1
    return tp


def _gpus(fields: _Fields, gpu: Any, tp: int) -> tuple[int, ...]:
    """The stage's GPU ids: none, one, or one per tensor-parallel rank."""
    gpus: tuple[int, ...] = ()
    if gpu is None:
        gpus = ()
    elif isinstance(gpu, bool):
        fields.issue("gpu", f"got {describe(gpu)}", _GPU_ALLOWED)
    elif isinstance(gpu, int):
        if tp > 1:
            fields.issue("gpu", f"tensor-parallel stage (tp_size {tp}) has a single gpu {gpu}",
                         f"list one GPU id per rank, e.g. gpu: {_example_ids(tp)}")
        gpus = (gpu,)
    elif isinstance(gpu, list) and all(isinstance(g, int) and not isinstance(g, bool) for g in gpu):
        gpus = tuple(gpu)
        if len(gpus) != tp:
            fields.issue("gpu", f"lists {len(gpus)} GPU ids but tp_size is {tp}",
                         "give exactly one GPU id per tensor-parallel rank")
        if len(set(gpus)) != len(gpus):
            fields.issue("gpu", f"repeats a GPU id in {list(gpus)}",
                         "each tensor-parallel rank needs its own GPU")
    else:
        fields.issue("gpu", f"got {describe(gpu)}", _GPU_ALLOWED)
    if any(g < 0 for g in gpus):
        fields.issue("gpu", "GPU ids cannot be negative")
    elif any(g > MAX_GPU_ID for g in gpus):
        fields.issue("gpu", f"GPU id {shown(max(gpus))} is above {MAX_GPU_ID}",
                     f"GPU ids count from 0 on each machine, up to {MAX_GPU_ID}")
    if tp > 1 and gpu is None:
        fields.issue("gpu", f"tensor-parallel stage (tp_size {tp}) lists no GPUs",
                     f"list one GPU id per rank, e.g. gpu: {_example_ids(tp)}")
    return gpus


def _process(fields: _Fields, process: Any, tp: int) -> Any:
    """The declared process name; "" when it was reported as invalid, None when not given."""
    if isinstance(process, str):
        process = process.strip()
    if process is not None and not check_name(process, fields.source, f"{fields.key}.process",
                                              fields.issues, "process", process=True):
        process = ""  # reported; not "missing" as well
    if process is None and tp == 1:
        fields.issue("process", "missing",
                     "every stage with tp_size 1 declares its process, e.g. process: pipeline")
    return process


def _terminal_and_next(fields: _Fields, terminal: Any, nxt_raw: Any
                       ) -> tuple[bool, tuple[str, ...]]:
    if not isinstance(terminal, bool):
        fields.issue("terminal", f"got {describe(terminal)}", "true or false")
        terminal = False
    nxt = as_name_list(nxt_raw, fields.source, f"{fields.key}.next", fields.issues)
    if terminal and nxt:
        fields.issue("", "has both next and terminal: true",
                     "a terminal stage hands off to nothing; drop one of them")
    return terminal, nxt


def _factory(fields: _Fields, factory: Any) -> str | None:
    if factory is not None and (not isinstance(factory, str) or ":" not in factory):
        fields.issue("factory", f"got {describe(factory)}", "a 'package.module:callable' string")
        return None
    return factory


def _args(fields: _Fields, args: Any) -> dict[str, Any]:
    """The factory's keyword arguments; a bad mapping is reported and read as none."""
    if args is None:
        return {}
    if not isinstance(args, dict):
        fields.issue("args", f"got {describe(args)}",
                     "a mapping of keyword arguments for the factory")
        return {}
    if any(not isinstance(k, str) for k in args):
        bad_key = next(k for k in args if not isinstance(k, str))
        fields.issue("args", f"has the key {describe(bad_key)}",
                     "keyword argument names are strings (quote such a key)")
        return {}
    return args


def _runtime_resources(fields: _Fields,
                       runtime: Any) -> tuple[float | None, float | None, float | None]:
    """`runtime.resources`: the stage's declared GPU memory share
    (`total_gpu_memory_fraction`), GPU compute share (`gpu_compute_fraction`) and host memory
    (`host_memory_mib`)."""
    if runtime is None:
        return None, None, None
    if not isinstance(runtime, dict):
        fields.issue("runtime", f"got {describe(runtime)}", "a mapping with resources")
        return None, None, None
    check_keys(runtime, ("resources",), fields.source, f"{fields.key}.runtime", fields.issues)
    res = runtime.get("resources")
    if res is None:
        return None, None, None
    if not isinstance(res, dict):
        fields.issue("runtime.resources", f"got {describe(res)}",
                     "a mapping with total_gpu_memory_fraction, gpu_compute_fraction and/or "
                     "host_memory_mib")
        return None, None, None
    keys = ("total_gpu_memory_fraction", "gpu_compute_fraction")
    check_keys(res, (*keys, "host_memory_mib"), fields.source, f"{fields.key}.runtime.resources",
               fields.issues)
    memory, compute = (read_fraction(res.get(k), fields.source,
                                     f"{fields.key}.runtime.resources.{k}", fields.issues)
                       for k in keys)
    return memory, compute, _host_memory(fields, res.get("host_memory_mib"))


def _host_memory(fields: _Fields, mib: Any) -> float | None:
    """The host memory (MiB) the stage adds to a process, as measured (None: not declared)."""
    if mib is None:
        return None
    if isinstance(mib, bool) or not isinstance(mib, (int, float)) or not 0 < mib < 1 << 30:
        fields.issue("runtime.resources.host_memory_mib", f"got {shown(mib)}",
                     "a positive number of MiB the stage adds to its process, as measured, "
                     "e.g. host_memory_mib: 120")
        return None
    return float(mib)
