#!/usr/bin/env bash
# Fetches, on a machine with internet, the wheels that scripts/gpu_tests.sh installs on a GPU
# machine without it (Python 3.12, x86-64 Linux): lark, wgpu, the notebook runtime and Dask.
# Packages such machines already have (numpy, packaging, ...) are left out: two versions of
# one package stop the install there. Also fetches, into .whl/debs/, Debian's Vulkan loader
# (libvulkan1) and GL dispatch libraries, which GPU machines without them need for wgpu to
# find the driver (gpu_tests.sh unpacks them where `ldconfig` finds no libvulkan).
set -euo pipefail
cd "$(dirname "$0")/.."
PYVER=${PYVER:-3.12}
rm -rf .whl && mkdir .whl
plats=()
for p in manylinux_2_34_x86_64 manylinux_2_31_x86_64 manylinux_2_28_x86_64 manylinux_2_27_x86_64 \
         manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64; do
    plats+=(--platform "$p")
done
python3 -m pip download -q --only-binary=:all: --python-version "$PYVER" --implementation cp \
    "${plats[@]}" -d .whl lark wgpu nbclient ipykernel ipywidgets nbformat dask distributed
(cd .whl && rm -f numpy-* packaging-* psutil-* pygments-* python_dateutil-* \
    typing_extensions-* attrs-* tzdata-*)
du -sh .whl
if command -v apt-get >/dev/null; then
    mkdir -p .whl/debs /tmp/zynbook-apt/partial
    o="-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/zynbook-apt"
    apt-get $o update >/dev/null && (cd .whl/debs && apt-get $o download libvulkan1 libegl1 \
        libglvnd0 libopengl0 libgl1 libglx0 libgles2 2>/dev/null) || echo "no Vulkan loader fetched"
fi
