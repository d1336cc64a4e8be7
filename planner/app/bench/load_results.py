"""What each request of a load saw (`Sample`), what a streaming player would have heard of it
(`Playback`), the objectives a request meets (`Slo`), and one load run's figures (`LoadResult`)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from planner.app.bench.load_shapes import Shape
from planner.app.bench.stats import Summary, summarise
from planner.app.cpu_steal import share_of

LATE_S = 0.001  # sent this long after it was due: a late request


class Playback:
    """A player fed by a stream: it starts with the first audio and plays in real time; a stall
    is bytes arriving after everything delivered before them has played out."""

    def __init__(self) -> None:
        self.first: float | None = None
        self.stalls = 0
        self.stall_s = 0.0
        self._ends: float | None = None  # when the audio delivered so far has played out

    def feed(self, now: float, seconds: float) -> None:
        if self._ends is None:
            self.first, self._ends = now, now + seconds
        elif now > self._ends:
            self.stalls += 1
            self.stall_s += now - self._ends
            self._ends = now + seconds
        else:
            self._ends += seconds


@dataclass(frozen=True)
class Sample:
    index: int  # which request text
    scheduled_s: float | None  # open loop: when it was due, since the start of the load
    started_s: float  # when it was sent, since the start of the load
    latency_s: float  # send to last byte
    ttfa_s: float | None  # send to first audio byte; streaming only
    audio_s: float
    status: int | None  # None when no HTTP response came back
    error: str | None
    error_kind: str | None = None  # e.g. http-503, timeout, connect, disconnect, not-sent
    stalls: int = 0  # streaming: times a player would have run dry (see Playback)
    stall_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def lag_s(self) -> float | None:
        """How long after it was due the request was sent (open loop)."""
        return None if self.scheduled_s is None else self.started_s - self.scheduled_s

    @property
    def late(self) -> bool:
        return self.lag_s is not None and self.lag_s >= LATE_S

    @property
    def rtf(self) -> float | None:
        """Real-time factor: generation time over the duration of the audio (below 1 is faster
        than real time)."""
        return self.latency_s / self.audio_s if self.ok and self.audio_s > 0 else None


@dataclass(frozen=True)
class Slo:
    """Per-request objectives; a request meets them when it succeeded within every one given."""

    ttfa_s: float | None = None
    latency_s: float | None = None

    def __bool__(self) -> bool:
        return self.ttfa_s is not None or self.latency_s is not None

    def met(self, s: Sample) -> bool:
        if not s.ok:
            return False
        if self.latency_s is not None and s.latency_s > self.latency_s:
            return False
        return self.ttfa_s is None or (s.ttfa_s is not None and s.ttfa_s <= self.ttfa_s)


@dataclass(frozen=True)
class LoadResult:
    shape: Shape
    stream: bool
    wall_s: float  # start of the load to the last response
    samples: tuple[Sample, ...]
    sender_realtime: bool | None = None  # open loop: the sender process had real-time priority
    # The machine's (stolen, running-or-stolen) CPU jiffies over the load (/proc/stat; None
    # where it does not say): on a shared host a run may lose much of its CPUs' time.
    cpu_ticks: tuple[int, int] | None = None

    @property
    def stolen_of_running(self) -> float | None:
        """Of the CPUs' time not idle during the load, the share the hypervisor gave to other
        guests."""
        return share_of(self.cpu_ticks)

    @property
    def mode(self) -> str:
        return self.shape.mode

    @property
    def ok(self) -> tuple[Sample, ...]:
        return tuple(s for s in self.samples if s.ok)

    @property
    def errors(self) -> int:
        return len(self.samples) - len(self.ok)

    def errors_by_kind(self) -> dict[str, int]:
        return dict(Counter(s.error_kind or "other" for s in self.samples if not s.ok)
                    .most_common())

    def error_messages(self, limit: int = 5) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s.error for s in self.samples if s.error))[:limit]

    def _per_s(self, amount: float) -> float:
        return amount / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def throughput_rps(self) -> float:
        return self._per_s(len(self.ok))

    @property
    def audio_per_s(self) -> float:
        """Seconds of audio generated per wall-clock second."""
        return self._per_s(sum(s.audio_s for s in self.ok))

    def goodput_rps(self, slo: Slo) -> float | None:
        """Requests per second that met every objective of `slo`; None without objectives."""
        return self._per_s(sum(slo.met(s) for s in self.samples)) if slo else None

    def slo_attainment(self, slo: Slo) -> float | None:
        """The share of sent requests that met `slo`."""
        if not slo or not self.samples:
            return None
        return sum(slo.met(s) for s in self.samples) / len(self.samples)

    @property
    def offered_rps(self) -> float | None:
        """Open loop: the rate the schedule actually offered (a random schedule drifts from the
        nominal rate over few requests)."""
        due = [s.scheduled_s for s in self.samples if s.scheduled_s is not None]
        span = max(due, default=0.0) - min(due, default=0.0)
        return (len(due) - 1) / span if len(due) > 1 and span > 0 else None

    @property
    def latency(self) -> Summary | None:
        return summarise([s.latency_s for s in self.ok])

    @property
    def ttfa(self) -> Summary | None:
        return summarise([s.ttfa_s for s in self.ok if s.ttfa_s is not None])

    @property
    def rtf(self) -> Summary | None:
        return summarise([s.rtf for s in self.ok if s.rtf is not None])

    @property
    def lag(self) -> Summary | None:
        """Open loop: how far behind its schedule the generator sent requests."""
        return summarise([s.lag_s for s in self.samples
                          if s.lag_s is not None and s.error_kind != "not-sent"])

    @property
    def late(self) -> int:
        return sum(s.late for s in self.samples)

    @property
    def not_sent(self) -> int:
        return sum(s.error_kind == "not-sent" for s in self.samples)

    @property
    def stalled_share(self) -> float | None:
        """Streaming: the share of successful requests whose playback stalled at least once."""
        ok = self.ok
        return sum(s.stalls > 0 for s in ok) / len(ok) if self.stream and ok else None

    @property
    def stall(self) -> Summary | None:
        """Streaming: total stall time per successful request."""
        return summarise([s.stall_s for s in self.ok]) if self.stream else None
