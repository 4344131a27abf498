#!/usr/bin/env bash
# Sets up (scripts/setup.sh), then runs every test. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH" XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
python -m pytest -q -p no:cacheprovider "$@"
