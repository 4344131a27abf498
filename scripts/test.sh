#!/usr/bin/env bash
# Sets up (scripts/setup.sh), then runs every test. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH" XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
# in CI the browser test must run: a missing Chromium or an unbuilt extension is a failure
export ZYNBOOK_REQUIRE_BROWSER=${ZYNBOOK_REQUIRE_BROWSER:-1}
# one worker a core (at most four), a test file's tests on one worker (module fixtures)
python -m pytest -q -p no:cacheprovider -n auto --maxprocesses 4 --dist loadfile "$@"
