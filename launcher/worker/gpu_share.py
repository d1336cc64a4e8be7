"""A process's share of its GPU's compute, carried to CUDA as MPS's active-thread percentage
(worked out from the plan by `launcher.control.layout.gpu_compute_percentage`).

The plan gives a GPU stage a `gpu_compute_fraction` (the share of the GPU's streaming
multiprocessors it may use), as it gives a CPU stage its threads. A process holds the sum of its
stages' shares on its GPU; CUDA applies it through the MPS client's
`CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`, read once, when the process creates its CUDA context, so it
is set before anything touches CUDA. Without an MPS daemon CUDA ignores it: the share is then a
statement of the plan, not enforced (as memory fractions are not on CPU).
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

MPS_PERCENTAGE = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"


def apply(percentage: int | None, environ: MutableMapping[str, str] = os.environ) -> None:
    """Set (or, for the whole GPU, clear an inherited) MPS percentage for this process."""
    if percentage is None:
        environ.pop(MPS_PERCENTAGE, None)
    else:
        environ[MPS_PERCENTAGE] = str(percentage)
