#!/usr/bin/env bash
# Installs everything ZynBook needs on a fresh Debian machine (run as root, or with sudo).
set -euo pipefail
cd "$(dirname "$0")/.."
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # mesa-vulkan-drivers: a real Vulkan device on the CPU (lavapipe) for the WebGPU backend
    apt-get install -y -qq python3 python3-pip python3-venv mesa-vulkan-drivers libvulkan1 >/dev/null
fi
PY=${PYTHON:-python3}
$PY -m pip install -q --upgrade pip >/dev/null 2>&1 || true
$PY -m pip install -q -e ".[test,webgpu]"
