#!/usr/bin/env bash
# Validates the Kubernetes manifests in deploy/k8s: runs the validator's tests,
# then renders deploy/k8s/base and every deploy/k8s/overlays/* with kustomize's
# Go API and checks them strictly (deploy/k8s/validate/main.go). Prints one line
# per kustomization; exits nonzero on any problem. No kubectl, no cluster.
# Then checks the KServe manifests in deploy/kserve against the CRD schema of a
# pinned KServe release (deploy/k8s/validate/kserve.go).
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

# KServe's published CRDs (config/crd/full of the github.com/kserve/kserve
# module source, no Go code of it built): from the Go module proxy the first
# time, the module cache after that. The sum pins the release's content.
kserve_module=github.com/kserve/kserve@v0.15.2
kserve_sum="h1:uph7Umk331fvBMrHHpTJNDt6+lf3IAuyiskaQw8wIAk="
# Outside the validator's module: a download must not touch its go.mod. A Go
# older than the module's `go` line (Debian's 1.23 against KServe's 1.24.1)
# downloads and checks the zip but exits 1 without extracting it: the sum in
# the JSON (stdout) is what counts, and the CRDs are then taken from the zip.
kserve_json="$(cd / && GOFLAGS= "$go" mod download -json "$kserve_module")" || true
if ! grep -qF "\"Sum\": \"$kserve_sum\"" <<<"$kserve_json"; then
  echo "k8s-validate: $kserve_module was not downloaded with the pinned sum $kserve_sum:" >&2
  echo "$kserve_json" >&2
  exit 1
fi
kserve_dir="$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' <<<"$kserve_json")"
if [ -z "$kserve_dir" ]; then
  kserve_zip="$(sed -n 's/^[[:space:]]*"Zip": "\(.*\)",$/\1/p' <<<"$kserve_json")"
  rm -rf "$repo/build/k8s/kserve"
  python3 -c 'import sys, zipfile
archive, into, prefix = sys.argv[1:4]
with zipfile.ZipFile(archive) as z:
    z.extractall(into, [n for n in z.namelist() if n.startswith(prefix)])' \
    "$kserve_zip" "$repo/build/k8s/kserve" "$kserve_module/config/crd/full/"
  kserve_dir="$repo/build/k8s/kserve/$kserve_module"
fi
export KSERVE_CRD_DIR="$kserve_dir/config/crd/full"

(cd "$module" && "$go" test ./...)
mkdir -p "$repo/build/k8s"
(cd "$module" && "$go" build -o "$repo/build/k8s/validate" .)
cd "$repo"
build/k8s/validate deploy/k8s
build/k8s/validate kserve deploy/kserve "$KSERVE_CRD_DIR"
