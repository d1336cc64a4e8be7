"""Copies of a process group, served end to end with the stand-in stages: requests spread over
the copies, each keeps its copy for its life, and the audio is bit-identical to the one-copy
plan's, for whole and streamed requests, whichever group is copied."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from launcher import launch

from tests.launcher import plans
from tests.launcher.conftest import DEVICE, TINY
from tests.launcher.control.test_copies import with_copies

pytestmark = pytest.mark.slow
TEXTS = [f"Copy {i} of this sentence, spoken by whichever copy is free." for i in range(4)]
TIMEOUT_S = 60.0


def serve_all(plan) -> tuple[list[tuple[torch.Tensor, dict[str, str]]], dict]:
    """Every text as a whole and as a streamed request, all at once; (audio, copies) of each,
    and the deployment's /metrics sample."""
    with launch(plan, device=DEVICE, factory_defaults=TINY) as d:
        def one(job: tuple[str, bool]) -> tuple[torch.Tensor, dict[str, str]]:
            text, stream = job
            handle = d.submit(text, stream=stream)
            audio = torch.cat(list(handle.chunks(TIMEOUT_S))) if stream else \
                handle.result(TIMEOUT_S).samples
            return audio, handle.copies

        jobs = [(t, s) for t in TEXTS for s in (False, True)]
        with ThreadPoolExecutor(len(jobs)) as pool:
            out = list(pool.map(one, jobs))
        served = {p.name: p.served for p in d.sample().processes}
    return out, served


def test_copies_share_the_requests_and_give_the_one_copy_plans_audio():
    reference, _ = serve_all(plans.qwen3("vocoder"))
    for group, copies in (("vocoder", ("vocoder.0", "vocoder.1")),
                          ("pipeline", ("pipeline.0", "pipeline.1"))):
        served, counts = serve_all(with_copies(plans.qwen3("vocoder"), group, 2))
        for (audio, bound), (expected, _) in zip(served, reference):
            assert bound[group] in copies
            assert torch.equal(audio, expected), f"audio differs on {bound[group]}"
        # Both copies served some; the counts on /metrics say which did how many.
        assert {bound[group] for _, bound in served} == set(copies)
        assert sum(counts[c] for c in copies) == len(served) and all(counts[c] for c in copies)
