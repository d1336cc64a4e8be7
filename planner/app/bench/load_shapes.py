"""What a load run asks for: its shape (closed-loop clients or open-loop arrivals on a seeded
schedule), its texts, its size and the request it sends (`speech`), and how a list of shapes is
named in progress lines."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from planner.app.bench.speech import OURS, Speech

CLOSED, OPEN = "closed-loop", "open-loop"
ARRIVALS = ("poisson", "gamma", "constant")


@dataclass(frozen=True)
class Closed:
    """C clients, each sending its next request when its last one ended."""

    concurrency: int
    mode = CLOSED

    @property
    def label(self) -> str:
        return f"C={self.concurrency}"

    @property
    def x(self) -> float:
        """Where this load sits on a chart's horizontal axis."""
        return float(self.concurrency)


@dataclass(frozen=True)
class Open:
    """Requests arriving at `rate` per second on a seeded schedule, whatever the server does.

    `gamma` gaps have shape `burstiness` and mean 1/rate: below 1 burstier than Poisson (which
    is burstiness 1), above 1 more regular; `constant` spaces them exactly 1/rate apart.
    """

    rate: float
    arrivals: str = "poisson"
    burstiness: float = 1.0
    mode = OPEN

    @property
    def label(self) -> str:
        return f"{self.rate:g}/s"

    @property
    def x(self) -> float:
        return self.rate


Shape = Closed | Open


def arrival_times(shape: Open, seed: int, count: int | None = None,
                  duration_s: float | None = None) -> tuple[float, ...]:
    """When each request is due, in seconds from the start: `count` requests, or as many as the
    rate offers in `duration_s` (round(rate x duration), at least one). The first is due at 0;
    the same seed gives the same schedule.

    The gaps are drawn from the arrival distribution, then scaled together so the schedule
    spans exactly (n - 1) / rate: it offers exactly the rate asked for, so a short sweep's
    points sit at the rates they are labelled with. For Poisson arrivals this is a Poisson
    process conditioned on its span (its arrival times are then uniform order statistics);
    for gamma the gaps keep their burstiness (Dirichlet-distributed shares of the span).
    """
    if (count is None) == (duration_s is None):
        raise ValueError("give exactly one of count and duration_s")
    if not (shape.rate > 0 and shape.burstiness > 0):
        raise ValueError("rate and burstiness must be positive")
    if shape.arrivals not in ARRIVALS:
        raise ValueError(f"arrivals must be one of {', '.join(ARRIVALS)}, not {shape.arrivals!r}")
    n = count if count is not None else max(1, round(shape.rate * duration_s))  # type: ignore
    rng = random.Random(f"stage-planner-bench-arrivals:{seed}:{shape.arrivals}:"
                        f"{shape.rate!r}:{shape.burstiness!r}")
    if shape.arrivals == "poisson":
        gaps = [rng.expovariate(1.0) for _ in range(n - 1)]
    elif shape.arrivals == "gamma":
        gaps = [rng.gammavariate(shape.burstiness, 1.0) for _ in range(n - 1)]
    else:
        gaps = [1.0] * (n - 1)
    scale = (n - 1) / shape.rate / sum(gaps) if gaps else 0.0
    out, t = [0.0], 0.0
    for g in gaps:
        t += g * scale
        out.append(t)
    return tuple(out)


@dataclass(frozen=True)
class Load:
    """What one load run asks for: `requests` total, or as many as fit in `duration_s`."""

    shape: Shape
    texts: tuple[str, ...]  # request i sends texts[i % len(texts)]
    requests: int | None
    duration_s: float | None
    stream: bool
    seed: int = 0  # of the open-loop arrival schedule
    speech: Speech = OURS  # how each request asks, and how its answer's audio is read


def describe(shapes: Sequence[Shape]) -> str:
    """`C=1, 4` or `2, 4, 8 req/s, poisson arrivals`, for progress lines and legends."""
    if not shapes:
        return "no load"
    if isinstance(shapes[0], Closed):
        return "C=" + ", ".join(str(s.concurrency) for s in shapes)  # type: ignore[union-attr]
    first = shapes[0]
    kind = first.arrivals + (f" (burstiness {first.burstiness:g})"
                             if first.arrivals == "gamma" else "")
    return ", ".join(f"{s.rate:g}" for s in shapes) + f" req/s, {kind} arrivals"  # type: ignore
