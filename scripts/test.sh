#!/usr/bin/env bash
# Sets up everything the test suite needs on a fresh machine, then runs it.
# Usage: scripts/test.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
"$PY" -m pip install --quiet --disable-pip-version-check -e '.[dev,spark,testing]'
"$PY" -m pip install --quiet --disable-pip-version-check -e plugins/gateway-plugin-template
"$PY" -m pip install --quiet --disable-pip-version-check -e plugins/gateway-rabbit -e plugins/gateway-cassandra

# Real servers for tests/integration: Debian's RabbitMQ, Cassandra 5.0 from Maven Central on
# Java 17 (deploy/local/). The fixtures start them; installing here moves the downloads first.
if [ ! -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || ! command -v java >/dev/null \
        || ! command -v mvn >/dev/null; then
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        openjdk-17-jre-headless maven
fi
# Headless Chromium and its driver for the console's browser test (tests/cli/
# test_console_browser.py, through Selenium): required here, so it fails instead of skipping.
if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        chromium chromium-driver
fi
export GATEWAY_REQUIRE_CHROMIUM=1
bash deploy/local/rabbitmq.sh install
bash deploy/local/cassandra/cassandra.sh install

# Docker Engine (Debian's docker.io; dockerd started when none runs) and the images the
# container tests run, built here from what the machine reaches (scripts/build_images.sh: a
# debootstrap base cached by tag, the gateway image from wheels built on the host).
# GATEWAY_DOCKER=0 skips them (the container tests are then skipped, not failed).
if [ "${GATEWAY_DOCKER:-1}" != 0 ]; then
    PYTHON="$PY" bash scripts/build_images.sh
    export GATEWAY_REQUIRE_DOCKER=1
fi

# The clients' toolchains: Go and Node.js come with the machine (Debian's are too old: the Go
# client needs go 1.21+, which fetches the go.mod toolchain itself, the TypeScript one Node 20+);
# clients/test.sh checks their versions.
for tool in go node npm; do
    command -v "$tool" >/dev/null || { echo "scripts/test.sh: '$tool' is not installed" >&2; exit 1; }
done

# Generated protobuf code (Python, Go, TypeScript) must match the .proto sources, and no
# generated Java may be committed (Maven generates it at build time); the pinned generators
# are fetched on first use (scripts/gen_clients.py).
"$PY" scripts/gen_proto.py --check

"$PY" -m ruff check --quiet .

# Types: mypy over gateway/, spark_applier/ and the plugins (strict but for the modules the
# [tool.mypy] overrides in pyproject.toml name; the generated protobuf code is typed by its
# .pyi stubs).
"$PY" -m mypy

# The Go, Java and TypeScript clients against live local clusters, and the cross-language test
# (clients/test.sh); GATEWAY_CLIENTS=0 skips them (a quick Python-only run).
if [ "${GATEWAY_CLIENTS:-1}" != 0 ]; then
    bash clients/test.sh
fi

# The Python specifications of the C fast paths (record stream, node wire paths, bloom probes,
# Spark decoder, columns reader, block search, SQLite binder) must not rot: their tests run once more
# with the accelerators off. Only on a whole-suite run.
PURE_TESTS=(
    tests/core/test_records.py tests/core/test_record_corruption.py
    tests/core/test_record_search.py tests/core/test_stuffing.py tests/core/test_wal.py
    tests/core/test_wal_codec.py tests/node/test_wire_check.py tests/node/test_row_encoding.py
    tests/node/test_single_node.py tests/spark/test_datasource.py tests/spark/test_node_entries.py
    tests/lsm/test_holds_any.py tests/node/test_conflict_screen.py
    tests/appliers/test_insert_columns.py tests/lsm/test_corruption.py tests/lsm/test_model.py
    tests/node/test_peer_stream.py tests/node/test_feed_wire.py
    tests/appliers/test_sqlite_applier.py
)
pure_rc=0
if [ "$#" -eq 0 ]; then
    set +e
    GATEWAY_PURE_PYTHON=1 "$PY" -m pytest -q -p no:cacheprovider "${PURE_TESTS[@]}"
    pure_rc=$?
    set -e
    if [ "$pure_rc" -eq 5 ]; then
        echo "pure-Python run collected no tests: treating as failure" >&2
        exit 1
    fi
fi

# The example application suite (examples/shop), run as an application team runs it: the
# `gateway` fixture of Gateway's pytest plugin, on local processes and on the image.
if [ "$#" -eq 0 ]; then
    backends=(local)
    if [ "${GATEWAY_DOCKER:-1}" != 0 ]; then backends+=(docker); fi
    for backend in "${backends[@]}"; do
        GATEWAY_TEST_BACKEND=$backend "$PY" -m pytest -q -p no:cacheprovider examples/shop \
            || { echo "examples/shop failed on the $backend backend" >&2; exit 1; }
    done
fi

export GATEWAY_REQUIRE_ACCEL=1  # the C accelerators must build here; their tests must not skip
set +e
"$PY" -m pytest "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
    echo "pytest collected no tests: treating as failure" >&2
    exit 1
fi
if [ "$rc" -eq 0 ] && [ "$pure_rc" -ne 0 ]; then
    echo "the pure-Python specification tests failed (GATEWAY_PURE_PYTHON=1)" >&2
    exit "$pure_rc"
fi
exit "$rc"
