"""sglang-omni's dotted command-line flags, beside the seed's `--isolate-stage` / `--stage-process`.

sglang-omni spells a stage's field as a flag with the `stages.` prefix implied:
`--vocoder.process vocoder`, `--tts_engine.gpu_memory_fraction 0.35`, `--tts_engine.tp_size 2`,
`--vocoder.engine.mem_fraction_static 0.7` (`--stages.vocoder.process` is the same path written in
full). Writing one path twice is refused. Here:

- `--STAGE.process P` is a placement request, exactly `--stage-process STAGE=P` (an `Assign`
  that remembers its spelling), so it is checked, recommended fractions applied and explained
  as that flag would be;
- `--STAGE.env.OMP_NUM_THREADS N` (or `MKL_NUM_THREADS`) is `--stage-threads STAGE=N`;
- every other field is a value over the config (`DottedFlags.overrides`), read by
  `planner.config.sglang_omni` like the same key in an sglang-omni file.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from planner.plan import THREAD_VARS, Assign, ComputeRequest, Request, Threads


class DottedError(ValueError):
    """Dotted flags that cannot be read: one paragraph naming the flag and the fix."""


@dataclass(frozen=True)
class DottedFlag:
    stage: str
    field: tuple[str, ...]  # ("process",), ("engine", "mem_fraction_static"), ...
    value: str
    spelling: str  # as typed, e.g. `--vocoder.process vocoder`

    @property
    def path(self) -> str:
        return ".".join(("stages", self.stage, *self.field))

    @property
    def threads(self) -> bool:
        return len(self.field) == 2 and self.field[0] == "env" and self.field[1] in THREAD_VARS


def is_dotted(word: str) -> bool:
    """`--vocoder.process` or `--vocoder.process=x`: no option of the planner has a '.'."""
    return word.startswith("--") and "." in word[2:].partition("=")[0]


def take(words: Sequence[str]) -> tuple[list[str], tuple[DottedFlag, ...]]:
    """Split command-line words into the other words and the dotted flags (each with its value:
    after '=' or the next word). Raises DottedError for a flag without a value or a stage, or a
    path written twice."""
    rest: list[str] = []
    flags: list[DottedFlag] = []
    seen: dict[str, str] = {}
    it = iter(words)
    for word in it:
        if not is_dotted(word):
            rest.append(word)
            continue
        option, eq, value = word.partition("=")
        parts = option[2:].split(".")
        if parts[0] == "stages":
            parts = parts[1:]
        elif parts[0] == "processes":  # sglang-omni's flags are stage fields only
            raise DottedError(f"{option}: dotted flags set stage fields; a process group's copies "
                              "are `--process-copies PROCESS=N` (sglang-omni: processes.PROCESS."
                              "num_replicas in the --config file).")
        if len(parts) < 2 or not all(parts):
            raise DottedError(f"{option} is not a stage field: write `--STAGE.FIELD VALUE`, e.g. "
                              "`--vocoder.process vocoder` (the `stages.` prefix is implied).")
        if not eq:
            nxt = next(it, None)
            if nxt is None:
                raise DottedError(f"{option} needs a value, e.g. `{option} "
                                  f"{_example(option)}`.")
            value = nxt
        flag = DottedFlag(parts[0], tuple(parts[1:]), value,
                          f"{option}={value}" if eq else f"{option} {value}")
        if flag.path in seen:
            raise DottedError(f"`{flag.spelling}` writes {flag.path} a second time "
                              f"(`{seen[flag.path]}` already writes it); one path takes one "
                              "value: keep one of them.")
        seen[flag.path] = flag.spelling
        flags.append(flag)
    return rest, tuple(flags)


def _example(option: str) -> str:
    field = option.rsplit(".", 1)[-1]
    return {"process": "vocoder", "gpu": "0", "tp_size": "2",
            "gpu_memory_fraction": "0.10"}.get(field, "VALUE")


@dataclass(frozen=True)
class DottedFlags:
    """The dotted flags of one command."""

    flags: tuple[DottedFlag, ...] = ()

    @classmethod
    def parse(cls, words: Sequence[str]) -> DottedFlags:
        rest, flags = take(words)
        if rest:
            raise DottedError(f"{rest[0]!r} is not a dotted flag or its value; write "
                              "`--STAGE.FIELD VALUE`, e.g. `--vocoder.process vocoder`.")
        return cls(flags)

    def requests(self) -> tuple[Request | ComputeRequest, ...]:
        """`--STAGE.process P` as `--stage-process STAGE=P`, and a thread count in `env` as
        `--stage-threads STAGE=N` (both variables given once when they agree)."""
        out: list[Request | ComputeRequest] = []
        threads: dict[str, DottedFlag] = {}
        for f in self.flags:
            if f.field == ("process",):
                out.append(Assign(f.stage, f.value.strip(), spelling=f.spelling))
            elif f.threads:
                first = threads.get(f.stage)
                if first is None:
                    threads[f.stage] = f
                    out.append(Threads(f.stage, _whole(f.value), spelling=f.spelling))
                elif first.value.strip() != f.value.strip():
                    raise DottedError(
                        f"`{f.spelling}` and `{first.spelling}` give stage {f.stage} two thread "
                        "counts; the planner sizes a stage's threads once: give them one value.")
        return tuple(out)

    def overrides(self) -> dict[str, Any] | None:
        """Every other field, as an sglang-omni `stages:` mapping of typed values (None: none)."""
        stages: dict[str, dict[str, Any]] = {}
        for f in self.flags:
            if f.field == ("process",) or f.threads:
                continue
            entry = stages.setdefault(f.stage, {})
            head, *tail = f.field
            if not tail:
                entry[head] = _typed(head, f.value)
                continue
            group = entry.setdefault(head, {})
            if not isinstance(group, dict):
                raise DottedError(f"`{f.spelling}` sets a key under stages.{f.stage}.{head}, "
                                  "which another flag sets as a whole; keep one of them.")
            for key in tail[:-1]:
                group = group.setdefault(key, {})
            group[tail[-1]] = f.value if head == "env" else _typed(head, f.value, free=True)
        return {"stages": stages} if stages else None


def _whole(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 9 else None


def _typed(field: str, text: str, free: bool = False) -> Any:
    """CLI text as the field's type (sglang-omni: by the declared type; free-form group keys by
    YAML scalar parsing). A value that does not parse stays text and the schema says why."""
    t = text.strip()
    if field == "gpu":
        items = t.strip("[]").split(",")
        ids = [_whole(x) for x in items]
        if all(i is not None for i in ids) and t:
            return ids[0] if len(ids) == 1 and not t.startswith("[") else ids
        return text
    if field == "tp_size":
        return _whole(t) if _whole(t) is not None else text
    if field == "gpu_memory_fraction":
        if t.lower() in ("null", "none"):
            return None
        try:
            return float(t)
        except ValueError:
            return text
    if free or field in ("engine", "factory"):
        import yaml  # only when such a flag is given

        try:
            return yaml.safe_load(t)
        except yaml.YAMLError:
            return text
    return text
