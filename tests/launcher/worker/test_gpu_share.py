"""A GPU stage's compute share reaches its process as CUDA MPS's active-thread percentage."""

from __future__ import annotations

import pytest

import planner
from launcher.control.layout import gpu_compute_percentage, layout
from launcher.worker import gpu_share


@pytest.mark.parametrize("shares, expected", [
    ([0.3], 30), ([0.3, 0.25], 55), ([0.333], 34), ([0.7, 0.7], 100), ([0.001], 1),
    ([0.3, None], None), ([], None)])
def test_a_process_holds_the_sum_of_its_stages_shares_rounded_up(shares, expected):
    assert gpu_compute_percentage(shares) == expected


def test_the_share_is_set_for_the_process_and_an_inherited_one_cleared():
    env = {}
    gpu_share.apply(40, env)
    assert env == {gpu_share.MPS_PERCENTAGE: "40"}
    gpu_share.apply(None, env)
    assert env == {}


def test_the_plan_carries_declared_shares_into_each_process_spec(monkeypatch):
    def resources(memory, compute):
        return {"resources": {"total_gpu_memory_fraction": memory,
                              "gpu_compute_fraction": compute}}
    config = {"model": "qwen3-tts", "stages": [
        {"name": "tts_engine", "runtime": resources(0.85, 0.7)},
        {"name": "vocoder", "process": "vocoder", "runtime": resources(0.1, 0.25)}]}
    result = planner.solve(config=config)
    assert result.ok, result.diagnostics
    assert result.plan.stage("vocoder").gpu_compute_fraction == 0.25
    assert {w.gpu_compute_percentage
            for w in layout(result.plan, "cpu", "t", {}).workers().values()} == {None}
    import torch  # laid out for CUDA on a machine without it: only the device count is asked

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    workers = layout(result.plan, "cuda", "t", {}).workers()
    assert workers["pipeline"].gpu_compute_percentage == 70
    assert workers["vocoder"].gpu_compute_percentage == 25
    bad = planner.solve(config={"model": "qwen3-tts", "stages": [
        {"name": "vocoder", "runtime": {"resources": {"gpu_compute_fraction": 1.5}}}]})
    assert bad.exit_code == 2 and "gpu_compute_fraction" in bad.diagnostics[0].message
