#!/usr/bin/env bash
# The Python client's static checks: ruff check over the package, setup.py and
# tests/python; ruff format --check over the package and setup.py (tests/python is
# linted, not held to ruff's format); mypy --strict over the package (it ships py.typed).
# Their settings are client/python/pyproject.toml's [tool.ruff] and [tool.mypy].
#
# Installs what is missing: python3-venv, and build/python-lint-venv holding the
# package's [lint] extra (client/python/pyproject.toml, exact pins: ruff, mypy,
# typeshed's protobuf and grpcio stubs, grpcio-tools) and tests/python/pins/newest.txt
# (numpy, whose own types mypy reads, and the grpcio and protobuf under grpcio-tools).
# The package itself is not installed there: ruff and mypy read client/python's sources.
#
# The package's _proto modules are generated when it is built (setup.py), never in the
# tree. The venv's protoc writes the two that the sources import from proto/ into
# build/python-lint/stubs/tensorop_client/_proto, where mypy finds them (MYPYPATH): the
# messages' stub tensorop_pb2.pyi, whose types it reads, and the untyped service module
# tensorop_pb2_grpc.py, which it skips (pyproject.toml says why).
#
# Needs no tensord. Idempotent and quick when everything is present: the venv is remade
# only when its pins change, the generated files replaced only when they differ, and
# ruff's and mypy's caches kept in build/python-lint.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="$root/build/python-lint-venv"
work="$root/build/python-lint"
pyproject="$root/client/python/pyproject.toml"
pins="$root/tests/python/pins/newest.txt"
. "$root/scripts/lib.sh"

apt_install python3 python3-venv

# One installer at a time (two runs of this script would race on the venv).
mkdir -p "$work"
exec 9>"$root/build/.python-lint.lock"
flock 9

# The [lint] extra, one per line; tomllib is the stdlib's (Python 3.11+).
lint="$(python3 -c '
import sys, tomllib
project = tomllib.load(open(sys.argv[1], "rb"))["project"]
print("\n".join(project["optional-dependencies"]["lint"]))
' "$pyproject")"
wanted="$(printf '%s\n' "$lint"; cat "$pins")"
if [[ "$(cat "$venv/.tensorop-stamp" 2>/dev/null)" != "$wanted" ]] || ! "$venv/bin/python" -c "" 2>/dev/null; then
  echo "== python-lint: installing the [lint] extra and pins/newest.txt into $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  mapfile -t packages <<<"$lint"
  "$venv/bin/python" -m pip --disable-pip-version-check --quiet install "${packages[@]}" -r "$pins"
  "$venv/bin/python" -m pip --disable-pip-version-check --quiet check
  echo "$wanted" >"$venv/.tensorop-stamp"
fi

# The generated modules, as setup.py's protoc call writes them (protoc mirrors the
# proto's path, tensorop/v1/). A file is replaced only when it changed, so that mypy's
# cache stays fresh.
stubs="$work/stubs/tensorop_client/_proto"
generated="$(mktemp -d)"
trap 'rm -rf "$generated"' EXIT
"$venv/bin/python" -m grpc_tools.protoc -I"$root/proto" --pyi_out="$generated" \
  --grpc_python_out="$generated" "$root/proto/tensorop/v1/tensorop.proto"
mkdir -p "$stubs"
for name in tensorop_pb2.pyi tensorop_pb2_grpc.py; do
  cmp -s "$generated/tensorop/v1/$name" "$stubs/$name" || cp "$generated/tensorop/v1/$name" "$stubs/"
done

cd "$root"
status=0
echo "== python-lint: ruff check (client/python, tests/python)"
"$venv/bin/ruff" check --config "$pyproject" --cache-dir "$work/ruff-cache" \
  client/python/tensorop_client client/python/setup.py tests/python || status=1
echo "== python-lint: ruff format --check (client/python)"
"$venv/bin/ruff" format --check --config "$pyproject" --cache-dir "$work/ruff-cache" \
  client/python/tensorop_client client/python/setup.py || status=1
echo "== python-lint: mypy --strict (client/python/tensorop_client)"
MYPYPATH="$work/stubs" "$venv/bin/mypy" --strict --config-file "$pyproject" \
  --cache-dir "$work/mypy-cache" client/python/tensorop_client || status=1
exit "$status"
