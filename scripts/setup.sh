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
    for pkg in python3 python3-venv python3-pip g++ mesa-vulkan-drivers libvulkan1 nodejs npm chromium; do
        dpkg -s "$pkg" >/dev/null 2>&1 || need="$need $pkg"
    done
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
.venv/bin/python -m pip install -q -e ".[test,webgpu,jupyter]"
# a writable runtime dir keeps Mesa quiet; the kernelspec goes into the venv
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
.venv/bin/python -m zynbook.kernel install --sys-prefix >/dev/null
