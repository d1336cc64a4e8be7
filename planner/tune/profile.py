"""What `planner tune` knows about a pipeline on this machine: per-stage costs measured once, saved
as `profile.json` (reusable, diffable) and read back. Pure data: measuring is the launcher's job
(`planner.app.profiling`); predicting is `planner.tune.model`'s."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

FORMAT = 1
# Native work between two re-takes of the interpreter lock, where the profile did not measure it
# (older profiles): a torch op or a hashed block takes well under a switch interval, so assume
# native work re-takes the lock often. It is the cautious side: it predicts less overlap between a
# process's native work and its other threads' pure-Python work, never more than there is.
DEFAULT_NATIVE_CALL_MS = 1.0


@dataclass(frozen=True)
class StageProfile:
    """Mean costs of one stage per request (all its chunks together), measured alone.

    `gil_ms`: CPU time that holds the interpreter lock (it slows down by as much when another
    thread of the same process is busy); `native_ms`: the rest of its CPU time (native code that
    releases the lock); `device_ms`: wall time spent neither (a device, a sleep, I/O).
    `native_call_ms`: native work per call, between two moments the thread needs the lock back to
    run the Python that makes the next call (None: not measured, DEFAULT_NATIVE_CALL_MS).
    `first_chunk_share`: of a stage handing on several chunks per request, the fraction of its
    per-request busy time spent before its first chunk came out (None: not measured, taken to
    be its chunks' even share, 1 / chunks). A stage that computes the whole request in one call
    and then hands its chunks on in a burst is near 1; one that streams as it computes, near
    1 / chunks.
    `native_ms_by_threads`: the native part's wall time per request with the stage built for N
    intra-op threads, keyed by N as a string ("1", "2", ...), measured alone (None, or a count
    not in it: a thread more gains nothing). Only its ratios are used (`native_speedup`), so
    the one-thread `native_ms` stays what the model charges for one thread.
    """

    name: str
    gil_ms: float
    native_ms: float
    device_ms: float
    chunks_out: float = 1.0  # items it hands on per request (a streaming stage: its chunks)
    out_bytes: float = 0.0  # payload bytes it hands on per request
    rss_mib: float = 0.0  # resident memory its construction added
    cuda_mib: float | None = None
    native_call_ms: float | None = None
    first_chunk_share: float | None = None
    # not hashed (a dict); compared
    native_ms_by_threads: dict[str, float] | None = field(default=None, hash=False)

    def native_speedup(self, threads: int) -> float:
        """The native part's wall time with `threads` intra-op threads over its time with one:
        the measured count nearest below `threads` (a thread count not measured gains no more
        than the one below it), never below 1 / threads (no stage does better than
        share its work out evenly)."""
        by = self.native_ms_by_threads
        if threads <= 1 or not by:
            return 1.0
        one = by.get("1") or self.native_ms
        counts = [int(k) for k in by if int(k) <= threads]
        if not counts or one <= 0:
            return 1.0
        best = max(counts)
        return max(by[str(best)] / one, 1.0 / threads) if best > 1 else 1.0

    @property
    def measured_threads(self) -> tuple[int, ...]:
        """The thread counts above one that the profile measured this stage at."""
        return tuple(sorted(int(k) for k in self.native_ms_by_threads or {} if int(k) > 1))

    @property
    def busy_ms(self) -> float:
        return self.gil_ms + self.native_ms + self.device_ms

    @property
    def call_ms(self) -> float:
        return self.native_call_ms or DEFAULT_NATIVE_CALL_MS


@dataclass(frozen=True)
class HandoffCost:
    """A cross-process handoff: `fixed_ms` of interpreter-held work on each side (control message,
    wake-up), the bytes copied at `copy_gbps`, and `latency_ms` in flight."""

    fixed_ms: float = 0.05
    copy_gbps: float = 5.0
    latency_ms: float = 0.05

    def copy_ms(self, nbytes: float) -> float:
        return nbytes / (self.copy_gbps * 1e6)

    def send_ms(self, nbytes: float) -> float:
        """The sender's whole cost of one crossing of `nbytes`."""
        return self.fixed_ms + self.copy_ms(nbytes)


@dataclass(frozen=True)
class Profile:
    model: str
    variant: str
    cores: int
    cpu_model: str
    stages: tuple[StageProfile, ...]
    handoff: HandoffCost = field(default_factory=HandoffCost)
    device: str = "cpu"  # where the stages ran: "cuda" makes a GPU stage's device time GPU time
    # Per request in the serving process: the HTTP request, the response, encoding the audio.
    frontend_ms: float = 0.0
    # Per request in the load client, when it runs on the same machine (it takes a core too).
    client_ms: float = 0.0
    process_rss_mib: float = 0.0  # what one more worker process costs before any stage
    requests: int = 0  # how many requests the means are over
    # Each profiled request's total cost over the mean (texts differ): the model draws from these.
    request_scale: tuple[float, ...] = (1.0,)
    # CPython's switch interval (`sys.getswitchinterval()`) where the stages ran: how long a thread
    # waiting for the interpreter lock lets a pure-Python holder keep it before forcing a drop.
    switch_interval_ms: float = 5.0
    # Of the stages' time while profiled, the share they spent waiting for a CPU core (other work
    # on the machine). It is left out of every cost, but above BUSY_SHARE the split of CPU time
    # into lock-holding and native work is less certain: see `planner.app.profiling.lock_sampling.LockProbe`.
    core_wait_share: float = 0.0
    note: str = ""
    # The request kind profiled: True, streamed responses (each request's payload says
    # `"stream": true`, as `planner bench --stream` and a streaming client ask); False, whole
    # responses, as a profile saved before this field was. A stage may do different work for
    # each (piper-joe's acoustic stage cuts a streamed response into chunks, a whole one not).
    stream: bool = False

    def at_cpu_speed(self, speed: float) -> Profile:
        """The same pipeline on CPUs that run `speed` (0-1] of the time they are wanted, as a
        shared host's are when its hypervisor gives the rest to other guests: every CPU cost
        over `speed` (a stage's Python and native work and its calls, a crossing's work and
        copy, the serving process's and the client's work); device time and wake-up latency as
        measured. The profile's costs are CPU clocks, which a stolen CPU does not advance."""
        if not 0 < speed <= 1:
            raise ValueError(f"a CPU speed is a share of full speed, above 0 up to 1: {speed!r}")
        if speed == 1:
            return self
        k = 1.0 / speed
        stages = tuple(replace(
            s, gil_ms=s.gil_ms * k, native_ms=s.native_ms * k,
            native_call_ms=None if s.native_call_ms is None else s.native_call_ms * k,
            native_ms_by_threads=None if s.native_ms_by_threads is None else {
                n: ms * k for n, ms in s.native_ms_by_threads.items()}) for s in self.stages)
        h = self.handoff
        return replace(self, stages=stages,
                       handoff=replace(h, fixed_ms=h.fixed_ms * k, copy_gbps=h.copy_gbps * speed),
                       frontend_ms=self.frontend_ms * k, client_ms=self.client_ms * k)

    def stage(self, name: str) -> StageProfile:
        for s in self.stages:
            if s.name == name:
                return s
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, **asdict(self)}

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Profile:
        if not isinstance(data, dict):
            raise TypeError(f"it holds {_kind(data)}, not a profile (a JSON object)")
        if data.get("format") != FORMAT:
            raise ValueError(f"profile format {data.get('format')!r}; this planner reads {FORMAT}")
        _check(data)
        fields = {k: v for k, v in data.items() if k != "format"}
        fields["stages"] = tuple(StageProfile(**s) for s in fields["stages"])
        fields["handoff"] = HandoffCost(**fields.get("handoff", {}))
        fields["request_scale"] = tuple(fields.get("request_scale") or (1.0,))
        return cls(**fields)

    @classmethod
    def load(cls, path: str | Path) -> Profile:
        try:
            return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError, KeyError) as exc:
            raise ValueError(f"{path}: not a profile this planner can read ({exc}); make one with "
                             "`planner tune MODEL --output DIR` (it writes DIR/profile.json)") from None


BUSY_SHARE = 0.1


# Every number a profile holds is a cost, a size or a count measured on one machine: finite, not
# negative, and far below these bounds (a 1e308 would overflow the model's sums to infinity).
MAX_VALUE = 1e9
_POSITIVE = {"copy_gbps", "switch_interval_ms"}  # divided by
_TEXT = {"model", "variant", "cpu_model", "device", "note", "name"}


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            type(None): "null"}.get(type(value), "a number")


def _number(where: str, value: Any, positive: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{where} is {_kind(value)}, not a number")
    if not (0 < value if positive else 0 <= value) or not value <= MAX_VALUE:  # also NaN
        low = "above 0" if positive else "from 0"
        raise ValueError(f"{where} is {value!r}; it must be a finite number {low} up to "
                         f"{MAX_VALUE:g}")


def _fields(where: str, data: Any, optional: frozenset[str] = frozenset()) -> None:
    if not isinstance(data, dict):
        raise TypeError(f"{where} is {_kind(data)}, not an object")
    for key, value in data.items():
        at = f"{where}.{key}" if where else str(key)
        if key in _TEXT:
            if not isinstance(value, str):
                raise ValueError(f"{at} is {_kind(value)}, not a string")
        elif value is None and key in optional:
            continue
        elif key == "stream":
            if not isinstance(value, bool):
                raise ValueError(f"{at} is {_kind(value)}, not true or false")
        elif key == "native_ms_by_threads":
            _by_threads(at, value)
        elif key not in ("stages", "handoff", "request_scale", "format"):
            _number(at, value, key in _POSITIVE)


def _by_threads(where: str, value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, dict):
        raise TypeError(f"{where} is {_kind(value)}, not an object of thread counts")
    for key, ms in value.items():
        if not (isinstance(key, str) and key.isdigit() and 1 <= int(key) <= 4096):
            raise ValueError(f"{where} has the key {key!r}; its keys are thread counts "
                             "(\"1\", \"2\", ...)")
        _number(f"{where}.{key}", ms)


def _check(data: dict[str, Any]) -> None:
    """Every value of a profile read from a file has the type and range the model can use; the
    first that does not is named (a TypeError or ValueError: `load` says either in one line)."""
    _fields("", data)
    stages = data.get("stages")
    if not isinstance(stages, list) or not stages:
        raise ValueError(f"stages is {_kind(stages)}; a profile lists its stages")
    for i, stage in enumerate(stages):
        _fields(f"stages[{i}]", stage,
                frozenset({"cuda_mib", "native_call_ms", "first_chunk_share"}))
        share = stage.get("first_chunk_share")
        if share is not None and not share <= 1:
            raise ValueError(f"stages[{i}].first_chunk_share is {share!r}; it is a fraction of "
                             "the stage's time, from 0 to 1")
    if "handoff" in data:
        _fields("handoff", data["handoff"])
    scale = data.get("request_scale")
    if scale is not None:
        if not isinstance(scale, list):
            raise ValueError(f"request_scale is {_kind(scale)}, not a list of numbers")
        for i, value in enumerate(scale):
            _number(f"request_scale[{i}]", value, positive=True)
    cores = data.get("cores")
    if not isinstance(cores, int) or isinstance(cores, bool) or not 1 <= cores <= 65536:
        raise ValueError(f"cores is {cores!r}; it must be a whole number from 1 to 65536")
