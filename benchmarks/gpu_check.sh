#!/usr/bin/env bash
# GPU check for the launcher, for a machine with CUDA (not part of the CPU test run).
#  1. the end-to-end launcher tests on CUDA: same audio across placements, kills, restarts;
#  2. memory fractions are enforced: a stage allocating past its process's
#     torch.cuda.set_per_process_memory_fraction fails, one staying under it runs.
# Usage: benchmarks/gpu_check.sh [python]   (default: .venv/bin/python, else python3)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}

"$PY" - <<'PY'
import torch
assert torch.cuda.is_available(), "no CUDA device visible to torch"
print(f"torch {torch.__version__}, {torch.cuda.device_count()} x {torch.cuda.get_device_name(0)}")
PY

echo "== end-to-end on CUDA"
LAUNCHER_TEST_DEVICE=cuda "$PY" -m pytest -q -p no:cacheprovider \
    tests/launcher/test_deployment.py tests/launcher/serving/test_http.py

echo "== memory fraction enforcement"
"$PY" -m pytest -q -s -p no:cacheprovider tests/launcher/test_cuda.py
