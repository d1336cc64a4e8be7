"""The seeded generator of `generated.py`: complete pipeline configs of 3-5
`launcher.synthetic` stages (pure-Python, native and mixed costs of unequal sizes; a chain or a
branch that joins again; a streaming edge or none), the same ones for the same seed.

With `device=True` a stage may also be a device stage, and every pipeline has at least one: it
sleeps 4-30 ms per request (`device_ms`: work that holds the stage, as a GPU call holds its
process's device, but no core) beside 0.2-1 ms of pure Python. A stage does one request at a time
in each copy of its process, so on two cores copies of a device stage's process can serve
requests side by side where a single copy queues them. Without the flag a seed draws exactly what
it drew before device stages existed (the judging runs under `benchmarks/tune_runs` were made of
those)."""

from __future__ import annotations

import itertools
import random

import planner

KINDS = ("python", "native", "mixed")
DEVICE = "device"
DEVICE_MS = (4.0, 30.0)  # asleep per request, whatever chunks the stage is handed it in
DEVICE_GIL_MS = (0.2, 1.0)  # the Python that launches the device work


def _costs(rng: random.Random, kind: str) -> dict[str, float]:
    if kind == DEVICE:
        return {"gil_ms": round(rng.uniform(*DEVICE_GIL_MS), 2),
                "device_ms": round(rng.uniform(*DEVICE_MS) * 2) / 2}
    ms = round(rng.uniform(1.0, 8.0) * 2) / 2  # unequal sizes, 1-8 ms of CPU per request
    if kind == "python":
        return {"gil_ms": ms}
    if kind == "native":
        return {"gil_ms": 0.2, "native_ms": ms}
    share = rng.uniform(0.3, 0.7)
    return {"gil_ms": round(ms * share, 2), "native_ms": round(ms * (1 - share), 2)}


def generate(seed: int, max_placements: int = 6, stages: int | None = None,
             device: bool = False) -> dict:
    """A complete pipeline config, the same for the same arguments. `max_placements`: edges are
    left out of `process_safe_edges` (at random) until at most this many placements are accepted,
    so every one of them can be served in the time a run has. `device`: device stages among the
    kinds, at least one per pipeline (the module's docstring)."""
    rng = random.Random(seed)
    n = stages or rng.randint(3, 5)
    names = [f"s{i}" for i in range(n)]
    branch = n >= 4 and rng.random() < 0.5
    edges: list[tuple[str, str]] = []
    if branch:  # s0 -> s1, s2 -> s3 (-> s4)
        edges = [("s0", "s1"), ("s0", "s2"), ("s1", "s3"), ("s2", "s3")]
        edges += list(itertools.pairwise(names[3:]))
    else:
        edges = list(itertools.pairwise(names))
    preds = {b: sum(1 for _, t in edges if t == b) for b in names}
    cfg_stages = []
    kinds = (*KINDS, DEVICE) if device else KINDS
    for name in names:
        args = _costs(rng, rng.choice(kinds))
        cfg_stages.append({"name": name, "process": "pipeline",
                           "factory": "launcher.synthetic:stage", "args": args})
    # Drawn after every other draw of the stages, so that without `device` nothing changes.
    if device and not any("device_ms" in s["args"] for s in cfg_stages):
        cfg_stages[rng.randrange(n)]["args"] = _costs(rng, DEVICE)
    by_name = {s["name"]: s for s in cfg_stages}
    for a, b in edges:
        by_name[a].setdefault("next", []).append(b)
    # One streaming edge, or none: from a stage with one successor into one with one input (the
    # launcher joins at most one chunk stream, and a plain chain edge is the common case).
    single = [(a, b) for a, b in edges if len(by_name[a]["next"]) == 1 and preds[b] == 1]
    if single and rng.random() < 0.5:
        a, b = rng.choice(single)
        by_name[a]["stream_to"] = [b]
        by_name[a]["args"].update(chunks=rng.randint(3, 6), out_bytes=16384)
        # A stage fed a stream works once per chunk: its device time stays the request's.
        fed = by_name[b]["args"]
        if "device_ms" in fed:
            fed["device_ms"] = round(fed["device_ms"] / by_name[a]["args"]["chunks"], 3)
    last = names[-1]
    by_name[last]["terminal"] = True
    by_name[last]["args"]["audio_ms"] = 300.0
    safe = [list(e) for e in edges]
    cfg = {"name": f"generated-{seed}", "stages": cfg_stages, "process_safe_edges": safe}
    while count_placements(cfg) > max_placements and safe:
        safe.pop(rng.randrange(len(safe)))
    return cfg


def count_placements(cfg: dict) -> int:
    return len(planner.feasible_placements(planner.load(config=cfg)))


def describe(cfg: dict) -> str:
    parts = []
    # a stage fed a stream does its work once per chunk it is handed (`launcher.synthetic`)
    fed = {t: src["args"]["chunks"] for src in cfg["stages"] for t in src.get("stream_to", [])}
    for s in cfg["stages"]:
        a = s["args"]
        kind = ("mixed" if a.get("gil_ms", 0) > 0.5 and a.get("native_ms") else
                "native" if a.get("native_ms") else DEVICE if a.get("device_ms") else "python")
        cpu = a.get("gil_ms", 0) + a.get("native_ms", 0)
        stream = f", streams {a['chunks']} chunks" if s.get("stream_to") else ""
        per = f" x{fed[s['name']]} chunks" if s["name"] in fed else ""
        held = f" + {a['device_ms']:.1f} ms asleep" if a.get("device_ms") else ""
        parts.append(f"{s['name']} {kind} {cpu:.1f} ms{held}{per}{stream}")
    shape = "branch" if any(len(s.get("next", [])) > 1 for s in cfg["stages"]) else "chain"
    return f"{shape}: " + "; ".join(parts)
