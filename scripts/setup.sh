#!/usr/bin/env bash
# Installs everything ZynBook needs on a fresh Debian machine (run as root) into .venv:
#   system: Python with venv, g++ (runs the generated MSL on the CPU), Mesa's lavapipe
#   (mesa-vulkan-drivers: a real Vulkan device on the CPU for the WebGPU backend), Node.js
#   and npm (builds the JupyterLab extension), Chromium (the browser test);
#   Python: the package with its test, WebGPU and Jupyter extras.
# Set ZYNBOOK_SKIP_APT=1 to leave system packages alone.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${ZYNBOOK_SKIP_APT:-}" ] && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    need=""
    for pkg in python3 python3-venv python3-pip g++ mesa-vulkan-drivers libvulkan1 chromium; do
        dpkg -s "$pkg" >/dev/null 2>&1 || need="$need $pkg"
    done
    # Node may come from elsewhere than Debian; only a machine without it gets Debian's
    command -v node >/dev/null 2>&1 || need="$need nodejs"
    command -v npm >/dev/null 2>&1 || need="$need npm"
    if [ -n "$need" ]; then
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends $need >/dev/null
    fi
fi
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    $PY -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
# the build backend and JupyterLab's jlpm, then the JupyterLab extension (Node), then the
# package itself (its build hook finds the extension built and does not build it again)
.venv/bin/python -m pip install -q "hatchling>=1.18" editables "hatch-jupyter-builder>=0.9" "jupyterlab>=4.0,<5"
if [ ! -f zynbook/labextension/static/style.js ]; then
    (cd labextension && PATH="$PWD/../.venv/bin:$PATH" jlpm install >/dev/null && \
        PATH="$PWD/../.venv/bin:$PATH" jlpm build:prod >/dev/null)
fi
.venv/bin/python -m pip install -q --no-build-isolation -e ".[test,webgpu,jupyter]"
# a writable runtime dir keeps Mesa quiet; the kernelspec goes into the venv
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
.venv/bin/python -m zynbook.kernel install --sys-prefix >/dev/null
