#!/usr/bin/env bash
# The Ray bundle scripts/device_bench.sh installs on a lent GPU machine (KS_RAY_BUNDLE=DIR):
# the lent machines have no package index, and a carry holds 64 MiB, less than ray's wheel.
#
# Usage: scripts/make_ray_bundle.sh [DIR (default .raypkg)] [PYTHON_VERSION (default 3.12)]
# Writes DIR/ray.tar.xz (the wheel unpacked, without rllib, tune, train, serve, data, llm, its
# tests, the Java jars and the dashboard's web client: about 28 MB) and the wheels ray needs that
# the lent image lacks (jsonschema, jsonschema-specifications, referencing, rpds-py).  Keep DIR
# out of git (echo "/.raypkg/" >> .git/info/exclude) and carry it.
set -euo pipefail
dir=${1:-.raypkg}; py=${2:-3.12}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir -p "$dir"
pick=(--only-binary :all: --platform manylinux2014_x86_64 --python-version "$py" -q)
python -m pip download ray --no-deps -d "$tmp/wheel" "${pick[@]}"
python -m pip download jsonschema jsonschema-specifications referencing rpds-py --no-deps -d "$dir" "${pick[@]}"
mkdir "$tmp/x"
if command -v unzip >/dev/null; then unzip -q "$tmp"/wheel/ray-*.whl -d "$tmp/x"
else (cd "$tmp/x" && python -m zipfile -e "$tmp"/wheel/ray-*.whl .); fi
chmod -R u+x "$tmp/x/ray/core/src/ray" 2>/dev/null || true  # zipfile drops the binaries' mode
(cd "$tmp/x/ray" && rm -rf jars rllib tune train serve data llm tests air/tests dashboard/client/build)
find "$tmp/x" -name "*.map" -delete
tar -C "$tmp/x" -cJf "$dir/ray.tar.xz" .
ls -la "$dir"
