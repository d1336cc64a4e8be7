"""The keys the YAML schema allows, at each level, with what each one means.

One table per level, so a new key is added in one place; `check_keys` reports any other key with
the list of allowed ones.
"""

from __future__ import annotations

from planner.pipeline import DEFAULT_SAMPLE_RATE

SAMPLE_RATES = (8_000, 192_000)  # the range a sample_rate may take, in Hz

PIPELINE_KEYS = {
    "name": "complete pipelines: the pipeline's name",
    "model": "overlay: the card (name, model path or architecture) to start from",
    "variant": "the card variant to start from",
    "description": "free text",
    "stages": "list of stages",
    "roles": "role alias -> stage",
    "process_safe_edges": "list of [source, target] handoffs that may cross processes",
    "unsupported_edges": "list of {edge, reason}: why a handoff must stay in one process",
    "process_edge_resources": "list of {edge, fractions}: fractions to apply when edge is split",
    "fused_stages": "list of stage lists that always share one process",
    "placement": "max_total_gpu_memory_fraction_per_gpu, require_memory_fraction_for_colocation",
    "sample_rate": f"Hz of the audio the terminal stage returns (default {DEFAULT_SAMPLE_RATE})",
    "voices": "the voice names a request may ask for (default: any)",
    "word_timestamps": "true when the stages yield word timings beside the audio (their `words`, "
                       "docs/stages.md): the front door then serves captioned speech",
    "processes": "process name -> {copies: N, cpus: CPUS, gpus: [IDS]}: OS processes running "
                 "that group side by side, the CPUs they may run on and the GPU of each",
    "mps": "off, on or auto: CUDA MPS for processes that share a GPU (sglang-omni's `mps`)",
}
CARD_KEYS = {
    "display_name": "human name of the model",
    "model_paths": "model paths that select this card",
    "architectures": "architecture strings that select this card",
    "variants": "name -> overlay",
    "default_variant": "the variant used when none is asked for",
    "config_classes": "sglang-omni config class (its `config_cls`) -> the variant it selects",
}
STAGE_KEYS = (
    "name", "process", "gpu", "tp_size", "next", "stream_to", "wait_for", "terminal", "factory",
    "args", "runtime", "threads",
)
PROCESS_KEYS = ("copies", "cpus", "gpus")
PLACEMENT_KEYS = ("max_total_gpu_memory_fraction_per_gpu", "require_memory_fraction_for_colocation")
