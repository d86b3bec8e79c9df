#!/usr/bin/env bash
# Builds the images the container tests need, from what this machine reaches (no registry):
#   gateway-base:bookworm  Debian bookworm minbase with python3 (debootstrap; built once, cached
#                          by tag: remove the tag to rebuild)
#   gateway:dev            deploy/Dockerfile on that base, from wheels built here
# Starts dockerd when none is running. Usage: scripts/build_images.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

if ! command -v dockerd >/dev/null || ! command -v debootstrap >/dev/null; then
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        docker.io debootstrap
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
echo "images: base $((t1 - t0))s, wheels $((t2 - t1))s, gateway:dev $((t3 - t2))s" >&2
