#!/usr/bin/env bash
# Sets up everything the test suite needs on a fresh machine, then runs it.
# Usage: scripts/test.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
"$PY" -m pip install --quiet --disable-pip-version-check -e '.[dev]'
"$PY" -m pip install --quiet --disable-pip-version-check -e plugins/gateway-plugin-template

# Generated protobuf code must match the .proto sources.
"$PY" scripts/gen_proto.py --check

"$PY" -m ruff check --quiet .

export GATEWAY_REQUIRE_ACCEL=1  # the C accelerator must build here; its tests must not skip
set +e
"$PY" -m pytest "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
    echo "pytest collected no tests: treating as failure" >&2
    exit 1
fi
exit "$rc"
