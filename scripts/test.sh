#!/usr/bin/env bash
# Sets up everything the test suite needs on a fresh machine, then runs it.
# Usage: scripts/test.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
"$PY" -m pip install --quiet --disable-pip-version-check -e '.[dev,spark]'
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
bash deploy/local/rabbitmq.sh install
bash deploy/local/cassandra/cassandra.sh install

# The clients' toolchains: Go and Node.js come with the machine (Debian's are too old: the Go
# client needs go 1.21+, which fetches the go.mod toolchain itself, the TypeScript one Node 20+);
# clients/test.sh checks their versions.
for tool in go node npm; do
    command -v "$tool" >/dev/null || { echo "scripts/test.sh: '$tool' is not installed" >&2; exit 1; }
done

# Generated protobuf code (Python, Go, Java, TypeScript) must match the .proto sources; the
# pinned generators are fetched on first use (scripts/gen_clients.py).
"$PY" scripts/gen_proto.py --check

"$PY" -m ruff check --quiet .

# The Go, Java and TypeScript clients against live local clusters, and the cross-language test
# (clients/test.sh); GATEWAY_CLIENTS=0 skips them (a quick Python-only run).
if [ "${GATEWAY_CLIENTS:-1}" != 0 ]; then
    bash clients/test.sh
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
exit "$rc"
