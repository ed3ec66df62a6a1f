#!/usr/bin/env bash
# Validates the Kubernetes manifests in deploy/k8s: runs the validator's tests,
# then renders deploy/k8s/base and every deploy/k8s/overlays/* with kustomize's
# Go API and checks them strictly (deploy/k8s/validate/main.go). Prints one line
# per kustomization; exits nonzero on any problem. No kubectl, no cluster.
#
# Needs Go >= 1.23 (the validator's go.mod), from PATH or /usr/local/go/bin;
# Debian 12's golang-go (1.19) is too old, and no newer toolchain is downloaded
# (GOTOOLCHAIN=local). Modules come from the Go module proxy the first time and
# from the module cache after that; the binary is built into build/k8s/.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
module="$repo/deploy/k8s/validate"
min_minor=23

# "1.26.8" from "go1.26.8" (or "go1.26rc1"); empty if $1 is not a working go.
go_version() {
  local v
  v="$("$1" env GOVERSION 2>/dev/null)" || return 0
  v="${v#go}"
  echo "${v%%[!0-9.]*}"
}

go_ok() {
  local v major minor
  v="$(go_version "$1")"
  [ -n "$v" ] || return 1
  major="${v%%.*}"
  minor="${v#*.}"
  minor="${minor%%.*}"
  [ "$major" -gt 1 ] || { [ "$major" -eq 1 ] && [ "$minor" -ge "$min_minor" ]; }
}

go=""
for candidate in "$(command -v go 2>/dev/null || true)" /usr/local/go/bin/go; do
  if [ -n "$candidate" ] && [ -x "$candidate" ] && go_ok "$candidate"; then
    go="$candidate"
    break
  fi
done
if [ -z "$go" ]; then
  found="$(command -v go 2>/dev/null || true)"
  echo "k8s-validate: needs Go >= 1.$min_minor (on PATH or in /usr/local/go/bin);" \
       "found ${found:-none}${found:+ (go $(go_version "$found"))}" >&2
  exit 1
fi

export GOTOOLCHAIN=local
# -mod=readonly: go.mod and go.sum are used as committed, never updated here.
export GOFLAGS="-buildvcs=false -mod=readonly"

echo "k8s-validate: $("$go" version)"
(cd "$module" && "$go" test ./...)
mkdir -p "$repo/build/k8s"
(cd "$module" && "$go" build -o "$repo/build/k8s/validate" .)
cd "$repo"
build/k8s/validate deploy/k8s
