#!/usr/bin/env bash
# The Python client's tests against a real tensord: installs what is missing
# (python3-venv; the package's wheel, built by scripts/python-wheel.sh; venvs in
# build/ holding it; grpcurl in build/go-bin), then runs pytest on tests/python.
# Extra arguments go to the main venv's pytest.
#
# The venvs (pins: tests/python/pins/*.txt, exact versions):
#   build/python-venv               the wheel, its [test] extra and pins/newest.txt (the
#                                   newest grpcio, protobuf and numpy): all of tests/python;
#   build/python-venv-oldest        the wheel and pins/oldest.txt (the floors of the
#                                   package's ranges): test_packaging.py, test_core.py and
#                                   test_conformance.py;
#   build/python-venv-tritonclient  the wheel, then pins/tritonclient.txt (the newest
#                                   tritonclient[all], which takes protobuf back to 6.x), as
#                                   a user installs them one after the other, pip check'ed:
#                                   test_packaging.py (both packages imported in one process)
#                                   and test_conformance.py (the public cases).
# The last two run after the main venv's pytest when no arguments are given (a full
# run); PYTHON_TEST_VENVS="oldest tritonclient" (or a subset, or "") chooses them
# explicitly. Every venv installs the one wheel, so what is tested is what a user
# installs; the wheel is built from the sdist outside the repository
# (scripts/python-wheel.sh).
#
# Needs a built tensord: build/bin/tensord, or TENSORD=path. GRPCURL=path uses
# that grpcurl instead of installing one.
#
# Idempotent and quick when everything is present: the wheel is rebuilt only when its
# sources or the proto changed, a venv reinstalled only when the wheel or its pins
# changed (made afresh when its pins did), grpcurl only when it is missing or another
# version.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="$root/build/python-venv"
gobin="$root/build/go-bin"
pins="$root/tests/python/pins"
grpcurl_version=v1.9.3

absolute() { [[ "$1" = /* ]] && echo "$1" || echo "$PWD/$1"; }
. "$root/scripts/lib.sh"

TENSORD="$(absolute "${TENSORD:-$root/build/bin/tensord}")"
if [[ ! -x "$TENSORD" ]]; then
  echo "python-test: no tensord at $TENSORD (build it first, or set TENSORD=path)" >&2
  exit 1
fi
export TENSORD

apt_install python3 python3-venv
# The package reports the version of the tensord it is tested against.
TENSOROP_VERSION="$("$TENSORD" --version | cut -d' ' -f2)"
export TENSOROP_VERSION

if [[ -n "${PYTHON_TEST_VENVS+set}" ]]; then
  extra_venvs="$PYTHON_TEST_VENVS"
elif [[ $# -gt 0 ]]; then
  extra_venvs=""
else
  extra_venvs="oldest tritonclient"
fi
for name in $extra_venvs; do
  [[ -f "$pins/$name.txt" && "$name" != newest ]] || {
    echo "python-test: PYTHON_TEST_VENVS: no venv \"$name\" (oldest, tritonclient)" >&2
    exit 1
  }
done

# One installer at a time (two runs of this script would race on the venvs).
mkdir -p "$root/build"
exec 9>"$root/build/.python-test.lock"
flock 9

wheel="$("$root/scripts/python-wheel.sh")"
wheel_sum="$(sha256sum <"$wheel" | cut -d' ' -f1)"
pip_in() { "$1/bin/python" -m pip --disable-pip-version-check --quiet "${@:2}"; }

# setup_venv VENV PINS INSTALL: VENV holding the wheel and PINS, installed by the
# function INSTALL (called with VENV and PINS) unless VENV's stamp says it already is.
# A venv whose pins changed is made afresh; one whose wheel changed only gets the new
# wheel (the old one uninstalled first: a rebuilt wheel can carry the same version).
# pip check then checks that every installed package's requirements hold.
setup_venv() {
  local venv=$1 pins_file=$2 install=$3 pins_sum want
  pins_sum="$(sha256sum <"$pins_file" | cut -d' ' -f1)"
  want="$pins_sum $wheel_sum"
  if [[ "$(cat "$venv/.tensorop-stamp" 2>/dev/null)" == "$want" ]] && "$venv/bin/python" -c "" 2>/dev/null; then
    return 0
  fi
  echo "== python-test: installing $(basename "$wheel") into $venv (${pins_file#"$root"/})"
  if [[ "$(cut -d' ' -f1 "$venv/.tensorop-stamp" 2>/dev/null)" == "$pins_sum" ]] &&
    "$venv/bin/python" -c "" 2>/dev/null; then
    pip_in "$venv" uninstall --yes tensorop-client
  else
    rm -rf "$venv"
    python3 -m venv "$venv"
  fi
  "$install" "$venv" "$pins_file"
  pip_in "$venv" check
  echo "$want" >"$venv/.tensorop-stamp"
}
install_main() { pip_in "$1" install "$wheel[test]" -r "$2"; }
install_oldest() { pip_in "$1" install "$wheel" -r "$2"; }
install_tritonclient() {
  # Issue 46's order: the package with its newest dependencies (protobuf 7), then
  # tritonclient[all], which takes protobuf back below 7.
  pip_in "$1" install "$wheel"
  pip_in "$1" install -r "$2"
}
setup_venv "$venv" "$pins/newest.txt" install_main
for name in $extra_venvs; do
  setup_venv "$root/build/python-venv-$name" "$pins/$name.txt" "install_$name"
done

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
exec 9>&-

# "grpcio 1.85.3, protobuf 7.36.2, numpy 2.4.6" (and tritonclient's, where it is).
versions() {
  "$1/bin/python" -c '
from importlib import metadata
found = []
for name in ("grpcio", "protobuf", "numpy", "tritonclient"):
    try:
        found.append(f"{name} {metadata.version(name)}")
    except metadata.PackageNotFoundError:
        pass
print(", ".join(found))'
}

cd "$root/tests/python"
status=0
echo "== python-test: pytest tests/python in $venv ($(versions "$venv"); tensord: $TENSORD)"
"$venv/bin/python" -m pytest "$@" || status=1
for name in $extra_venvs; do
  case "$name" in
    oldest) tests=(test_packaging.py test_core.py test_conformance.py) ;;
    tritonclient) tests=(test_packaging.py test_conformance.py) ;;
  esac
  extra="$root/build/python-venv-$name"
  echo "== python-test: pytest ${tests[*]} in $extra ($(versions "$extra"))"
  "$extra/bin/python" -m pytest -q "${tests[@]}" || status=1
done
exit "$status"
