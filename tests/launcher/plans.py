"""Plans built by hand, as `planner.solve` would return them, so the launcher is tested on its own.

Also used from a subprocess (`python -m tests.launcher.plans ...` is not needed: import by path).
"""

from __future__ import annotations

from planner import GpuUsage, Handoff, Plan, PlannedStage, ProcessGroup, TpProcess

S = "launcher.standins:"
LOCAL = (("prepared_requests", "process_local"),)


def _stage(name, process, factory, gpus=(0,), fraction=None, args=(), tp_size=1):
    return PlannedStage(
        name=name, process=process, gpus=tuple(gpus), tp_size=tp_size, fraction=fraction,
        fraction_source="declared" if fraction is not None else None,
        factory=factory if ":" in factory else S + factory,
        args=tuple(args),
    )


def qwen3(split: str | None = None, *, vocoder_factory: str = "vocoder",
          generator_factory: str = "codec_generator", local_state: bool = True,
          generator_args: tuple = (), vocoder_args: tuple = ()) -> Plan:
    """Qwen3-TTS: preprocessing (CPU) -> tts_engine (gpu 0) -> vocoder (gpu 0, streamed).

    split=None: the declared topology, one process `pipeline`.
    split="vocoder": vocoder isolated in process `vocoder` (fractions 0.85 / 0.10).
    split="preprocessing": the unsupported split, built directly as if bypassing the planner.
    """
    args = LOCAL if local_state else ()
    fr = (0.85, 0.10) if split else (None, None)
    proc = {"preprocessing": "pipeline", "tts_engine": "pipeline", "vocoder": "pipeline"}
    if split:
        proc[split] = split
    stages = (
        _stage("preprocessing", proc["preprocessing"], "preprocessing", gpus=(), args=args),
        _stage("tts_engine", proc["tts_engine"], generator_factory, fraction=fr[0],
               args=args + tuple(generator_args)),
        _stage("vocoder", proc["vocoder"], vocoder_factory, fraction=fr[1],
               args=tuple(vocoder_args)),
    )
    return _assemble("Qwen/Qwen3-TTS-12Hz-0.6B-Base", stages, [
        ("preprocessing", "tts_engine", ("next",)),
        ("tts_engine", "vocoder", ("stream",)),
    ])


def higgs(tp: int = 1) -> Plan:
    """Higgs-TTS-like: tts_frontend (preprocessing, audio_encoder) -> tts_engine -> vocoder.

    With tp > 1, tts_engine runs as `tp` rank processes.
    """
    stages = (
        _stage("preprocessing", "tts_frontend", "preprocessing", fraction=0.03),
        _stage("audio_encoder", "tts_frontend", "reference_encoder", fraction=0.03),
        _stage("tts_engine", "pipeline", "codec_generator", fraction=0.85,
               gpus=tuple(range(tp)), tp_size=tp),
        _stage("vocoder", "vocoder", "vocoder", fraction=0.10),
    )
    return _assemble("bosonai/higgs-tts-3-4b", stages, [
        ("preprocessing", "audio_encoder", ("next",)),
        ("audio_encoder", "tts_engine", ("next",)),
        ("tts_engine", "vocoder", ("stream",)),
    ])


def _assemble(model, stages, edges) -> Plan:
    groups: dict[str, list[str]] = {}
    tps = []
    for s in stages:
        if s.is_tp:
            tps += [TpProcess(s.name, r, f"{s.process}_tp{r}", g) for r, g in enumerate(s.gpus)]
        else:
            groups.setdefault(s.process, []).append(s.name)
    group_objs = tuple(
        ProcessGroup(name, tuple(names), next(
            (s.gpus[0] for s in stages if s.name in names and s.gpus), None))
        for name, names in groups.items()
    )
    proc_of = {s.name: s.process for s in stages}
    handoffs = tuple(
        Handoff(a, b, kinds, crosses=proc_of[a] != proc_of[b] or any(
            s.is_tp for s in stages if s.name in (a, b)))
        for a, b, kinds in edges
    )
    gpus = tuple(sorted({g for s in stages for g in s.gpus}))
    usage = tuple(
        GpuUsage(g, round(sum(s.fraction or 0 for s in stages if g in s.gpus), 6), 1.0,
                 tuple(sorted({s.process for s in stages if g in s.gpus})))
        for g in gpus
    )
    targets = {b for _, b, _ in edges}
    sources = {a for a, _, _ in edges}
    return Plan(
        model=model, variant="default", stages=tuple(stages), groups=group_objs,
        tp_processes=tuple(tps), gpus=usage, handoffs=handoffs,
        entry_stages=tuple(s.name for s in stages if s.name not in targets),
        terminal_stages=tuple(s.name for s in stages if s.name not in sources),
    )


def topology(plan: Plan) -> dict:
    """The JSON a CLI would pass to /v1/topology (shape of `planner.result_dict` for an ok plan)."""
    from planner import Result, result_dict

    return result_dict(Result(plan.model, plan.variant, "ok", plan=plan))
