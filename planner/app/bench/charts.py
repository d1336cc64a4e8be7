"""PNG charts of a finished bench (matplotlib, Agg: no display needed).

One chart per metric the table shows, plus a latency CDF and an overview (throughput, latency and
time to first audio against the load) for READMEs. With several loads a chart draws each
placement as a line against the load (the offered rate for open loop, so the knee shows); with
one load, as bars. Placements keep one colour everywhere; long or many names are indexed (P1,
P2, ...) with the full, wrapped names in a legend beside the plot, never over the data. Numbers
are written plainly (2,180, 0.125), never in scientific notation.
"""

from __future__ import annotations

import math
import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from planner.app.bench.load_shapes import Closed
from planner.app.bench.results import Bench, Run, total_rss

OVERVIEW_PNG = "overview.png"
CDF_PNG = "latency_cdf.png"
LEGEND_WRAP = 34  # characters per legend line
SHORT_NAME = 18  # placement names up to this long (and at most 4 of them) are shown as they are
NO_DATA = "no successful requests"
# The table's `bound req/s`: what the stage times allow if each process runs one stage at a time
# (a bar above it is a row the bound was wrong for).
BOUND_LABEL = "bound from stage times"
_STYLES = ("-", "--", ":", "-.")
_ALPHAS = (1.0, 0.6, 0.3)


def plain(value: float) -> str:
    """A number as a reader writes it: 2,180 / 312 / 41.5 / 6.35 / 0.0123; never 2.18e+03."""
    if value == 0 or not math.isfinite(value):
        return "0" if value == 0 else str(value)
    a = abs(value)
    if a >= 1000:
        return f"{value:,.0f}"
    if a >= 100:
        return f"{value:.0f}"
    digits = 1 if a >= 10 else 2 if a >= 1 else 2 - math.floor(math.log10(a))
    text = f"{value:.{digits}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


@dataclass(frozen=True)
class Series:
    label: str  # what distinguishes it within its chart ("p99"); "" when it is the only one
    value: Callable[[Run], float | None]
    shown: Callable[[Bench], bool] = lambda bench: True


@dataclass(frozen=True)
class Chart:
    file: str
    title: str
    ylabel: str
    series: tuple[Series, ...]
    shown: Callable[[Bench], bool] = lambda bench: True
    ideal: bool = False  # throughput: each placement's bound from its stage times
    offered: bool = False  # open loop: the offered rate, y = x
    reference: tuple[float, str] | None = None  # a horizontal line and its label
    needs_ok: bool = True  # drawn from successful requests ("no successful requests" if none)


def _summary(attr: str, q: str, scale: float = 1000.0) -> Callable[[Run], float | None]:
    def get(run: Run) -> float | None:
        s = getattr(run.load, attr)
        return None if s is None else getattr(s, q) * scale
    return get


def _pcts(attr: str, qs: tuple[str, ...], scale: float = 1000.0) -> tuple[Series, ...]:
    return tuple(Series(q, _summary(attr, q, scale)) for q in qs)


def _stream(bench: Bench) -> bool:
    return bench.stream


def _open(bench: Bench) -> bool:
    return bench.open_loop


CHARTS = (
    Chart("throughput.png", "throughput", "requests / s",
          (Series("achieved", lambda r: r.load.throughput_rps),
           Series("goodput (met the SLO)", lambda r: r.goodput_rps,
                  shown=lambda b: bool(b.slo))),
          ideal=True, offered=True, needs_ok=False),
    Chart("audio_rate.png", "seconds of audio per second", "audio s / s",
          (Series("", lambda r: r.load.audio_per_s),), needs_ok=False),
    Chart("latency.png", "end-to-end latency", "latency (ms)",
          _pcts("latency", ("p50", "p90", "p99"))),
    Chart("ttfa.png", "time to first audio", "time to first audio (ms)",
          _pcts("ttfa", ("p50", "p90", "p99")), shown=_stream),
    Chart("rtf.png", "real-time factor (generation time / audio duration)", "RTF",
          _pcts("rtf", ("p50", "p90"), 1.0), reference=(1.0, "real time (RTF 1)")),
    Chart("stalls.png", "streams whose playback stalled", "stalled requests (%)",
          (Series("", lambda r: None if r.load.stalled_share is None
                  else 100 * r.load.stalled_share),), shown=_stream),
    Chart("errors.png", "failed, late and unsent requests", "requests",
          (Series("failed", lambda r: r.load.errors),
           Series("late (sent ≥1 ms after due)", lambda r: r.load.late, shown=_open),
           Series("not sent", lambda r: r.load.not_sent, shown=_open)), needs_ok=False),
    Chart("schedule_lag.png", "load generator's lag behind its schedule", "lag (ms)",
          _pcts("lag", ("p50", "p99")), shown=_open, needs_ok=False),
    Chart("memory.png", "peak resident memory, all processes", "MiB",
          (Series("", lambda r: None if total_rss(r) is None else total_rss(r) / 2**20),),
          needs_ok=False),
    Chart("startup.png", "startup (spawn to ready)", "seconds",
          (Series("", lambda r: r.startup_s),), needs_ok=False),
)


def _ratio_chart(bench: Bench) -> Chart:
    def vs(attr: str) -> Callable[[Run], float | None]:
        def get(run: Run) -> float | None:
            v = bench.versus(run)
            return None if v is None else getattr(v, attr)
        return get

    return Chart("vs_declared.png", "ratio to the declared topology at the same load",
                 "× declared", (Series("× req/s", vs("throughput")), Series("× p99", vs("p99"))),
                 reference=(1.0, "declared"))


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def wrap_name(text: str, width: int = LEGEND_WRAP) -> str:
    """A placement name over lines of at most `width`, broken after a `+` or before a ` | `
    (where its process blocks join), continuation lines indented."""
    indent = "    "
    lines, current = [], ""
    for part in re.split(r"(?<=\+)|(?= \| )", text):
        if current.strip() and len(current) + len(part) > width:
            lines.append(current.rstrip())
            current = indent + part.lstrip()
        else:
            current += part
    lines.append(current)
    out = []
    for line in lines:  # a single part longer than the width is cut where it must be
        out += textwrap.wrap(line, width, subsequent_indent=indent, break_on_hyphens=False,
                             drop_whitespace=False) if len(line) > width else [line]
    return "\n".join(out)


def _names(bench: Bench) -> tuple[list[str], list[str]]:
    """(short labels for axes, legend labels) per placement, in bench order."""
    names = [p.name for p in bench.placements]
    if len(names) <= 4 and all(len(n) <= SHORT_NAME for n in names):
        return names, names
    return ([f"P{i + 1}" for i in range(len(names))],
            [wrap_name(f"P{i + 1}: {n}") for i, n in enumerate(names)])


def _colors(n: int) -> list:
    plt = _pyplot()
    cmap = plt.get_cmap("tab10" if n <= 10 else "tab20")
    return [cmap(i % cmap.N) for i in range(n)]


def _plain_axis(axis) -> None:
    from matplotlib.ticker import FuncFormatter

    axis.set_major_formatter(FuncFormatter(lambda v, _pos: plain(v)))


def _load_axis(bench: Bench, ax) -> None:
    shapes = bench.shapes
    ax.set_xticks([s.x for s in shapes], [plain(s.x) for s in shapes])
    if bench.open_loop:
        ax.set_xlabel("offered load (requests / s)")
    else:
        ax.set_xlabel("concurrent clients (C)")


def _draw(ax, bench: Bench, chart: Chart) -> tuple[list, list]:
    """Draw `chart` on `ax`; returns (placement legend handles, other legend handles)."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    series = [s for s in chart.series if s.shown(bench)]
    short, long_ = _names(bench)
    colors = _colors(len(bench.placements))
    shapes = bench.shapes
    lines = len(shapes) > 1
    drawn = 0
    top = 0.0
    others: list = []
    for i, placement in enumerate(bench.placements):
        runs = [bench.run_of(placement, s) for s in shapes]
        for j, ser in enumerate(series):
            points = [(s.x, ser.value(r)) for s, r in zip(shapes, runs) if r is not None]
            points = [(x, y) for x, y in points if y is not None]
            if not points:
                continue
            drawn += 1
            top = max(top, *(y for _, y in points))
            if lines:
                ax.plot(*zip(*points), _STYLES[j % len(_STYLES)], marker="o", markersize=4,
                        color=colors[i], linewidth=1.6)
            else:
                width = 0.8 / len(series)
                x = i + (j - (len(series) - 1) / 2) * width
                y = points[0][1]
                ideal = runs[0].ideal_rps if chart.ideal and runs[0] is not None else None
                ax.bar(x, y, width * 0.92, color=colors[i], alpha=_ALPHAS[j % len(_ALPHAS)])
                # Above the bar and above the ideal mark, so neither hides the number.
                ax.annotate(plain(y), (x, max(y, ideal or 0.0)), xytext=(0, 4),
                            textcoords="offset points", ha="center", va="bottom", fontsize=7)
        if chart.ideal:
            ideal = [(s.x, r.ideal_rps) for s, r in zip(shapes, runs)
                     if r is not None and r.ideal_rps]
            if ideal:
                top = max(top, *(y for _, y in ideal))
                if lines:
                    ax.plot(*zip(*ideal), linestyle="none", marker="D", markersize=6,
                            markerfacecolor="none", markeredgewidth=1.5, color=colors[i])
                else:
                    ax.scatter([i], [ideal[0][1]], marker="_", s=700, color="black",
                               linewidths=2.5, zorder=3)
    if drawn == 0:
        ax.text(0.5, 0.5, NO_DATA if chart.needs_ok else "nothing to show",
                transform=ax.transAxes, ha="center", va="center", color="grey")
        ax.set_xticks([])
        ax.set_yticks([])
        return [], []
    if lines:
        _load_axis(bench, ax)
        ax.margins(x=0.08)
        if chart.offered and bench.open_loop:
            xs = [s.x for s in shapes]
            ax.plot([min(xs), max(xs)], [min(xs), max(xs)], color="grey", linewidth=1,
                    linestyle=(0, (1, 2)))
            top = max(top, max(xs))
            others.append(Line2D([], [], color="grey", linewidth=1, linestyle=(0, (1, 2)),
                                 label="offered (y = x)"))
        for j, ser in enumerate(series):
            if len(series) > 1:
                others.append(Line2D([], [], color="black", linestyle=_STYLES[j % len(_STYLES)],
                                     label=ser.label))
        if chart.ideal and any(r.ideal_rps for r in bench.runs):
            others.append(Line2D([], [], color="black", linestyle="none", marker="D",
                                 markersize=6, markerfacecolor="none", markeredgewidth=1.5,
                                 label=BOUND_LABEL))
    else:
        ax.set_xticks(range(len(short)), short)
        ax.set_xlabel(shapes[0].label if isinstance(shapes[0], Closed) else
                      f"offered load {shapes[0].label}")
        for j, ser in enumerate(series):
            if len(series) > 1:
                others.append(Patch(color="grey", alpha=_ALPHAS[j % len(_ALPHAS)],
                                    label=ser.label))
        if chart.ideal and any(r.ideal_rps for r in bench.runs):
            others.append(Line2D([], [], color="black", linestyle="none", marker="_",
                                 markersize=14, markeredgewidth=2.5, label=BOUND_LABEL))
        top *= 1.12  # room for the numbers above the bars
    if chart.reference is not None:
        y, label = chart.reference
        ax.axhline(y, color="grey", linewidth=1, linestyle="--")
        others.append(Line2D([], [], color="grey", linewidth=1, linestyle="--", label=label))
        top = max(top, y)
    if top > 0:
        ax.set_ylim(0, top * 1.05)
    ax.set_ylabel(chart.ylabel)
    _plain_axis(ax.yaxis)
    ax.grid(axis="y", alpha=0.3)
    marker = "o" if lines else "s"
    placements = [Line2D([], [], color=c, marker=marker, linestyle="-" if lines else "none",
                         label=label) for c, label in zip(colors, long_)]
    return placements, others


def _title(bench: Bench, text: str, width: int = 70) -> str:
    return textwrap.fill(f"{bench.title}: {text}", width)


def _legend(target, handles: list, **where) -> None:
    if handles:
        target.legend(handles=handles, fontsize=8, frameon=False, **where)


def _save(fig, path: Path) -> None:
    plt = _pyplot()
    # bbox_inches="tight" grows the canvas to hold a legend outside the axes and a long title.
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


def figure(bench: Bench, chart: Chart):
    """One chart as a matplotlib figure, its legend beside the axes."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.0, 4.0))
    placements, others = _draw(ax, bench, chart)
    _legend(ax, placements + others, loc="upper left", bbox_to_anchor=(1.02, 1.0),
            borderaxespad=0.0)
    ax.set_title(_title(bench, chart.title), fontsize=10)
    return fig


def _overview(bench: Bench, path: Path) -> None:
    """Throughput, latency and (streaming) time to first audio against the load, side by side."""
    plt = _pyplot()
    panels = [replace(c, series=tuple(s for s in c.series if s.label not in ("p90",)))
              for c in CHARTS if c.file in ("throughput.png", "latency.png", "ttfa.png")
              and c.shown(bench)]  # p50 and p99 only: p90 is in each metric's own chart
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 4.0), squeeze=False)
    placements: list = []
    for ax, chart in zip(axes[0], panels):
        p, others = _draw(ax, bench, chart)
        placements = placements or p
        ax.set_title(textwrap.fill(chart.title, 40), fontsize=10)
        _legend(ax, others, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)
    _legend(fig, placements, loc="upper left", bbox_to_anchor=(1.0, 0.92))
    fig.suptitle(_title(bench, f"{bench.settings.get('load_mode', '')} load, "
                                "each placement measured at each load", 110), fontsize=11)
    fig.tight_layout()
    _save(fig, path)


def _cdf(bench: Bench, path: Path) -> None:
    plt = _pyplot()
    shapes = bench.shapes
    cols = min(len(shapes), 4) or 1
    rows = math.ceil(len(shapes) / cols) or 1
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.6 * rows), squeeze=False)
    colors = _colors(len(bench.placements))
    _, labels = _names(bench)
    from matplotlib.lines import Line2D

    any_data = False
    for n, ax in enumerate(axes.flat):
        if n >= len(shapes):
            ax.set_visible(False)
            continue
        shape = shapes[n]
        drawn = False
        for i, placement in enumerate(bench.placements):
            run = bench.run_of(placement, shape)
            if run is None:
                continue
            for attr, style in (("latency_s", "-"), ("ttfa_s", "--")):
                values = sorted(getattr(s, attr) * 1000 for s in run.load.ok
                                if getattr(s, attr) is not None)
                if values:
                    drawn = any_data = True
                    ys = [(k + 1) / len(values) for k in range(len(values))]
                    ax.step(values, ys, style, where="post", color=colors[i])
        ax.set_title(shape.label, fontsize=10)
        if not drawn:
            ax.text(0.5, 0.5, NO_DATA, transform=ax.transAxes, ha="center", va="center",
                    color="grey")
            ax.set_xticks([])
            ax.set_yticks([])
            continue
        ax.set_xlabel("latency (ms)")
        ax.set_ylabel("fraction of requests")
        _plain_axis(ax.xaxis)
        ax.grid(alpha=0.3)
    if any_data:
        handles = [Line2D([], [], color=c, label=lab) for c, lab in zip(colors, labels)]
        handles.append(Line2D([], [], color="black", label="end to end"))
        if bench.stream:
            handles.append(Line2D([], [], color="black", linestyle="--",
                                  label="first audio"))
        _legend(fig, handles, loc="upper left", bbox_to_anchor=(1.0, 0.92))
    fig.suptitle(_title(bench, "latency CDF per load"), fontsize=10)
    fig.tight_layout()
    _save(fig, path)


def charts_for(bench: Bench) -> list[Chart]:
    out = [c for c in CHARTS if c.shown(bench)]
    if any(r.placement.is_baseline for r in bench.runs) and len(bench.placements) > 1:
        out.append(_ratio_chart(bench))
    return out


def write_charts(bench: Bench, out: Path) -> list[str]:
    """Write every chart into `out`; returns their file names, the overview first."""
    _overview(bench, out / OVERVIEW_PNG)
    names = [OVERVIEW_PNG]
    for chart in charts_for(bench):
        _save(figure(bench, chart), out / chart.file)
        names.append(chart.file)
    _cdf(bench, out / CDF_PNG)
    names.append(CDF_PNG)
    return names
