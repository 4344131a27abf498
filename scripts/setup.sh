#!/usr/bin/env bash
# Installs everything ZynBook needs on a fresh Debian machine (run as root) into .venv:
#   system: Python with venv, g++ (cpu:native, and the generated MSL run on the CPU), Mesa's
#   lavapipe (mesa-vulkan-drivers: a real Vulkan device on the CPU for the WebGPU backend),
#   Node.js and npm (builds the JupyterLab extension), Chromium (the browser test);
#   Python: the package with its test, WebGPU and Jupyter extras, PyTorch's CPU build (the
#   tests' autograd reference), and the ZynML kernelspec.
# It needs nothing on PATH but the system's own directories and no active virtual environment:
# every tool it runs afterwards (pip, jlpm, jupyter) is the one in .venv.
# Set ZYNBOOK_SKIP_APT=1 to leave system packages alone. Each step says what it does and how
# long it took; the tools' own output goes to .venv/setup.log and is shown when a step fails.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
mkdir -p .venv
LOG=$ROOT/.venv/setup.log
: >"$LOG"
SETUP_START=$SECONDS

# step "what" command...: runs the command with its output in the log; prints the time taken,
# or the log's tail and the failure
step() {
    local what=$1 start=$SECONDS
    shift
    printf '[setup] %s ...\n' "$what"
    "$@" >>"$LOG" 2>&1 &
    local pid=$! rc=0
    # a line every 20 s while a long step runs, so a slow network never looks like a hang
    while ! wait_for "$pid" 20; do
        printf '[setup]   still %s (%ds)\n' "$what" $((SECONDS - start))
    done
    wait "$pid" || rc=$?
    if [ "$rc" = 0 ]; then
        printf '[setup] %s: done in %ds\n' "$what" $((SECONDS - start))
    else
        printf '[setup] %s: FAILED (exit %d); the last lines of %s:\n' "$what" "$rc" "$LOG" >&2
        tail -n 40 "$LOG" >&2
        exit "$rc"
    fi
}

# wait_for PID SECONDS: true once PID has exited, false if it still runs after SECONDS
wait_for() {
    local i
    for ((i = 0; i < $2 * 5; i++)); do
        kill -0 "$1" 2>/dev/null || return 0
        sleep 0.2
    done
    ! kill -0 "$1" 2>/dev/null
}

apt_install() {
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "$@"
}

if [ -z "${ZYNBOOK_SKIP_APT:-}" ] && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    need=()
    for pkg in python3 python3-venv python3-pip g++ mesa-vulkan-drivers libvulkan1 chromium; do
        dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
    done
    # Node may come from elsewhere than Debian; only a machine without it gets Debian's
    command -v node >/dev/null 2>&1 || need+=(nodejs)
    command -v npm >/dev/null 2>&1 || need+=(npm)
    if [ ${#need[@]} -gt 0 ]; then
        step "apt: installing ${need[*]}" apt_install "${need[@]}"
    else
        echo "[setup] apt: system packages already present"
    fi
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    step "creating .venv with $($PY --version 2>&1)" "$PY" -m venv .venv
fi
# from here on the venv's tools come first: hatch-jupyter-builder looks for jlpm on PATH
export PATH="$ROOT/.venv/bin:$PATH"
unset VIRTUAL_ENV PYTHONHOME
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_PROGRESS_BAR=off

step "pip: upgrading pip" python -m pip install --upgrade pip
# the build backend and JupyterLab's jlpm first: the extension is built with them, and the
# package's own editable install runs its build hook without build isolation
step "pip: build tools (hatchling, hatch-jupyter-builder, jupyterlab)" \
    python -m pip install "hatchling>=1.18" editables "hatch-jupyter-builder>=0.9" "jupyterlab>=4.0,<5"
if [ ! -f zynbook/labextension/static/style.js ]; then
    step "extension: jlpm install (Node packages)" bash -c 'cd labextension && jlpm install'
    step "extension: jlpm build:prod" bash -c 'cd labextension && jlpm build:prod'
else
    echo "[setup] extension: already built (zynbook/labextension)"
fi
step "pip: zynbook with its test, webgpu and jupyter extras" \
    python -m pip install --no-build-isolation -e ".[test,webgpu,jupyter]"
# PyTorch is the tests' autograd reference; the CPU build (a CUDA build is gigabytes)
if ! python -c "import torch" >/dev/null 2>&1; then
    # optional: where no such build exists, the tests that compare with PyTorch skip
    ( step "pip: torch ${ZYNBOOK_TORCH_VERSION:=2.13.0} (CPU build, the tests' autograd reference)" \
        python -m pip install "torch==$ZYNBOOK_TORCH_VERSION" ) \
        || echo "[setup] torch: not installed; the tests that compare with PyTorch will skip"
fi
# a writable runtime dir keeps Mesa quiet; the kernelspec goes into the venv and names its python
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
step "jupyter: ZynML kernelspec in .venv" python -m zynbook.kernel install --sys-prefix
echo "[setup] ready in $((SECONDS - SETUP_START))s: $ROOT/.venv (log: $LOG)"
