"""peer_piper.py's summary of one `planner bench` run (its results.json) and of what the script
measured beside it (piper's process tree, the machine's limit): ours / piper per round, and the
figures bench cannot know of a server it did not start.

Pure (no processes, no I/O but the text it returns), so that its smoke test runs in milliseconds
on a synthetic results.json.
"""

from __future__ import annotations

import statistics

from benchmarks.round_ratios import labels, rounds_rps, run_of, stat, summarise, versus

PIPER = "piper"  # piper's server: the --url target's name in the bench run


def machine_limit(cores: int, cpu_per_request_s: list[float]) -> float | None:
    """Requests/s no server of the voice graph can beat here: the cores over the CPU one request
    takes in one process on one thread (the median of the readings)."""
    readings = [c for c in cpu_per_request_s if c > 0]
    return cores / statistics.median(readings) if readings else None


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.0f}"


def _x(value: float | None) -> str:
    return "-" if value is None else f"x{value:.3f}"


def absolute_table(results: dict, label: str, rows: list[str]) -> list[str]:
    """Each row's merged figures at one load, as bench measured them."""
    lines = [f"{label}: merged over the rounds",
             "| row | req/s | p50 ms | p90 ms | first audio p50 ms | audio s/request | errors |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for row in rows:
        run = run_of(results, row, label)
        if run is None:
            continue
        load = run["load"]
        audio = load["audio_seconds_per_s"] / load["throughput_rps"] if load["ok"] else None
        lines.append(f"| {row} | {load['throughput_rps']:.2f} | {_ms(stat(run, 'latency_s'))} "
                     f"| {_ms(stat(run, 'latency_s', 'p90'))} | {_ms(stat(run, 'ttfa_s'))} | "
                     f"{'-' if audio is None else f'{audio:.2f}'} | {load['errors']} |")
    return lines


def ratio_table(results: dict, label: str, ours: list[str], limit: float | None) -> list[str]:
    """Ours / piper at one load: requests/s paired by round (median, geometric mean, 90%
    interval), latency p50, our first audio against piper's whole answer, and (where requests
    overlap) our requests/s against the machine's limit."""
    stream = bool(results["settings"]["stream"])
    lines = [f"{label}: ours / piper, requests/s paired round by round: median (geometric mean, "
             "90% interval)",
             "| ours | req/s | p50 | " + ("first audio p50 / piper's p50 | " if stream else "")
             + "req/s / machine limit |",
             "| --- | ---: | ---: | " + ("---: | " if stream else "") + "---: |"]
    piper = run_of(results, PIPER, label)
    for row in ours:
        vs, run = versus(results, row, PIPER, label), run_of(results, row, label)
        if not vs or run is None:
            continue
        rps = vs["req/s"]
        first = _x(stat(run, "ttfa_s") / stat(piper, "latency_s")
                   if stat(run, "ttfa_s") and stat(piper, "latency_s") else None)
        over = limit and label != "C=1" and run["load"]["throughput_rps"] / limit
        lines.append(f"| {row} | {rps.text() if rps else '-'} | {_x(vs['p50'])} | "
                     + (f"{first} | " if stream else "") + f"{_x(over or None)} |")
    return lines


def round_table(results: dict, label: str, ours: list[str]) -> list[str]:
    """Each round's requests/s ratio, ours / piper."""
    piper = run_of(results, PIPER, label)
    if piper is None:
        return []
    lines = [f"{label}: ours / piper, requests/s per round", "| ours | rounds |", "| --- | --- |"]
    for row in ours:
        run = run_of(results, row, label)
        s = run and summarise(rounds_rps(run), rounds_rps(piper))
        if s:
            lines.append(f"| {row} | " + " ".join("-" if r is None else f"{r:.3f}"
                                                  for r in s.ratios) + " |")
    return lines


def report(results: dict, peer: dict) -> list[str]:
    """The summary peer_piper.py prints after bench's own table."""
    ours = [p["name"] for p in results["placements"] if p["name"] != PIPER]
    cores = results["machine"]["cpu_count"]
    limit = machine_limit(cores, peer["graph_cpu_per_request_s"])
    tree = peer["piper_tree"]
    graph = ", ".join(f"{c * 1000:.0f}" for c in peer["graph_cpu_per_request_s"])
    lines = [f"machine limit: {cores} cores / the voice graph's CPU per request in one process "
             f"on one thread ({graph} ms, before and after the run): "
             + ("-" if limit is None else f"{limit:.2f} req/s"),
             f"piper's server: {tree['cpu_per_request_s'] * 1000:.0f} ms CPU per request over "
             f"its {tree['requests']} requests (its whole process tree, idle turns included); "
             f"PSS {tree['memory']['after start-up']['pss_mib']:.0f} MiB after start-up, "
             f"{tree['memory']['after the run']['pss_mib']:.0f} MiB after the run; "
             f"{tree['memory']['after start-up']['threads']:.0f} threads"]
    for label in labels(results):
        lines += ["", *absolute_table(results, label, [*ours, PIPER]),
                  "", *ratio_table(results, label, ours, limit),
                  "", *round_table(results, label, ours)]
    return lines
