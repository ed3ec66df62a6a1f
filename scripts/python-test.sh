#!/usr/bin/env bash
# The Python client's tests against a real tensord: installs what is missing
# (python3-venv; a venv in build/python-venv holding the tensorop-client package,
# its pinned dependencies and pytest; grpcurl in build/go-bin), then runs pytest
# on tests/python. Extra arguments go to pytest.
#
# Needs a built tensord: build/bin/tensord, or TENSORD=path. GRPCURL=path uses
# that grpcurl instead of installing one.
#
# Idempotent and quick when everything is present: the package is reinstalled
# only when its sources or the proto changed, grpcurl only when it is missing or
# another version.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="$root/build/python-venv"
gobin="$root/build/go-bin"
grpcurl_version=v1.9.3

absolute() { [[ "$1" = /* ]] && echo "$1" || echo "$PWD/$1"; }
. "$root/scripts/lib.sh"

TENSORD="$(absolute "${TENSORD:-$root/build/bin/tensord}")"
if [[ ! -x "$TENSORD" ]]; then
  echo "python-test: no tensord at $TENSORD (build it first, or set TENSORD=path)" >&2
  exit 1
fi
export TENSORD

# The venv. Debian's python3 can only make one with python3-venv (ensurepip).
apt_install python3 python3-venv
if ! "$venv/bin/python" -c "" 2>/dev/null; then
  rm -rf "$venv"
  python3 -m venv "$venv"
fi

# The package, rebuilt when anything it is built from changed. The stubs come from
# proto/ at build time (client/python/setup.py); the build requirements are read
# from pyproject.toml and installed into the venv, so builds need no isolation env.
stamp="$venv/.tensorop-client-sources"
# The package reports the version of the tensord it is tested against.
TENSOROP_VERSION="$("$TENSORD" --version | cut -d' ' -f2)"
export TENSOROP_VERSION
sources="$(echo "$TENSOROP_VERSION"; cd "$root" && find proto client/python/pyproject.toml client/python/setup.py \
  client/service_config.json client/python/tensorop_client -type f \( -name '*.proto' -o -name '*.py' -o -name '*.toml' \
  -o -name '*.json' -o -name py.typed \) -not -path '*/__pycache__/*' | LC_ALL=C sort | xargs sha256sum)"
if [[ "$(cat "$stamp" 2>/dev/null)" != "$sources" ]]; then
  echo "== python-test: installing client/python into $venv"
  pip=("$venv/bin/python" -m pip --disable-pip-version-check --quiet)
  read -r -a build_requires < <("$venv/bin/python" -c '
import sys, tomllib
print(" ".join(tomllib.load(open(sys.argv[1], "rb"))["build-system"]["requires"]))
' "$root/client/python/pyproject.toml")
  "${pip[@]}" install "${build_requires[@]}"
  # setuptools never empties its build/lib: a stale one could ship deleted modules.
  rm -rf "$root/client/python/build"
  "${pip[@]}" install --no-build-isolation "$root/client/python[test]"
  rm -rf "$root/client/python/build" "$root/client/python/"*.egg-info
  echo "$sources" >"$stamp"
fi

# grpcurl, pinned; the version is stamped in so -version can tell.
if [[ -z "${GRPCURL:-}" ]]; then
  GRPCURL="$gobin/grpcurl"
  if [[ "$("$GRPCURL" -version 2>&1 || true)" != "grpcurl $grpcurl_version" ]]; then
    echo "== python-test: go install grpcurl@$grpcurl_version"
    GOBIN="$gobin" GOTOOLCHAIN=local "$(go_binary)" install \
      -ldflags "-X main.version=$grpcurl_version" \
      "github.com/fullstorydev/grpcurl/cmd/grpcurl@$grpcurl_version"
  fi
fi
GRPCURL="$(absolute "$GRPCURL")"
export GRPCURL

echo "== python-test: pytest tests/python (tensord: $TENSORD)"
cd "$root/tests/python"
exec "$venv/bin/python" -m pytest "$@"
