#!/usr/bin/env bash
# Builds the images the container tests need, from what this machine reaches (no registry):
#   gateway-base:bookworm  Debian bookworm minbase with python3 (debootstrap; built once, cached
#                          by tag: remove the tag to rebuild)
#   gateway:dev            deploy/Dockerfile on that base, from wheels built here
#   gateway-rabbitmq:dev   Debian's rabbitmq-server on that base (deploy/images/rabbitmq)
#   gateway-cassandra:dev  Cassandra 5.0 on Java 17 on that base, from the Maven Central jars of
#                          deploy/local/cassandra (resolved first when missing)
# Installs Debian's docker.io, debootstrap and docker-compose when missing; starts dockerd when
# none is running. Docker's layer cache makes a rebuild of unchanged images take seconds.
# Usage: scripts/build_images.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

if ! command -v dockerd >/dev/null || ! command -v debootstrap >/dev/null \
        || ! command -v docker-compose >/dev/null; then
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        docker.io debootstrap docker-compose
fi
if ! docker info >/dev/null 2>&1; then
    (dockerd > /tmp/gateway-dockerd.log 2>&1 &)
    for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
    docker info >/dev/null 2>&1 || { echo "dockerd did not start: /tmp/gateway-dockerd.log" >&2; exit 1; }
fi

t0=$(date +%s)
if ! docker image inspect gateway-base:bookworm >/dev/null 2>&1; then
    root=$(mktemp -d /tmp/gateway-rootfs.XXXXXX)
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates bookworm \
        "$root" http://deb.debian.org/debian >/tmp/gateway-debootstrap.log 2>&1 \
        || { echo "debootstrap failed: /tmp/gateway-debootstrap.log" >&2; exit 1; }
    tar -C "$root" -c . | docker import - gateway-base:bookworm >/dev/null
    rm -rf "$root"
fi
t1=$(date +%s)

# The wheels of the gateway, its plugins and every dependency, built on the host: inside a
# container the package registries fail TLS verification, so the image installs offline.
rm -rf build/wheels
"$PY" -m pip wheel --quiet --disable-pip-version-check --wheel-dir build/wheels \
    . plugins/gateway-rabbit plugins/gateway-cassandra
t2=$(date +%s)
docker build --quiet --build-arg BASE=gateway-base:bookworm -f deploy/Dockerfile \
    -t gateway:dev . >/dev/null
t3=$(date +%s)
docker build --quiet --build-arg BASE=gateway-base:bookworm -t gateway-rabbitmq:dev \
    deploy/images/rabbitmq >/dev/null
t4=$(date +%s)
bash deploy/local/cassandra/cassandra.sh install
docker build --quiet --build-arg BASE=gateway-base:bookworm \
    -f deploy/images/cassandra/Dockerfile -t gateway-cassandra:dev deploy/local/cassandra >/dev/null
t5=$(date +%s)
# The stages and images a rebuild replaced (untagged, labelled by these Dockerfiles).
docker image prune --force --filter label=org.gateway.image >/dev/null
echo "images: base $((t1 - t0))s, wheels $((t2 - t1))s, gateway:dev $((t3 - t2))s," \
    "gateway-rabbitmq:dev $((t4 - t3))s, gateway-cassandra:dev $((t5 - t4))s" >&2
