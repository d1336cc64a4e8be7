"""sglang-omni's config dialect, read onto the planner's one YAML schema.

sglang-omni (its "config reference" and "process topology migration" pages) writes `stages:` as
a mapping keyed by stage name, with `process`, `gpu`, `tp_size`, `gpu_memory_fraction`, `env`
and the free-form groups `engine.*` and `factory.*`; `processes.<name>.num_replicas` and
`replica_devices`; `mps`, `placement`, and `config_cls` / `model_path` to name the model. Each
planned field is translated to its key in the planner's schema, so that every rule is still
checked in one place (`planner.config.pipeline_checks`); what the planner does not model is
kept as `Carried` values, listed as "carried, not planned" and written back out by the engine
writers. The same reader takes the dotted command-line flags (`--vocoder.gpu_memory_fraction
0.1`), given as a `stages:` mapping.

Problems found here are reported together with the schema's own, with sglang-omni's key paths
(`their_issue`), as one ConfigError.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from planner.config.values import describe, key_path
from planner.errors import ConfigIssue
from planner.pipeline import Carried
from planner.plan import THREAD_VARS

DIALECT = "sglang-omni"
PLANNED_STAGE_KEYS = ("process", "gpu", "tp_size", "gpu_memory_fraction", "env")
CARRIED_STAGE_KEYS = ("engine", "factory", "comm", "factory_path", "project_payload")
# A stage's handoffs are its model's (the config class declares them); a file cannot move them.
ROUTING_KEYS = ("next", "terminal", "route_fn", "wait_for", "wait_for_fn", "merge_fn",
                "stream_to", "stream_done_to_fn")
# A process's fields there -> the process group's here.
PROCESS_FIELDS = {"num_replicas": "copies", "replica_devices": "gpus"}
# Top-level keys with the same meaning in both dialects.
SHARED_TOP = ("mps", "placement", "fused_stages")


def speaks(raw: dict[str, Any]) -> bool:
    """Whether a config is in sglang-omni's dialect: stages keyed by name, or its selectors."""
    return isinstance(raw.get("stages"), dict) or "config_cls" in raw or "model_path" in raw


@dataclass(frozen=True)
class Reading:
    """One sglang-omni config (or set of dotted flags), read."""

    overlay: dict[str, Any]  # in the planner's schema: stages as a list of entries
    carried: tuple[Carried, ...]
    config_cls: str | None = None
    model_path: str | None = None
    default_threads: int | None = None  # from `env_defaults`, for stages that give none


class _Reader:
    def __init__(self, source: str) -> None:
        self.source = source
        self.issues: list[ConfigIssue] = []
        self.carried: list[Carried] = []

    def issue(self, key: str, problem: str, allowed: str = "") -> None:
        self.issues.append(ConfigIssue(self.source, key, problem, allowed))

    def carry(self, path: tuple[str, ...], value: Any) -> None:
        self.carried.append(Carried(path, value))

    def threads(self, env: Any, key: str) -> tuple[int | None, dict[str, Any]]:
        """The thread count an `env` mapping gives (None: none) and its other variables."""
        if not isinstance(env, dict):
            self.issue(key, f"got {describe(env)}",
                       "a mapping of environment variables, e.g. env: {OMP_NUM_THREADS: '2'}")
            return None, {}
        counts: dict[str, int] = {}
        rest: dict[str, Any] = {}
        for var, value in env.items():
            if var not in THREAD_VARS:
                rest[str(var)] = value
                continue
            n = _whole(value)
            if n is None:
                self.issue(key_path(key, var), f"got {describe(value)}",
                           f"a whole number of threads, e.g. {var}: '2'")
            else:
                counts[var] = n
        if len(set(counts.values())) > 1:
            said = ", ".join(f"{v}={n}" for v, n in counts.items())
            self.issue(key, f"gives two thread counts ({said})",
                       "the planner sizes a stage's threads once: give them one value")
            return None, rest
        return next(iter(counts.values()), None), rest

    def stage(self, name: Any, fields: Any) -> dict[str, Any] | None:
        """One `stages.<name>` mapping as a planner stage entry."""
        key = key_path("stages", name)  # a name that is not plain is quoted: one line
        # an example names the stage only where its name can be pasted as it is
        example = name if key == f"stages.{name}" else "vocoder"
        if not isinstance(name, str):
            self.issue(key, f"stage name {describe(name)} is not text",
                       "stages are keyed by their names, e.g. stages: {vocoder: {process: "
                       "vocoder}}")
            return None
        if fields is None:
            fields = {}
        if not isinstance(fields, dict):
            self.issue(key, f"got {describe(fields)}",
                       f"a mapping of the stage's fields, e.g. stages: {{{example}: {{process: "
                       f"{example}}}}}")
            return None
        entry: dict[str, Any] = {"name": name}
        for field, value in fields.items():
            where = key_path(key, field)
            if field == "name":
                if value != name:
                    self.issue(where, f"renames stage {name!r} to {describe(value)}",
                               "a config file addresses a stage by its name and never renames "
                               "it; drop `name`")
            elif field in ("process", "gpu", "tp_size"):
                entry[field] = value
            elif field == "gpu_memory_fraction":
                entry["runtime"] = {"resources": {"total_gpu_memory_fraction": value}}
            elif field == "env":
                threads, rest = self.threads(value, where)
                if threads is not None:
                    entry["threads"] = threads
                for var, v in rest.items():
                    self.carry(("stages", name, "env", var), v)
            elif field in ("engine", "factory"):
                if not isinstance(value, dict):
                    self.issue(where, f"got {describe(value)}",
                               f"a mapping passed to the stage's {field}, e.g. {field}: "
                               "{dtype: bfloat16}")
                    continue
                for sub, v in value.items():
                    self.carry(("stages", name, field, str(sub)), v)
            elif field in CARRIED_STAGE_KEYS:
                self.carry(("stages", name, field), value)
            elif field in ROUTING_KEYS:
                self.issue(where, "a stage's handoffs come from its model's config class",
                           "a config file places stages and cannot change what they hand "
                           f"off to; drop `{field}`")
            else:
                known = ", ".join(PLANNED_STAGE_KEYS + CARRIED_STAGE_KEYS)
                self.issue(where, "unknown key", f"a stage takes: {known}")
        return entry

    def processes(self, value: Any) -> Any:
        """`processes.<p>.num_replicas` / `replica_devices` as the planner's copies and gpus;
        any other key of a process is carried."""
        if not isinstance(value, dict):
            return value  # the schema says what is wrong with it
        out: dict[Any, Any] = {}
        for name, entry in value.items():
            if not isinstance(entry, dict):
                out[name] = entry
                continue
            mine: dict[str, Any] = {}
            for field, v in entry.items():
                if field in PROCESS_FIELDS:
                    mine[PROCESS_FIELDS[field]] = v
                else:
                    self.carry(("processes", str(name), str(field)), v)
            out[name] = mine
        return out

    def shared(self, value: Any) -> None:
        """`shared:` writes one value into several stages; the planner reads placement per
        stage, so a shared entry may carry only unplanned groups (engine, factory)."""
        self.carry(("shared",), value)
        for i, entry in enumerate(value if isinstance(value, list) else ()):
            planned = [k for k in (entry if isinstance(entry, dict) else ())
                       if k in PLANNED_STAGE_KEYS]
            if planned:
                self.issue(f"shared[{i}].{planned[0]}", "sets a placement field for several "
                           "stages at once", "the planner checks placement per stage: write it "
                           f"under stages.<name>.{planned[0]} for each stage")


def read(raw: dict[str, Any], source: str) -> tuple[Reading, list[ConfigIssue]]:
    """Translate one sglang-omni config (or the dotted flags as a `stages:` mapping); the
    problems found are returned, not raised, to be reported with the schema's own."""
    r = _Reader(source)
    overlay: dict[str, Any] = {}
    stages = raw.get("stages")
    if isinstance(stages, dict):
        entries = [r.stage(name, fields) for name, fields in stages.items()]
        overlay["stages"] = [e for e in entries if e is not None]
    elif stages is not None:
        r.issue("stages", f"got {describe(stages)}",
                "sglang-omni's stages are a mapping keyed by stage name, e.g. stages: "
                "{vocoder: {process: vocoder}}")
    default_threads = None
    for key, value in raw.items():
        if key == "stages":
            continue
        if key in ("model", "variant"):  # the planner's own selectors, read as in its dialect
            overlay[key] = value
        elif key in ("config_cls", "model_path"):
            if not isinstance(value, str) or not value.strip():
                r.issue(key, f"got {describe(value)}",
                        "a config class name (e.g. Qwen3TTSPipelineConfig) or a model path"
                        if key == "config_cls" else "a model path, e.g. fishaudio/s2-pro")
        elif key == "processes":
            overlay["processes"] = r.processes(value)
        elif key in SHARED_TOP:
            overlay[key] = value
        elif key == "shared":
            r.shared(value)
        elif key == "env_defaults":
            r.carry((key,), value)
            default_threads, _ = r.threads(value, key) if value is not None else (None, {})
        else:
            r.carry((str(key),), value)
    reading = Reading(overlay, tuple(r.carried), _text(raw.get("config_cls")),
                      _text(raw.get("model_path")), default_threads)
    return reading, r.issues


def with_default_threads(overlay: dict[str, Any], stages: tuple[str, ...],
                         threads: int) -> dict[str, Any]:
    """`env_defaults` thread counts for every stage whose own `env` gives none."""
    entries = {e["name"]: e for e in overlay.get("stages", [])}
    out = [dict(entries.get(s, {"name": s})) for s in stages]
    for e in out:
        e.setdefault("threads", threads)
    out += [e for n, e in entries.items() if n not in stages]  # unknown: the overlay says so
    return {**overlay, "stages": out}


def _text(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _whole(value: Any) -> int | None:
    """A thread count as an environment variable holds it: `2` or `'2'`."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        return int(value.strip())
    return None


# -- the schema's issues, said with sglang-omni's key paths -------------------------------------
_FIELD = {"runtime.resources.total_gpu_memory_fraction": "gpu_memory_fraction",
          "threads": "env.OMP_NUM_THREADS"}
_PROCESS = {ours: theirs for theirs, ours in PROCESS_FIELDS.items()}
_EXAMPLES = (("threads: ", "OMP_NUM_THREADS: "), ("copies: ", "num_replicas: "),
             ("gpus: ", "replica_devices: "))


def their_key(key: str, names: list[str], flags: bool = False) -> str:
    """A key path of the planner's schema as sglang-omni writes it (`stages[name=vocoder].gpu`
    -> `stages.vocoder.gpu`), or as its dotted flag (`--vocoder.gpu`) with `flags`."""
    m = re.fullmatch(r"stages\[(?:name=([^\]]+)|(\d+))\](?:\.(.+))?", key)
    if m:
        name = m.group(1) if m.group(1) is not None else (
            names[int(m.group(2))] if int(m.group(2)) < len(names) else m.group(2))
        field = m.group(3) if m.group(3) != "name" or m.group(2) is None else None
        field = _FIELD.get(field, field) if field else None
        if flags:
            return f"--{name}" + (f".{field}" if field else "")
        return f"stages.{name}" + (f".{field}" if field else "")
    if flags and key.startswith("stages."):  # found by the reader in sglang-omni's own form
        return "--" + key[len("stages."):]
    m = re.fullmatch(rf"processes\.([^.]+)\.({'|'.join(_PROCESS)})", key)
    if m:
        return f"processes.{m.group(1)}.{_PROCESS[m.group(2)]}"
    return key


def their_issue(issue: ConfigIssue, names: list[str], flags: bool = False) -> ConfigIssue:
    key = their_key(issue.key, names, flags)
    if key == issue.key:
        return issue
    allowed = issue.allowed
    for ours, theirs in _EXAMPLES:
        allowed = allowed.replace(ours, theirs)
    return ConfigIssue(issue.source, key, issue.problem, allowed)
