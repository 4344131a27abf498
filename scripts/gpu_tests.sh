#!/usr/bin/env bash
# Verifies ZynBook on a machine with an NVIDIA GPU: the CUDA tests, every example and the
# differential tests on every device present, the notebooks (with `auto` picking CUDA), and,
# with --bench, the CUDA and WebGPU benchmarks.
#
#   scripts/gpu_tests.sh [--bench] [--no-notebooks] [--no-tests] [--part 1|2|3] [extra pytest paths...]
#
# Each part fits a 10-minute call on an H100 when run alone (--no-tests --bench, say); the
# tests take three such calls (--part 1, 2 and 3).
#
# GPU machines often have CUDA, CuPy, PyTorch and numpy but no internet and no Jupyter. The
# pure-Python dependencies (lark, wgpu, nbclient, ipykernel, ...) travel as wheels in .whl/
# (ignored by git), fetched on a machine with internet by `bash scripts/gpu_wheels.sh`; this
# script installs them into /tmp/site. Results go to $OUT (or bench/results/) when set.
set -uo pipefail
cd "$(dirname "$0")/.."
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:${PYTHONPATH:-}
fi
# wgpu needs a Vulkan loader to find NVIDIA's driver; where the machine has none, Debian's
if ! ldconfig -p 2>/dev/null | grep -q libvulkan && ls .whl/debs/*.deb >/dev/null 2>&1; then
    for f in .whl/debs/*.deb; do dpkg -x "$f" /; done && ldconfig
fi
export PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
export ZYNBOOK_CACHE_DIR=${ZYNBOOK_CACHE_DIR:-/tmp/zynbook-cache}
BENCH=0 NOTEBOOKS=1 TESTS=1 PART=0 EXTRA=()
for arg in "$@"; do
    case "$arg" in
        --part) PART=next ;;
        1|2|3) if [ "$PART" = next ]; then PART=$arg; else EXTRA+=("$arg"); fi ;;
        --bench) BENCH=1 ;;
        --no-notebooks) NOTEBOOKS=0 ;;
        --no-tests) TESTS=0 ;;
        *) EXTRA+=("$arg") ;;
    esac
done
# every test that launches on the devices present (cuda:0 and NVIDIA's Vulkan among them), in
# two parts of about equal time on an H100 (--part 1 or --part 2 runs one, in one 10-minute call)
PART1=(tests/test_cuda_gpu.py tests/test_cuda_render.py tests/test_examples_every_device.py
       tests/test_codegen_safety.py tests/test_attention_variants.py tests/test_cache.py
       tests/test_cuda_copies.py)
PART2=(tests/test_recognise.py tests/test_device_interface.py tests/test_fused_ops.py
       tests/test_placement.py tests/test_host_bounds.py tests/test_empty_reductions.py
       tests/test_interrupts.py tests/test_session_threads.py tests/test_async_devices.py
       tests/test_differential.py tests/test_device_builtins.py tests/test_checkpointing.py
       tests/test_data_parallel.py tests/test_launch_cache.py tests/test_fusion.py
       tests/test_autotune.py tests/test_tile_schedule.py tests/test_attention_schedule.py
       tests/test_cuda_graphs_gpu.py tests/test_torch_cuda_inputs.py)
# the tensor-core schedules (GEMM, warpgroup MMAs, convolutions, attention) and what feeds them
PART3=(tests/test_gemm_schedule.py tests/test_gemm_wgmma.py tests/test_gemm_tma.py tests/test_conv_gemm.py
       tests/test_attention_mma.py tests/test_attention_wgmma.py tests/test_fission.py tests/test_traces.py)
case "$PART" in
    1) GPU_TESTS=("${PART1[@]}") ;;
    2) GPU_TESTS=("${PART2[@]}") ;;
    3) GPU_TESTS=("${PART3[@]}") ;;
    *) GPU_TESTS=("${PART1[@]}" "${PART2[@]}" "${PART3[@]}") ;;
esac
RES=${OUT:-bench/results}
mkdir -p "$RES"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
rc=0
t0=$SECONDS
if [ "$TESTS" = 1 ]; then
    timeout 560 python3 -m pytest -q -p no:cacheprovider -rs --timeout=200 "${GPU_TESTS[@]}" \
        "${EXTRA[@]}" 2>&1 | tee "$RES/gpu_tests.log" || rc=1
fi
echo "[gpu] tests: $((SECONDS - t0))s"
if [ "$NOTEBOOKS" = 1 ]; then
    t0=$SECONDS
    timeout 400 python3 scripts/run_notebooks.py --out "$RES/notebooks" 2>&1 \
        | tee "$RES/notebooks.log" || rc=1
    echo "[gpu] notebooks: $((SECONDS - t0))s"
fi
if [ "$BENCH" = 1 ]; then
    timeout 330 python3 bench/bench_cuda.py --json "$RES/bench_cuda.json" --reps "${REPS:-15}" \
        2>&1 | tee "$RES/bench_cuda.log" || rc=1
    timeout 240 python3 bench/bench_webgpu.py --json "$RES/bench_webgpu.json" --reps "${REPS:-10}" \
        2>&1 | tee "$RES/bench_webgpu.log" || rc=1
fi
exit $rc
