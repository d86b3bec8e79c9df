#!/usr/bin/env bash
# Builds and tests the Go, Java and TypeScript clients, then the cross-language test.
# Usage: clients/test.sh            (scripts/test.sh runs it; GATEWAY_CLIENTS=0 skips it there)
#
# Each suite starts its own local 3-node cluster through clients/testing/cluster.py (Python:
# the gateway package must be importable). Dependencies come through each toolchain's own
# client into its default cache (Go modules: $(go env GOMODCACHE); Maven: ~/.m2, protoc and
# protoc-gen-grpc-java included, with which the build generates the Java stubs; npm: ~/.npm),
# so a second run downloads nothing. Prints how long each step took.
set -euo pipefail
cd "$(dirname "$0")"
export PYTHON=${PYTHON:-python3}

need() {  # need TOOL MIN_VERSION VERSION_COMMAND...
    local tool=$1 want=$2 have; shift 2
    if ! command -v "$tool" >/dev/null; then
        echo "clients/test.sh: '$tool' is not installed (needed: $tool $want or later)" >&2
        exit 1
    fi
    have=$("$@" 2>&1 | sed 's/\x1b\[[0-9;]*m//g' | grep -oE '[0-9]+(\.[0-9]+)*' | head -1)
    if ! printf '%s\n%s\n' "$want" "$have" | sort -V -C; then
        echo "clients/test.sh: $tool $have is too old (needed: $want or later)" >&2
        exit 1
    fi
}
need go 1.21 sh -c "go env GOVERSION | sed 's/^go//'"  # go.mod asks for 1.26: go 1.21+ fetches that toolchain itself
need java 17 sh -c "java -version 2>&1 | head -1 | sed -E 's/[^\"]*\"([0-9.]+).*/\1/'"
need mvn 3.8 sh -c "mvn -B -v | grep 'Apache Maven'"  # protobuf-maven-plugin 3.x needs Maven 3.8
need node 20 node --version

timings=()
step() {  # step NAME COMMAND...
    local name=$1 start=$SECONDS; shift
    echo "=== clients: $name"
    "$@"
    timings+=("$name: $((SECONDS - start)) s")
}

go_suite() {
    cd go
    go mod download
    if [ -n "$(gofmt -l .)" ]; then
        echo "clients/go: not gofmt-formatted: $(gofmt -l .)" >&2
        return 1
    fi
    go vet ./...
    go test -count=1 ./...
}
java_suite() { cd java && mvn -B -ntp verify; }
ts_suite() { cd typescript && npm ci --no-audit --no-fund && npm test; }

step "Go (go test)" bash -c "$(declare -f go_suite); go_suite"
step "Java (Maven Surefire)" bash -c "$(declare -f java_suite); java_suite"
step "TypeScript (node --test)" bash -c "$(declare -f ts_suite); ts_suite"
step "cross-language (pytest)" "$PYTHON" -m pytest testing -q -p no:cacheprovider
printf 'clients: %s\n' "${timings[@]}"
