#!/usr/bin/env bash
# Sets up (scripts/setup.sh), then runs ZynBook's main job on the best device present
# (a GPU where there is one, else the CPU): every example program, then the tutorial
# notebooks executed headless, and a summary. `scripts/main.sh --lab` starts JupyterLab instead.
# ZYNBOOK_DEVICE picks the device for the examples (default: auto).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
START=$SECONDS
bash scripts/setup.sh
export PATH="$ROOT/.venv/bin:$PATH" XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
# the tools' own warnings (deprecations, ZMQ/TCP notices) stay out of the job's output
export PYTHONWARNINGS=${PYTHONWARNINGS:-ignore} PYDEVD_DISABLE_FILE_VALIDATION=1
unset VIRTUAL_ENV
if [ "${1:-}" = "--lab" ]; then
    exec python -m jupyter lab --ip=0.0.0.0 --no-browser --allow-root notebooks/
fi
DEVICE=${ZYNBOOK_DEVICE:-auto}
OUTDIR=$ROOT/build/notebooks
LOGDIR=$ROOT/build/logs
mkdir -p "$OUTDIR" "$LOGDIR"
RESOLVED=$(python -c "from zynbook.backends.registry import get_device; print(get_device('$DEVICE').id)" 2>/dev/null || echo "$DEVICE")

echo "== devices"
python -m zynbook.cli devices
echo "== examples on $DEVICE ($RESOLVED)"
ran=0 failed=()
# the transformer block reads its layers' weights from a safetensors file
python scripts/example_weights.py build/transformer_block.safetensors >/dev/null
for f in examples/*.zyn; do
    extra=()
    case "$f" in
        */multi_gpu.zyn) continue ;;                              # needs two CUDA GPUs
        */transformer_block.zyn) extra=(--weights model=build/transformer_block.safetensors) ;;
    esac
    t0=$SECONDS
    if out=$(python -m zynbook.cli run "$f" --device "$DEVICE" "${extra[@]}" 2>&1); then
        ran=$((ran + 1))
        printf '  %-32s ok   %3ds  %s\n' "$(basename "$f")" $((SECONDS - t0)) \
            "$(printf '%s' "$out" | head -n 1 | cut -c1-70)"
    else
        failed+=("$f")
        printf '  %-32s FAILED\n%s\n' "$(basename "$f")" "$out"
    fi
done
echo "== notebooks (executed copies in $OUTDIR)"
nbs=0
for nb in notebooks/*.ipynb; do
    [ -e "$nb" ] || continue
    t0=$SECONDS
    name=$(basename "$nb" .ipynb)
    if python -m jupyter nbconvert --to notebook --execute --output-dir "$OUTDIR" "$nb" \
            >"$LOGDIR/$name.log" 2>&1; then
        nbs=$((nbs + 1))
        printf '  %-40s ok   %3ds\n' "$name" $((SECONDS - t0))
    else
        failed+=("$nb")
        printf '  %-40s FAILED (%ds); the end of %s:\n' "$name" $((SECONDS - t0)) "$LOGDIR/$name.log"
        tail -n 25 "$LOGDIR/$name.log"
    fi
done
echo "== summary"
echo "  device:    $DEVICE -> $RESOLVED"
echo "  examples:  $ran ran (multi_gpu.zyn needs two CUDA GPUs)"
echo "  notebooks: $nbs executed, written to $OUTDIR"
echo "  time:      $((SECONDS - START))s in all, setup included"
if [ ${#failed[@]} -gt 0 ]; then
    echo "  FAILED:    ${failed[*]}"
    exit 1
fi
