#!/usr/bin/env bash
# Build build/typetree/skiff: the installed package layout (skiff.<service> → services/<service>)
# as symlinks, so mypy resolves `skiff.apiserver` the way pyproject's package-dir does.
set -euo pipefail
cd "$(dirname "$0")/.."
root=build/typetree/skiff
rm -rf build/typetree
mkdir -p "$root"
for entry in shared/skiff/*; do
  ln -s "../../../$entry" "$root/$(basename "$entry")"
done
for svc in services/*/; do
  name=$(basename "$svc")
  [ -f "$svc/__init__.py" ] && ln -s "../../../services/$name" "$root/$name"
done
exit 0
