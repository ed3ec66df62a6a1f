#!/usr/bin/env bash
# Validates the Kubernetes manifests in deploy/k8s: runs the validator's tests,
# then renders deploy/k8s/base and every deploy/k8s/overlays/* with kustomize's
# Go API and checks them strictly (deploy/k8s/validate/main.go). Prints one line
# per kustomization; exits nonzero on any problem. No kubectl, no cluster.
#
# Needs Go >= 1.23 (the validator's go.mod): the Go on PATH or in
# /usr/local/go/bin when new enough, else Debian's golang-1.23-go from
# bookworm-backports (scripts/lib.sh go_binary); never a downloaded toolchain
# (GOTOOLCHAIN=local). Modules come from the Go module proxy the first time and
# from the module cache after that; the binary is built into build/k8s/.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
module="$repo/deploy/k8s/validate"
. "$repo/scripts/lib.sh"
go="$(go_binary)"

export GOTOOLCHAIN=local
# -mod=readonly: go.mod and go.sum are used as committed, never updated here.
export GOFLAGS="-buildvcs=false -mod=readonly"

echo "k8s-validate: $("$go" version)"
(cd "$module" && "$go" test ./...)
mkdir -p "$repo/build/k8s"
(cd "$module" && "$go" build -o "$repo/build/k8s/validate" .)
cd "$repo"
build/k8s/validate deploy/k8s
