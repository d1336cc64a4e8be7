"""What a replica asks Ray for, from the plans of the built-in cards: one bundle per logical GPU
holding its processes' share, a CPU bundle per CPU-only process, and actors that fit their
bundles."""

from __future__ import annotations

import pytest

import planner
from launcher.backends.ray_bundles import processes_by_gpu, replica_bundles
from planner import Cluster, Node, pack


def _bundles(card: str, variant: str = "default", gpus: bool = True):
    result = planner.solve_pipeline(planner.load_pipeline(model_path=card, variant=variant))
    assert result.ok
    demand = pack(result.plan, Cluster((Node("a", 8, 64),)), 1, gpus=gpus).demand
    return result.plan, replica_bundles(result.plan, demand.gpus, demand.limit)


def test_processes_that_share_a_logical_gpu_share_one_bundle_with_their_sum():
    plan, rb = _bundles("higgs-tts")  # three processes on GPU 0, fractions adding up to 0.98
    assert len(rb.bundles) == 1
    (bundle,) = rb.bundles
    assert bundle.resources() == {"CPU": 3.0, "GPU": 0.98}
    assert sorted(bundle.processes) == sorted(processes_by_gpu(plan))
    assert {a.bundle for a in rb.actors.values()} == {0}
    assert sum(a.gpus for a in rb.actors.values()) <= 0.98


def test_a_cpu_only_process_gets_a_cpu_bundle_and_a_stage_without_fraction_a_whole_gpu():
    _, rb = _bundles("fishaudio-s2-pro")  # preprocessing on CPU; the rest on GPU 0, no fraction
    by_process = {p: rb.bundles[a.bundle] for p, a in rb.actors.items()}
    assert by_process["preprocessing"].resources() == {"CPU": 1.0}
    assert by_process["pipeline"].resources() == {"CPU": 1.0, "GPU": 1.0}
    assert rb.actors["pipeline"].gpus == 1.0


def test_tensor_parallel_ranks_get_their_own_logical_gpus():
    _, rb = _bundles("ming-omni-tts", "tp2")
    gpu_of = {p: rb.bundles[a.bundle].logical_gpu for p, a in rb.actors.items()}
    assert gpu_of["tts_engine_tp0"] == gpu_of["ming_tts_aux"] == 0
    assert gpu_of["tts_engine_tp1"] == 1
    assert gpu_of["preprocessing"] is None
    assert rb.bundles[rb.actors["tts_engine_tp1"].bundle].gpu == 0.72


def test_on_a_cluster_without_gpus_every_process_asks_for_one_cpu_only():
    plan, rb = _bundles("higgs-tts", gpus=False)
    assert [b.resources() for b in rb.bundles] == [{"CPU": 1.0}] * len(processes_by_gpu(plan))


@pytest.mark.parametrize("card", ["higgs-tts", "moss-tts-local", "dots-tts", "zonos2"])
def test_every_actor_fits_its_bundle_and_every_bundle_one_gpu(card):
    _, rb = _bundles(card)
    for i, bundle in enumerate(rb.bundles):
        actors = [a for a in rb.actors.values() if a.bundle == i]
        assert sum(a.cpus for a in actors) <= bundle.cpus
        assert sum(a.gpus for a in actors) <= bundle.gpu + 1e-9
        assert bundle.gpu <= 1.0


def test_a_limit_below_one_scales_the_share_so_ray_cannot_overfill_a_gpu():
    """Two replicas of 0.45 under a 0.9 limit: each asks for 0.5, so Ray fits exactly two per
    GPU, and what shares a GPU adds up to the limit, never more."""
    plan, _ = _bundles("higgs-tts")
    scale = 10_000
    rb = replica_bundles(plan, ((0, int(0.45 * scale)),), int(0.9 * scale))
    assert rb.bundles[0].gpu == 0.5
