#!/usr/bin/env bash
# Checks and times ZynBook on the GPUs of one host (two or more CUDA GPUs with NCCL in CuPy):
#   1. the multi-GPU tests (tests/test_multi_gpu.py: every kernel type split over cuda:0 +
#      cuda:1 against cuda:0 alone, NCCL collectives with uneven parts; test_data_parallel.py:
#      the training step on two GPUs against one; test_group_traces_gpu.py: pipeline calls
#      over the two GPUs replayed as CUDA graphs per GPU, equal bit for bit to the run block
#      by block; test_parallel.py and test_dask.py: the same programs on cpu groups and on a
#      local Dask cluster whose workers take a GPU each);
#   2. bench/bench_multi_gpu.py: scaling efficiency (time on one / (2 x time on two)) of
#      data-parallel batched matmul, the spec's transformer block and model-parallel matmul
#      4096, and the data-parallel training step;
#   3. scripts/multi_gpu_check.py: the same checks at larger sizes, with a report, in the
#      time left.
#
#   bash scripts/multi_gpu_check.sh [--no-tests] [--no-checks] [--no-bench] [--devices cuda:0,cuda:1]
#                                   [--rows bmm,block,mm,train]   (the bench's rows)
#   bash scripts/multi_gpu_check.sh --no-tests --devices cpu,cpu:native --quick    # a dry run anywhere
#
# Fits one 10-minute call. Pure-Python dependencies missing on the machine travel as wheels
# in .whl/ (scripts/gpu_wheels.sh) and are installed into /tmp/site, as gpu_tests.sh does.
# Logs and JSON go to $OUT (or bench/results/).
set -uo pipefail
cd "$(dirname "$0")/.."
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:${PYTHONPATH:-}
fi
export PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
export ZYNBOOK_CACHE_DIR=${ZYNBOOK_CACHE_DIR:-/tmp/zynbook-cache}
TESTS=1 CHECKS=1 BENCH=1 DEVICES=cuda:0,cuda:1 QUICK=() ROWS=bmm,block,mm,train
while [ $# -gt 0 ]; do
    case "$1" in
        --no-tests) TESTS=0 ;;
        --no-checks) CHECKS=0 ;;
        --no-bench) BENCH=0 ;;
        --devices) DEVICES=$2; shift ;;
        --quick) QUICK=(--quick) ;;
        --rows) ROWS=$2; shift ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
RES=${OUT:-bench/results}
mkdir -p "$RES"
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader || true
nvidia-smi topo -m 2>/dev/null | head -n 4 || true
python3 -c "from cupy.cuda import nccl; print('NCCL', nccl.get_version())" || true
rc=0
if [ "$TESTS" = 1 ]; then
    t0=$SECONDS
    ZYNBOOK_DASK_WORKERS=2 timeout 220 python3 -m pytest -q -p no:cacheprovider -rs \
        tests/test_multi_gpu.py tests/test_data_parallel.py tests/test_group_traces_gpu.py \
        tests/test_parallel.py \
        tests/test_dask.py 2>&1 | tee "$RES/multi_gpu_tests.log" || rc=1
    echo "[multi-gpu] tests: $((SECONDS - t0))s"
fi
if [ "$BENCH" = 1 ]; then
    t0=$SECONDS
    timeout 200 python3 bench/bench_multi_gpu.py --devices "$DEVICES" "${QUICK[@]}" --rows "$ROWS" \
        --json "$RES/bench_multi_gpu.json" 2>&1 | tee "$RES/bench_multi_gpu.log" || rc=1
    echo "[multi-gpu] bench: $((SECONDS - t0))s"
fi
LEFT=$((570 - SECONDS))
if [ "$CHECKS" = 1 ] && [ "$LEFT" -lt 30 ]; then
    echo "[multi-gpu] checks: skipped, ${LEFT}s left of the 10-minute call"
elif [ "$CHECKS" = 1 ]; then
    t0=$SECONDS
    timeout "$LEFT" python3 scripts/multi_gpu_check.py --devices "$DEVICES" --no-dask "${QUICK[@]}" \
        --json "$RES/multi_gpu_check.json" 2>&1 | tee "$RES/multi_gpu_check.log" || rc=1
    echo "[multi-gpu] checks: $((SECONDS - t0))s"
fi
exit $rc
