#!/usr/bin/env bash
# Make a Debian bookworm base image locally (debootstrap --variant=minbase, then docker import),
# for machines that cannot pull debian:bookworm-slim. Usage: docker/make-base.sh [TAG]
set -euo pipefail
tag=${1:-batchd-base:bookworm}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

if docker image inspect "$tag" >/dev/null 2>&1; then
    echo "make-base: $tag already exists"
    exit 0
fi
if ! command -v debootstrap >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
fi
rootfs=$(mktemp -d /var/tmp/batchd-base.XXXXXX)
trap 'rm -rf "$rootfs"' EXIT
debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >/dev/null
# What the official slim image also does: no package caches or lists in the image.
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
tar -C "$rootfs" -c . | docker import --change 'CMD ["bash"]' - "$tag" >/dev/null
echo "make-base: built $tag"
