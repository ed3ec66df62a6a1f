#!/usr/bin/env bash
# Builds the Python client's sdist and wheel (python -m build client/python) into
# build/python-dist and prints the wheel's path on stdout (everything else goes to
# stderr), for scripts/python-test.sh and bench/bulk/run.sh to install.
#
# python -m build makes the sdist first and builds the wheel from it, unpacked in a
# temporary directory outside the repository: the wheel is what a user gets from the
# sdist, and the sdist builds with nothing of the repository beside it (it carries the
# proto, the service config and its version; client/python/setup.py).
#
# The build requirements (client/python/pyproject.toml's [build-system], grpcio-tools
# pinned there: its protoc sets the floors of the protobuf and grpcio ranges) and
# `build` live in a venv of their own, build/python-build-venv, apart from the test
# venvs (that grpcio-tools wants an older protobuf than the main venv's). The version is
# $TENSOROP_VERSION when set (python-test.sh passes its tensord's), else setup.py's.
#
# Quick when nothing changed: the venv is remade only when the build requirements
# change, the wheel only when anything it is built from (or the version) does.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="$root/build/python-build-venv"
dist="$root/build/python-dist"
build_version=1.6.1
. "$root/scripts/lib.sh"

{
  # One build at a time (scripts/python-test.sh and bench/bulk/run.sh both call this).
  mkdir -p "$root/build"
  exec 8>"$root/build/.python-wheel.lock"
  flock 8
  apt_install python3 python3-venv
  # [build-system] requires, one per line; tomllib is the stdlib's (Python 3.11+).
  requires="$(python3 -c '
import sys, tomllib
print("\n".join(tomllib.load(open(sys.argv[1], "rb"))["build-system"]["requires"]))
' "$root/client/python/pyproject.toml")"
  wanted="$(printf '%s\n' "$requires" "build==$build_version")"
  if [[ "$(cat "$venv/.requires" 2>/dev/null)" != "$wanted" ]] || ! "$venv/bin/python" -c "" 2>/dev/null; then
    echo "== python-wheel: build venv $venv"
    rm -rf "$venv"
    python3 -m venv "$venv"
    mapfile -t packages <<<"$wanted"
    "$venv/bin/python" -m pip --disable-pip-version-check --quiet install "${packages[@]}"
    echo "$wanted" >"$venv/.requires"
  fi

  sources="$(echo "${TENSOROP_VERSION:-}"; echo "$wanted"; cd "$root" && find proto/tensorop \
    client/python/pyproject.toml client/python/setup.py client/python/README.md \
    client/service_config.json client/python/tensorop_client -type f \( -name '*.proto' \
    -o -name '*.py' -o -name '*.toml' -o -name '*.json' -o -name '*.md' -o -name py.typed \) \
    -not -path '*/__pycache__/*' | LC_ALL=C sort | xargs sha256sum)"
  if [[ "$(cat "$dist/.sources" 2>/dev/null)" != "$sources" ]] || ! compgen -G "$dist/*.whl" >/dev/null; then
    echo "== python-wheel: python -m build client/python -> $dist"
    rm -rf "$dist"
    # setuptools never empties its build/lib: a stale one could ship deleted modules.
    rm -rf "$root/client/python/build" "$root/client/python/"*.egg-info
    # --no-isolation: the requirements are this venv's (build checks them).
    "$venv/bin/python" -m build --no-isolation --outdir "$dist" "$root/client/python" >&2
    rm -rf "$root/client/python/build" "$root/client/python/"*.egg-info
    echo "$sources" >"$dist/.sources"
  fi
} >&2

wheels=("$dist"/*.whl)
if [[ ${#wheels[@]} -ne 1 ]]; then
  echo "python-wheel: expected one wheel in $dist, found: ${wheels[*]}" >&2
  exit 1
fi
echo "${wheels[0]}"
