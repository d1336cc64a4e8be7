"""Memory fractions are enforced on CUDA: only runs where CUDA is present (benchmarks/gpu_check.sh)."""

from __future__ import annotations

import pytest
import torch

from launcher import LaunchError, launch

from tests.launcher import plans
from tests.launcher.conftest import TINY

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]
GREEDY = "tests.launcher.factories:greedy_vocoder"


def test_allocation_within_the_fraction_succeeds():
    plan = plans.qwen3("vocoder", vocoder_factory=GREEDY, vocoder_args=(("over", -0.05),))
    with launch(plan, device="cuda", factory_defaults=TINY) as d:
        vocoder = next(p for p in d.health()["processes"] if p["name"] == "vocoder")
        assert vocoder["memory_fraction"] == pytest.approx(0.10)
        assert d.synthesize("within budget", timeout=60).samples.numel() > 0


def test_allocation_beyond_the_fraction_fails_in_that_process():
    plan = plans.qwen3("vocoder", vocoder_factory=GREEDY, vocoder_args=(("over", 0.05),))
    with pytest.raises(LaunchError) as err:
        launch(plan, device="cuda", factory_defaults=TINY)
    print(str(err.value).splitlines()[0])
    assert "stage 'vocoder'" in str(err.value)
    assert "OutOfMemoryError" in str(err.value)
