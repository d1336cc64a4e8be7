"""onnxruntime sessions as the planner expects a stage thread to behave.

As many intra-op threads as the plan gives the stage (`threads`), none spin-waiting: the plan
counts a stage's threads against the CPUs, and onnxruntime's default (a thread per core,
spinning between ops) would take cores nobody planned (spinning also measured slower here: three
sessions' pools spin against each other). On CUDA, onnxruntime's allocator is its own (torch's per-process memory
fraction does not cap it), so the stage's memory fraction becomes the CUDA provider's
`gpu_mem_limit`.
"""

from __future__ import annotations

from typing import Any

CUDA_EP, CPU_EP = "CUDAExecutionProvider", "CPUExecutionProvider"


def cuda_provider_options(device_index: int, fraction: float | None,
                          total_memory: int) -> dict[str, Any]:
    """Options of the CUDA provider for a stage holding `fraction` of a device of
    `total_memory` bytes (no limit when the plan gives no fraction)."""
    options: dict[str, Any] = {"device_id": device_index, "cudnn_conv_algo_search": "HEURISTIC"}
    if fraction is not None:
        if not 0 < fraction <= 1:
            raise ValueError(f"GPU memory fraction must be in (0, 1], not {fraction!r}")
        options["gpu_mem_limit"] = int(fraction * total_memory)
        # Grow by what is asked, not by doubling: doubling overshoots a tight limit.
        options["arena_extend_strategy"] = "kSameAsRequested"
    return options


def providers(device: str, fraction: float | None) -> list[Any]:
    if not device.startswith("cuda"):
        return [CPU_EP]
    import onnxruntime as ort

    if CUDA_EP not in ort.get_available_providers():
        raise RuntimeError(
            f"this stage is placed on {device}, but the installed onnxruntime has no "
            f"{CUDA_EP} (providers: {', '.join(ort.get_available_providers())}); install "
            "onnxruntime-gpu in place of onnxruntime (the two packages share one module), or "
            "run the stage on CPU")
    import torch

    index = int(device.partition(":")[2] or 0)
    total = torch.cuda.get_device_properties(index).total_memory
    return [(CUDA_EP, cuda_provider_options(index, fraction, total)), CPU_EP]


def session(model: bytes, device: str = "cpu", fraction: float | None = None,
            threads: int = 1):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    opts.add_session_config_entry("session.inter_op.allow_spinning", "0")
    # No memory pattern: it keeps a planned block per input shape seen, and sentences come in
    # every length; the arena alone serves them. Measured on the twelve bench sentences in one
    # process: about 235 MiB less resident, time within noise (docs/performance.md, Memory).
    opts.enable_mem_pattern = False
    opts.log_severity_level = 3  # the cut graphs' unused-initializer warnings are expected
    return ort.InferenceSession(model, sess_options=opts, providers=providers(device, fraction))
