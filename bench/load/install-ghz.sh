#!/usr/bin/env bash
# Installs ghz, the gRPC load tester, pinned to v0.121.0, with `go install` from
# the Go module proxy into $GHZ_BIN_DIR (default ~/.local/bin). Idempotent: when
# that binary is already ghz v0.121.0 it does nothing. Prints the binary's path.
#
# Needs Go >= 1.23 (ghz's go.mod): the Go on PATH when new enough, else Debian's
# golang-1.23-go from bookworm-backports (scripts/lib.sh go_binary), never a
# downloaded toolchain.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/../../scripts/lib.sh"

module="github.com/bojand/ghz"
version="v0.121.0"
bin_dir="${GHZ_BIN_DIR:-$HOME/.local/bin}"
ghz="$bin_dir/ghz"

# `ghz --version` is empty for a `go install` build; the module version is
# recorded in the binary's build info instead.
installed_version() {
  [ -x "$ghz" ] || return 0
  "$go" version -m "$ghz" 2>/dev/null | awk -v m="$module" '$1 == "mod" && $2 == m { print $3 }'
}

go="$(go_binary)"

if [ "$(installed_version)" != "$version" ]; then
  echo "install-ghz: building $module/cmd/ghz@$version into $bin_dir" >&2
  mkdir -p "$bin_dir"
  GOBIN="$bin_dir" GOTOOLCHAIN=local GOFLAGS=-buildvcs=false \
    "$go" install "$module/cmd/ghz@$version" >&2
  if [ "$(installed_version)" != "$version" ]; then
    echo "install-ghz: $ghz is not ghz $version after go install" >&2
    exit 1
  fi
fi
echo "$ghz"
