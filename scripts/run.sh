#!/usr/bin/env bash
# Sets up Gateway on a fresh machine and runs its main job.
#
# Until the cluster node lands, the main job is the log path end to end: append transactions to
# a standalone log (the seed's binlog_writer), dump and verify it (binlog_reader), and apply it
# through the dispatcher to the embedded SQLite store.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
"$PY" -m pip install --quiet --disable-pip-version-check -e .

DIR=${GATEWAY_DATA_DIR:-gateway-data}
LOG="$DIR/demo.log"
mkdir -p "$DIR"
rm -rf "$LOG" "$LOG.state" "$DIR/demo.db"
gateway log write "$LOG" --server-id 1 'CREATE TABLE whatever (nick TEXT, name TEXT)'
gateway log write "$LOG" --server-id 1 --set nick=mkindahl --set name='Mats Kindahl' \
    'INSERT INTO whatever VALUES (@nick,@name)'
gateway log dump "$LOG"
gateway log verify "$LOG"
gateway apply "$LOG" -o path="$DIR/demo.db"
"$PY" - "$DIR/demo.db" <<'PY'
import sqlite3, sys
print("whatever:", sqlite3.connect(sys.argv[1]).execute("SELECT nick, name FROM whatever").fetchall())
PY
