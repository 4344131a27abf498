#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
PY=${PYTHON:-python3}
$PY -m pytest -q -p no:cacheprovider "$@"
