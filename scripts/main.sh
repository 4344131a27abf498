#!/usr/bin/env bash
# Sets up (scripts/setup.sh), then runs ZynBook's main job on the best device present
# (a GPU where there is one, else the CPU): every example program, then the tutorial
# notebooks executed headless. `scripts/main.sh --lab` starts JupyterLab instead.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH" XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
PY=python
if [ "${1:-}" = "--lab" ]; then
    exec $PY -m jupyter lab --ip=0.0.0.0 --no-browser --allow-root notebooks/
fi
DEVICE=${ZYNBOOK_DEVICE:-auto}
echo "== devices"
$PY -m zynbook.cli devices
for f in examples/*.zyn; do
    case "$f" in
        */multi_gpu.zyn|*/transformer_block.zyn) continue ;;   # need two GPUs / host weights
    esac
    echo "== $f on $DEVICE"
    $PY -m zynbook.cli run "$f" --device "$DEVICE"
done
if ls notebooks/*.ipynb >/dev/null 2>&1; then
    for nb in notebooks/*.ipynb; do
        echo "== $nb"
        $PY -m jupyter nbconvert --to notebook --execute --output-dir /tmp/zynbook-notebooks "$nb"
    done
fi
