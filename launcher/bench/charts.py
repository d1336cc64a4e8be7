"""PNG charts of a finished bench (matplotlib, Agg: no display needed)."""

from __future__ import annotations

from pathlib import Path

from .results import Bench

THROUGHPUT_PNG = "throughput.png"
P99_PNG = "p99_latency.png"
CDF_PNG = "latency_cdf.png"


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _bars(bench: Bench, path: Path, title: str, ylabel: str, value, ideal=None) -> None:
    """Grouped bars: one group per concurrency, one bar per placement."""
    plt = _pyplot()
    names = [p.name for p in bench.placements]
    cs = bench.concurrencies
    width = 0.8 / max(len(names), 1)
    fig, ax = plt.subplots(figsize=(1.6 + 1.4 * len(cs) * max(len(names), 1) * 0.6, 4.2))
    for i, name in enumerate(names):
        xs, ys, marks = [], [], []
        for j, c in enumerate(cs):
            run = next((r for r in bench.runs_at(c) if r.placement.name == name), None)
            if run is None:
                continue
            xs.append(j + (i - (len(names) - 1) / 2) * width)
            ys.append(value(run) or 0.0)
            marks.append(ideal(run) if ideal else None)
        ax.bar(xs, ys, width * 0.95, label=name)
        for x, y in zip(xs, ys):
            ax.annotate(f"{y:.3g}", (x, y), ha="center", va="bottom",
                        fontsize=7)
        if ideal:
            ok = [(x, m) for x, m in zip(xs, marks) if m]
            # Black and on top: a bound below the achieved bar must stay visible.
            ax.scatter([x for x, _ in ok], [m for _, m in ok], marker="_", s=500, color="black",
                       linewidths=2.5, zorder=3, label="ideal bound" if i == 0 else None)
    ax.set_xticks(range(len(cs)), [f"C={c}" for c in cs])
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _cdf(bench: Bench, path: Path) -> None:
    plt = _pyplot()
    cs = bench.concurrencies
    fig, axes = plt.subplots(1, len(cs), figsize=(4.2 * len(cs), 3.6), squeeze=False)
    for ax, c in zip(axes[0], cs):
        for run in bench.runs_at(c):
            for attr, style in (("latency_s", "-"), ("ttfc_s", "--")):
                values = sorted(getattr(s, attr) * 1000 for s in run.load.ok
                                if getattr(s, attr) is not None)
                if not values:
                    continue
                ys = [(i + 1) / len(values) for i in range(len(values))]
                label = run.placement.name + (" (first chunk)" if attr == "ttfc_s" else "")
                ax.step(values, ys, style, where="post", label=label)
        ax.set_title(f"C={c}", fontsize=10)
        ax.set_xlabel("latency (ms)")
        ax.set_ylabel("fraction of requests")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"{bench.settings['model']}: end-to-end latency CDF", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_charts(bench: Bench, out: Path) -> list[str]:
    """Write every chart into `out`; returns their file names."""
    model = bench.settings["model"]
    _bars(bench, out / THROUGHPUT_PNG, f"{model}: throughput per placement (bars) and ideal bound",
          "requests / s", lambda r: r.load.throughput_rps, ideal=lambda r: r.ideal_rps)
    _bars(bench, out / P99_PNG, f"{model}: p99 end-to-end latency", "p99 latency (ms)",
          lambda r: r.p99_s * 1000 if r.p99_s is not None else None)
    _cdf(bench, out / CDF_PNG)
    return [THROUGHPUT_PNG, P99_PNG, CDF_PNG]
