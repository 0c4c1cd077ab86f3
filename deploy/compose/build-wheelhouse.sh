#!/usr/bin/env bash
# Build the wheelhouse the Dockerfile installs Skiff from: the `skiff` wheel and every
# dependency as wheels, built on the host so the image build needs no network.
#
#   build-wheelhouse.sh [DIR]     (default deploy/compose/wheelhouse)
#
# The image's python is Debian bookworm's 3.11 (or python:3.11-slim's), so the wheels must be
# cp311: run with a Python 3.11 ($PYTHON, default python3). Old skiff wheels in DIR are removed
# first so the image always gets the work tree as it is now.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
DIR=${1:-$here/wheelhouse}
PYTHON=${PYTHON:-python3}

die() { echo "build-wheelhouse.sh: $*" >&2; exit 1; }

command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON not found; set PYTHON to a Python 3.11"
version=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
[ "$version" = 3.11 ] || die "$PYTHON is Python $version, but the image runs 3.11; set \
PYTHON to a Python 3.11 so the wheels match"
"$PYTHON" -m pip --version >/dev/null 2>&1 || die "$PYTHON has no pip"

mkdir -p "$DIR"
rm -f "$DIR"/skiff-*.whl
# Build in a copy so setuptools' build/ and *.egg-info never land in the work tree.
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
tar -C "$repo" --exclude=.git --exclude=build --exclude='*.egg-info' --exclude=.venv \
  --exclude=__pycache__ --exclude=deploy -cf - . | tar -C "$src" -xf -
"$PYTHON" -m pip wheel --quiet --wheel-dir "$DIR" "$src" \
  || die "pip wheel failed; the output above says which package"
ls "$DIR"/skiff-*.whl >/dev/null 2>&1 || die "no skiff wheel was built in $DIR"
echo "build-wheelhouse.sh: $(find "$DIR" -name "*.whl" | wc -l) wheels in $DIR" >&2
