#!/usr/bin/env bash
# Builds the run image of the Docker run launcher (deploy/docker/Dockerfile) from this checkout:
#   bash deploy/docker/build-image.sh [TAG]        (default maple:latest)
# The project's wheels are built here with pip (constraints.txt pins them) and installed in the
# image offline. The base image is MAPLE_DOCKER_BASE when set (e.g. debian:bookworm-slim from a
# registry); otherwise a Debian bookworm root filesystem is made with debootstrap from Debian's
# own package archive and imported as maple-debian:bookworm (once: it is kept), so no image
# registry is needed. Needs a running Docker daemon; debootstrap needs root.
set -euo pipefail
cd "$(dirname "$0")/../.."
TAG="${1:-maple:latest}"
BASE="${MAPLE_DOCKER_BASE:-maple-debian:bookworm}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

if ! docker image inspect "$BASE" >/dev/null 2>&1; then
  [ "$BASE" = maple-debian:bookworm ] || { echo "no image $BASE" >&2; exit 1; }
  command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap
  debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
    bookworm "$WORK/rootfs" http://deb.debian.org/debian >"$WORK/debootstrap.log" \
    || { tail -20 "$WORK/debootstrap.log" >&2; exit 1; }
  tar -C "$WORK/rootfs" -c . | docker import - "$BASE" >/dev/null
  rm -rf "$WORK/rootfs"
fi

mkdir "$WORK/context"
cp deploy/docker/Dockerfile "$WORK/context/"
python3 -m pip wheel -q -c constraints.txt -w "$WORK/context/wheels" '.[postgres,docker]'
docker build -q --network none --build-arg BASE="$BASE" -t "$TAG" "$WORK/context"
