"""peer_hibari.py's arithmetic and tables, from its raw results: each system's figures per load,
ours / the library's requests per second paired round by round (median, geometric mean, 90%
interval), and the issue's bars judged against that interval.

Pure (no processes, no I/O but the text it returns), so that its smoke test runs in milliseconds
on synthetic results. The raw results (`--json`) are a dict: `runs`, one entry per system, load
and round, each `{"system", "label", "round", "requests", "errors", "wall_s", "latencies_s",
"cpu_s", "client_cpu_s"}` (`cpu_s`: the system's processes, the server's whole tree for ours;
`client_cpu_s`: the load generator's, for ours; None where not measured).
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmarks.round_ratios import Summary, summarise
from planner.stats import percentile

# The library as its users run it (peer_hibari_library.py): each kind of row, named with the
# onnxruntime threads its `Hibari(threads=N)` was given, `threads-t1`.
THREADS = "threads"  # one process, C threads sharing one Hibari
PROCESSES = "processes"  # C processes, each with its own Hibari
LOOP = "loop"  # one process calling it in a loop (C=1)
SERVER = "server"  # the HTTP server a user writes: C handler threads sharing one Hibari
PEERS = {
    THREADS: "one process whose C threads share one Hibari, in-process (no HTTP)",
    PROCESSES: "C processes, each with its own Hibari (no HTTP at all)",
    LOOP: "one in-process call loop",
    SERVER: "the HTTP server a user writes: one process whose C request threads share one "
            "Hibari (Starlette on uvicorn, as FastAPI runs a `def` endpoint)",
}


@dataclass(frozen=True)
class Bar:
    label: str  # the load, `C=4`
    kind: str  # of the library's rows
    ratio: float  # ours / peer of requests/s must be at least this


# The issue's bars: at C=4 at least x1.0 of one process whose C threads share one Hibari, "what a
# user who writes a server does" (judged against that server; the same threads with no HTTP are
# shown beside it), and x0.9 of C processes with no HTTP at all; at C=1 x0.8 of one call loop.
BARS = (Bar("C=4", SERVER, 1.0), Bar("C=4", PROCESSES, 0.9), Bar("C=1", LOOP, 0.8))


def peer_name(kind: str, threads: int) -> str:
    return f"{kind}-t{threads}"


def kinds_at(concurrency: int) -> tuple[str, ...]:
    """The library's kinds of row at a load: one call loop at C=1; above it, the server a user
    writes, and threads and processes with no HTTP."""
    return (LOOP,) if concurrency == 1 else (SERVER, THREADS, PROCESSES)


def peers_at(concurrency: int, threads: list[int]) -> tuple[str, ...]:
    return tuple(peer_name(k, t) for k in kinds_at(concurrency) for t in threads)


def label(concurrency: int) -> str:
    return f"C={concurrency}"


def _runs(results: dict, system: str, load: str) -> list[dict]:
    return sorted((r for r in results["runs"] if (r["system"], r["label"]) == (system, load)),
                  key=lambda r: r["round"])


def rps(run: dict) -> float:
    ok = run["requests"] - run["errors"]
    return ok / run["wall_s"] if run["wall_s"] > 0 else 0.0


def rounds_rps(results: dict, system: str, load: str) -> list[float]:
    return [rps(r) for r in _runs(results, system, load)]


def merged(results: dict, system: str, load: str) -> dict | None:
    """One system's figures at one load over every round: requests/s (every request that
    succeeded over all the measured time), latency p50 and p90, CPU per request."""
    runs = _runs(results, system, load)
    if not runs:
        return None
    requests = sum(r["requests"] for r in runs)
    errors = sum(r["errors"] for r in runs)
    wall = sum(r["wall_s"] for r in runs)
    latencies = [x for r in runs for x in r["latencies_s"]]

    def per_request(field: str) -> float | None:
        values = [r[field] for r in runs]
        return None if None in values or not requests else sum(values) / requests

    return {"rps": (requests - errors) / wall if wall > 0 else 0.0,
            "p50": percentile(latencies, 50), "p90": percentile(latencies, 90),
            "cpu": per_request("cpu_s"), "client_cpu": per_request("client_cpu_s"),
            "requests": requests, "errors": errors}


def versus(results: dict, ours: str, peer: str, load: str) -> Summary | None:
    """Ours / peer of requests/s, paired round by round."""
    mine, theirs = rounds_rps(results, ours, load), rounds_rps(results, peer, load)
    if not mine or len(mine) != len(theirs):
        return None
    return summarise(mine, theirs)


def verdict(summary: Summary | None, bar: float) -> str:
    """Met when the 90% interval lies at or above the bar, missed when below it, undecided at
    this noise when it holds the bar (one round: by its ratio alone)."""
    if summary is None:
        return "not measured"
    if summary.interval is None:
        return ("met" if summary.geomean >= bar else "missed") + " (one round: no interval)"
    low, high = summary.interval
    if low >= bar:
        return "met"
    if high < bar:
        return "missed"
    return f"undecided at this noise (the interval holds x{bar:g})"


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.1f}"


def absolute_table(results: dict, load: str, systems: list[str]) -> list[str]:
    lines = [f"{load}: merged over the rounds",
             "| system | req/s | p50 ms | p90 ms | CPU ms/request | client CPU ms/request | "
             "errors |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for system in systems:
        m = merged(results, system, load)
        if m is None:
            continue
        lines.append(f"| {system} | {m['rps']:.2f} | {_ms(m['p50'])} | {_ms(m['p90'])} | "
                     f"{_ms(m['cpu'])} | {_ms(m['client_cpu'])} | {m['errors']} |")
    return lines


def ratio_table(results: dict, load: str, ours: list[str], peers: tuple[str, ...]) -> list[str]:
    """Ours / each peer at one load: requests/s per round (median, geometric mean, 90%
    interval), then each round's ratio, and the latency p50 ratio of the merged runs."""
    lines = [f"{load}: ours / the library, requests/s paired round by round: median (geometric "
             "mean, 90% interval); each round; latency p50",
             "| ours | peer | req/s | rounds | p50 |", "| --- | --- | ---: | --- | ---: |"]
    for name in ours:
        for peer in peers:
            s = versus(results, name, peer, load)
            mine, theirs = merged(results, name, load), merged(results, peer, load)
            if s is None or mine is None or theirs is None:
                continue
            p50 = (f"x{mine['p50'] / theirs['p50']:.3f}"
                   if mine["p50"] and theirs["p50"] else "-")
            each = " ".join("-" if r is None else f"{r:.3f}" for r in s.ratios)
            lines.append(f"| {name} | {peer} | {s.text()} | {each} | {p50} |")
    return lines


def strongest(results: dict, kind: str, load: str) -> str | None:
    """The library's row of `kind` at `load` with the most requests/s over the rounds: of its
    thread counts, the one a user would keep."""
    rows = [(m["rps"], name) for t in results["library"]["threads"]
            if (m := merged(results, name := peer_name(kind, t), load)) is not None]
    return max(rows)[1] if rows else None


def bar_lines(results: dict, ours: list[str]) -> list[str]:
    """The issue's bars, each judged for each of ours against the library's strongest thread
    count at that load (the ratio tables above have the others)."""
    loads = {r["label"] for r in results["runs"]}
    lines = ["bars (requests/s, ours / the library at its strongest thread count, 90% interval "
             "over the rounds):"]
    for bar in BARS:
        peer = strongest(results, bar.kind, bar.label) if bar.label in loads else None
        if peer is None:
            continue
        for name in ours:
            s = versus(results, name, peer, bar.label)
            shown = s.text() if s else "-"
            lines.append(f"  {bar.label} {name} / {peer} >= x{bar.ratio:g}: {shown}: "
                         f"{verdict(s, bar.ratio)}")
    return lines


def report(results: dict) -> list[str]:
    """Every table, load by load, then the bars."""
    ours = list(results["ours"])
    lines: list[str] = []
    threads = results["library"]["threads"]
    for c in results["settings"]["concurrency"]:
        load, peers = label(c), peers_at(c, threads)
        lines += [*absolute_table(results, load, [*ours, *peers]), "",
                  *ratio_table(results, load, ours, peers), ""]
    return lines + bar_lines(results, ours)
