"""`measure`: a pipeline's profile for `planner tune`, put together from the stages timed alone,
beside the lock probe and the spinner, the costs around them, and the stages timed served."""

from __future__ import annotations

import os
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import Any

import torch

import planner
from planner import Profile, StageProfile
from planner.cpus import usable_cpus
from planner.tune.calibration import calibrate_to_served, request_scales

from planner.app.bench.machine import cpu_model
from planner.app.bench.texts import request_texts, warmup_texts
from planner.app.cpu_steal import steal_ticks, stolen_share
from planner.app.profiling.crossing_costs import front_door, served_stage_ms
from planner.app.profiling.lock_sampling import LockProbe, Spinner
from planner.app.profiling.thread_scaling import measure_threads
from planner.app.profiling.stage_timing import (
    build_stage,
    core_wait_share,
    first_chunk_share,
    run_request,
)
from launcher.control.metrics import rss_bytes

TEXT_CHARS = 100  # the bench's default request length
THREAD_REQUESTS = 4  # requests timed per stage and thread count (each count builds it again)


def _rss_mib() -> float:
    return (rss_bytes(os.getpid()) or 0) / 2**20


def measure(plan: planner.Plan, *, requests: int = 12, warmup: int = 2, device: str = "cpu",
            factory_defaults: Mapping[str, Any] | None = None, seed: int = 0,
            progress: Callable[[str], None] = lambda _: None,
            served: planner.Plan | None = None, stream: bool = False) -> Profile:
    """Profile `plan`'s stages (its declared topology is what is measured: costs are per stage).
    The stages are then timed served as `served` places them (default: as `plan` does): a
    placement that keeps stages of one request that run at once in processes of their own times
    more of them fairly (see `planner.tune.calibration.calibrate_to_served`). Every request asks
    for a streamed response if `stream`, else a whole one: a stage may work differently for each
    (piper-joe's acoustic stage chunks only a streamed one), and the profile says which it is."""
    torch.set_num_threads(1)  # as every worker runs
    base_rss = _rss_mib()
    stages: dict[str, Callable] = {}
    rss: dict[str, float] = {}
    for s in plan.stages:
        before = _rss_mib()
        stages[s.name] = build_stage(s, device, factory_defaults or {})
        rss[s.name] = max(0.0, _rss_mib() - before)
    texts = request_texts(seed, requests, TEXT_CHARS)
    for text in warmup_texts(seed, warmup, TEXT_CHARS):
        run_request(plan, stages, text, defaultdict(list), defaultdict(list), stream=stream)

    kind = "streamed" if stream else "whole-response"
    progress(f"profiling {len(plan.stages)} stages on {requests} {kind} requests")
    ticks = steal_ticks()
    alone: dict[str, list[float]] = defaultdict(list)
    extra: dict[str, list[float]] = defaultdict(list)
    audio_lengths = []
    for text in texts:
        audio = run_request(plan, stages, text, alone, extra, stream=stream)
        if audio is not None:
            audio_lengths.append(audio.numel() * 1000.0 / plan.sample_rate)
    progress("sampling what holds the interpreter lock")
    held: dict[str, list[float]] = defaultdict(list)
    probed: dict[str, list[float]] = defaultdict(list)
    with LockProbe() as probe:
        for text in texts:
            run_request(plan, stages, text, probed, held, probe, stream=stream)

    stolen = stolen_share(ticks, steal_ticks())
    progress("timing native calls beside a busy thread")
    switch_interval_ms = sys.getswitchinterval() * 1000.0  # the workers' (the spinner changes it)
    short = request_texts(seed, Spinner.REQUESTS, Spinner.TEXT_CHARS)
    calm: dict[str, list[float]] = defaultdict(list)
    calm_costs: dict[str, list[float]] = defaultdict(list)
    for text in short:
        run_request(plan, stages, text, calm, calm_costs, stream=stream)
    contended: dict[str, list[float]] = defaultdict(list)
    with Spinner():
        for text in short:
            run_request(plan, stages, text, contended, defaultdict(list), stream=stream)

    out = []
    for s in plan.stages:
        wall = statistics.fmean(alone[s.name])
        cpu = min(statistics.fmean(extra[s.name + ":cpu"]), wall)
        gil = min(statistics.fmean(held[s.name + ":held"]), cpu)
        # Totals over the short requests; their lock-holding share taken to be the stage's.
        short_cpu = sum(calm_costs[s.name + ":cpu"])
        short_gil = short_cpu * gil / cpu if cpu else 0.0
        call = Spinner.call_ms(sum(calm[s.name]), sum(contended[s.name]), short_gil,
                                short_cpu - short_gil)
        successors = [h for h in plan.handoffs if h.source == s.name]
        out.append(StageProfile(
            name=s.name, gil_ms=round(gil, 4), native_ms=round(cpu - gil, 4),
            device_ms=round(wall - cpu, 4),
            chunks_out=round(statistics.fmean(extra[s.name + ":items"]), 3),
            out_bytes=round(statistics.fmean(extra[s.name + ":bytes"]) if successors else 0.0),
            rss_mib=round(rss[s.name], 1),
            native_call_ms=round(call, 4) if call is not None else None,
            first_chunk_share=first_chunk_share(extra, s.name)))
    out = measure_threads(plan, stages, out, device, factory_defaults or {},
                          texts[:THREAD_REQUESTS], usable_cpus(), progress,
                          stream)
    progress("measuring the HTTP front door")
    audio_ms = statistics.fmean(audio_lengths) if audio_lengths else 0.0
    frontend_ms, client_ms, handoff = front_door(audio_ms, plan.sample_rate, stream=stream)
    progress("timing the stages served")
    serve = served or plan
    try:
        served_ms = served_stage_ms(serve, device, factory_defaults or {}, texts, stream)
    except Exception as exc:  # noqa: BLE001 - the profile stands without it
        progress(f"could not serve the stages ({type(exc).__name__}: {exc}); "
                 "keeping each stage's costs as measured alone")
        served_ms = {}
    out = calibrate_to_served(serve, out, served_ms, handoff)
    return Profile(
        model=plan.model, variant=plan.variant, cores=usable_cpus(),
        cpu_model=cpu_model() or "unknown", stages=tuple(out),
        handoff=handoff, device=device,
        frontend_ms=round(frontend_ms, 4), client_ms=round(client_ms, 4),
        process_rss_mib=round(base_rss, 1), requests=requests,
        request_scale=request_scales(alone, [s.name for s in plan.stages]),
        switch_interval_ms=round(switch_interval_ms, 4),
        # waits the kernel saw, and time the hypervisor took (which it does not see)
        core_wait_share=round(min(1.0, core_wait_share((alone, extra), (probed, held))
                                  + stolen), 4),
        note=f"{TEXT_CHARS}-character texts, seed {seed}, torch {torch.__version__}",
        stream=stream)
