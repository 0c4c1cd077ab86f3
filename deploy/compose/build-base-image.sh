#!/usr/bin/env bash
# Build Skiff's offline base image, for machines that can reach Debian's archive but no image
# registry: `debootstrap --variant=minbase` of bookworm with python3, etcd-server and iptables,
# then `docker import`. The Dockerfile takes it as BASE_IMAGE instead of python:3.11-slim.
#
#   build-base-image.sh [TAG]      (default skiff-base:bookworm; env SKIFF_BASE_IMAGE)
#
# Cached twice: an image with TAG already in the engine is reused as is, and the root file
# system tarball is kept in $SKIFF_BASE_CACHE (default /var/cache/skiff) so that a new engine
# imports it in seconds instead of running debootstrap again. Needs root and debootstrap.
# Env: SKIFF_DEBIAN_MIRROR (default http://deb.debian.org/debian; plain HTTP on purpose).
set -euo pipefail

TAG=${1:-${SKIFF_BASE_IMAGE:-skiff-base:bookworm}}
MIRROR=${SKIFF_DEBIAN_MIRROR:-http://deb.debian.org/debian}
CACHE=${SKIFF_BASE_CACHE:-/var/cache/skiff}
SUITE=bookworm
PACKAGES=python3,python3-venv,etcd-server,iptables
TARBALL="$CACHE/base-$SUITE-$(echo "$PACKAGES" | md5sum | cut -c1-8).tar"

die() { echo "build-base-image.sh: $*" >&2; exit 1; }
say() { echo "build-base-image.sh: $*" >&2; }

command -v docker >/dev/null 2>&1 || die "docker not found; apt-get install docker.io"
docker version --format '{{.Server.Version}}' >/dev/null 2>&1 \
  || die "no Docker engine answers (DOCKER_HOST=${DOCKER_HOST:-unset}); start one with \
deploy/compose/dockerd.sh start"

if docker image inspect "$TAG" >/dev/null 2>&1; then
  say "reusing image $TAG"
  exit 0
fi

if ! [ -s "$TARBALL" ]; then
  [ "$(id -u)" = 0 ] || die "debootstrap needs root"
  command -v debootstrap >/dev/null 2>&1 || die "debootstrap not found; apt-get install debootstrap"
  mkdir -p "$CACHE"
  root=$(mktemp -d "$CACHE/rootfs.XXXXXX")
  cleanup() {
    # debootstrap may leave proc/sys mounted inside the root when it fails.
    awk -v d="$root/" 'index($2, d) == 1 {print $2}' /proc/mounts | sort -r \
      | while read -r m; do umount -l "$m" || true; done
    rm -rf "$root"
  }
  trap cleanup EXIT
  say "debootstrap $SUITE ($PACKAGES) from $MIRROR; this takes a few minutes"
  if ! debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$root" "$MIRROR" \
      >"$CACHE/debootstrap.log" 2>&1; then
    tail -20 "$CACHE/debootstrap.log" >&2
    die "debootstrap failed (log above, full log $CACHE/debootstrap.log); check that \
$MIRROR answers over plain HTTP or set SKIFF_DEBIAN_MIRROR"
  fi
  chroot "$root" apt-get clean
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/log/*.log
  tar -C "$root" --numeric-owner -cf "$TARBALL.tmp" .
  mv "$TARBALL.tmp" "$TARBALL"
  cleanup
  trap - EXIT
fi

say "importing $TARBALL as $TAG"
docker import \
  --change 'ENV LANG=C.UTF-8' \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["/bin/bash"]' \
  "$TARBALL" "$TAG" >/dev/null
say "built $TAG"
