#!/usr/bin/env bash
# Runs the CUDA tests (and, with --bench, the CUDA benchmark) on a machine with a GPU.
#
# GPU machines here have CUDA, CuPy, PyTorch and numpy but no internet. The one missing
# dependency, lark (pure Python), travels as a wheel in .whl/ (ignored by git):
#   on a machine with internet:  python3 -m pip download --no-deps -d .whl lark
#   copy .whl/ along with the checkout; this script installs it into /tmp/site.
# Results go to $OUT (or bench/results/) when set.
set -uo pipefail
cd "$(dirname "$0")/.."
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:${PYTHONPATH:-}
fi
export PYTHONUNBUFFERED=1
RES=${OUT:-bench/results}
mkdir -p "$RES"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
rc=0
timeout 300 python3 -m pytest -q -p no:cacheprovider -rs tests/test_cuda_gpu.py tests/test_cuda_render.py \
    2>&1 | tee "$RES/gpu_tests.log" || rc=1
if [ "${1:-}" = "--bench" ]; then
    timeout 330 python3 bench/bench_cuda.py --json "$RES/bench_cuda.json" --reps "${REPS:-15}" \
        2>&1 | tee "$RES/bench_cuda.log" || rc=1
fi
exit $rc
