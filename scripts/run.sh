#!/usr/bin/env bash
# Sets up Gateway on a fresh machine and runs its main job.
#
# Until the cluster node lands, the main job is the log tools (the seed's binlog_writer /
# binlog_reader): append a transaction to a standalone log, dump it, and verify it.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
"$PY" -m pip install --quiet --disable-pip-version-check -e .

LOG=${GATEWAY_DEMO_LOG:-gateway-data/demo.log}
mkdir -p "$(dirname "$LOG")"
gateway log write "$LOG" --server-id 1 --trans 1 --set nick=mkindahl --set name='Mats Kindahl' \
    'INSERT INTO whatever VALUES (@nick,@name)'
gateway log dump "$LOG"
gateway log verify "$LOG"
