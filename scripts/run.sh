#!/usr/bin/env bash
# Sets up Gateway on a fresh machine and runs its main job: a single-node gateway
# (`gateway run`): data in ./gateway-data (or $GATEWAY_DATA_DIR), the gRPC API on
# 127.0.0.1:7070, the embedded SQLite applier (DATA/sqlite/gateway.db). Stop it with Ctrl-C
# (or SIGTERM). Extra arguments go to `gateway run` (see docs/node.md), e.g.
#   scripts/run.sh --api 127.0.0.1:7071 --metrics 127.0.0.1:9100
# Try it from another shell:
#   gateway sql "INSERT INTO shop.items (id, name) VALUES (1, 'a')"
#   gateway get shop.items 1
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
"$PY" -m pip install --quiet --disable-pip-version-check -e .
exec gateway run --data-dir "${GATEWAY_DATA_DIR:-gateway-data}" "$@"
