#!/usr/bin/env bash
# GPU check for the launcher, for a machine with CUDA (not part of the CPU test run).
#  1. the end-to-end launcher tests on CUDA: same audio across placements, kills, restarts;
#  2. memory fractions are enforced: a stage allocating past its process's
#     torch.cuda.set_per_process_memory_fraction fails, one staying under it runs.
# Every step runs, even after one fails (a device lease is short: one run should say all it can);
# the exit status is 1 when any failed, and the last line names them.
# Usage: benchmarks/gpu_check.sh [python]   (default: .venv/bin/python, else python3)
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${1:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}

"$PY" - <<'PY' || exit 1
import torch
assert torch.cuda.is_available(), "no CUDA device visible to torch"
print(f"torch {torch.__version__}, {torch.cuda.device_count()} x {torch.cuda.get_device_name(0)}")
PY

failed=()
echo "== end-to-end on CUDA"
LAUNCHER_TEST_DEVICE=cuda "$PY" -m pytest -q -p no:cacheprovider \
    tests/launcher/test_deployment.py tests/launcher/serving/test_http.py \
    tests/launcher/backends/test_local_deaths.py || failed+=("end-to-end")

echo "== memory fraction enforcement"
"$PY" -m pytest -q -s -p no:cacheprovider tests/launcher/test_cuda.py || failed+=("memory fractions")

echo "== GPU compute share (CUDA MPS active-thread percentage)"
"$PY" -m pytest -q -p no:cacheprovider tests/launcher/worker/test_gpu_share.py \
    || failed+=("compute share")
# Enforced only by an MPS daemon; this check never starts or stops one (the device's settings
# are left as they are). With one running, a compute-bound loop at a 25% share must take clearly
# longer than at 100%.
if pgrep -f nvidia-cuda-mps-control >/dev/null 2>&1; then
    "$PY" - <<'PY'
import subprocess, sys
probe = r'''
import sys, time
from launcher.worker import gpu_share
gpu_share.apply(int(sys.argv[1]))
import torch
a = torch.randn(8192, 8192, device="cuda")
torch.cuda.synchronize()
t = time.perf_counter()
for _ in range(20):
    a @ a
torch.cuda.synchronize()
print(time.perf_counter() - t)
'''
times = {p: float(subprocess.run([sys.executable, "-c", probe, str(p)], check=True,
                                 capture_output=True, text=True).stdout) for p in (100, 25)}
print(f"20 matmuls of 8192^2: {times[100]:.3f} s at 100%, {times[25]:.3f} s at 25% "
      f"(x{times[25] / times[100]:.2f})")
assert times[25] > 1.5 * times[100], "the 25% share was not enforced"
PY
    [ $? -eq 0 ] || failed+=("MPS enforcement")
else
    echo "skipped: no MPS daemon runs here (nvidia-cuda-mps-control -d starts one); the share is set, not enforced"
fi

if [ ${#failed[@]} -gt 0 ]; then
    echo "gpu_check: FAILED: ${failed[*]}"
    exit 1
fi
echo "gpu_check: every step passed"
