"""A copy the plan places on its own GPU (sglang-omni's `replica_devices`, the schema's `gpus`)
runs its stages there: each copy's worker spec and its Ray bundle name that GPU."""

from __future__ import annotations

from launcher.backends.ray_bundles import processes_by_gpu
from launcher.control.layout import layout
from planner.api import solve_pipeline
from planner.cards import load_pipeline

CONFIG = {"config_cls": "S2ProPipelineConfig",
          "stages": {"tts_engine": {"process": "tts_engine", "gpu_memory_fraction": 0.35},
                     "vocoder": {"process": "vocoder", "gpu_memory_fraction": 0.1}},
          "processes": {"tts_engine": {"num_replicas": 2, "replica_devices": [1, 2]}}}


def test_each_copy_runs_on_the_gpu_the_plan_names_for_it(monkeypatch):
    plan = solve_pipeline(load_pipeline(config=CONFIG), cpus=64).plan
    assert processes_by_gpu(plan) == {"preprocessing": None, "tts_engine.0": 1,
                                      "tts_engine.1": 2, "vocoder": 0}
    import torch  # laid out for CUDA on a machine without it: only the device count is asked

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 3)
    workers = layout(plan, "cuda", "t", {}).workers()
    assert {name: (w.gpu, w.stages[0].device, w.memory_fraction)
            for name, w in workers.items()} == {
        "preprocessing": (None, "cpu", None),
        "tts_engine.0": (1, "cuda:1", 0.35), "tts_engine.1": (2, "cuda:2", 0.35),
        "vocoder": (0, "cuda:0", 0.1)}
