#!/usr/bin/env bash
# Builds the container image from the Dockerfile with podman and tests it on this
# machine (no Docker engine here: podman builds, buildah runs; docs/deploy.md):
#   1. installs podman, buildah, debootstrap and procps (pgrep, ps) if missing;
#   2. makes the debian:bookworm base image with debootstrap if missing;
#   3. builds localhost/tensorop:test (layers cached: an unchanged tree takes seconds);
#   4. checks the image's config (user, ports, health check, entrypoint) and that
#      its binaries find all their libraries;
#   5. starts the image's tensord with buildah as uid 10001, waits until the image's
#      own HEALTHCHECK command passes, runs the public conformance cases against it
#      with the host's tensorctl (TENSORCTL=path, default build/bin/tensorctl) on the
#      CPU and through PoCL (unary and streamed), then stops it with SIGTERM and
#      expects exit status 0, a failing health check, and nothing written outside
#      /tmp (Kubernetes runs the image with a read-only root filesystem);
#   6. runs the TLS path once: certificates made on the host with openssl and
#      copied into the container's /tmp, tensord with TLS, mutual TLS, a token
#      file and the plaintext health listener (the image's HEALTHCHECK passes
#      there), the public cases over TLS with a client certificate and a token,
#      and SIGTERM again.
# The image stays (it is the layer cache of the next run); dangling images of
# earlier builds are pruned. Prints "container-test: ok" at the end; exits nonzero
# on any failure.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cases="$root/tests/conformance/cases"
image="localhost/tensorop:test"
build_cache_image="localhost/tensorop:test-build"
base="docker.io/library/debian:bookworm"
tensorctl="${TENSORCTL:-$root/build/bin/tensorctl}"
start=$SECONDS

section() { echo "== container: $* ($((SECONDS - start)) s)"; }
fail() { echo "container-test: FAILED: $*" >&2; exit 1; }
alive() { [ -n "$1" ] && [ -d "/proc/$1" ]; }

. "$root/scripts/lib.sh"

# ------------------------------------------------------------------ tools
section "tools (podman, buildah, debootstrap, python3, procps)"
# procps: pgrep and ps find the container's tensord and its uid below.
apt_install podman buildah debootstrap python3 procps
if [ "$(id -u)" -ne 0 ]; then
  podman() { sudo podman "$@"; }
  buildah() { sudo buildah "$@"; }
fi

# ------------------------------------------------------------- base image
section "base image $base"
if podman image exists "$base"; then
  echo "present"
else
  rootfs="$(mktemp -d /var/tmp/tensorop-rootfs.XXXXXX)"
  trap 'as_root rm -rf --one-file-system "$rootfs"' EXIT
  debootstrap_bookworm "$rootfs" || fail "debootstrap"
  as_root tar -C "$rootfs" -c . |
    podman import \
      --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'CMD ["bash"]' - localhost/debian:bookworm
  podman tag localhost/debian:bookworm "$base"
  as_root rm -rf "$rootfs"
  trap - EXIT
fi

# ------------------------------------------------------------------ build
# --format docker: the OCI image format has no HEALTHCHECK (podman drops it).
# The build stage gets a tag of its own so that pruning dangling images below
# keeps its layers (the compiled binaries) as the cache of the next run.
section "build $image"
version="$(cmake -DSOURCE_DIR="$root" -P "$root/cmake/version.cmake")"
build_flags=(--isolation=chroot --network=host --format docker --layers -f "$root/Dockerfile"
             --build-arg "TENSOROP_VERSION=$version")
# A build that was interrupted (a killed run) leaves buildah working containers
# behind; they pin their images, and the prune below would then fail on them.
buildah rm --all >/dev/null
podman build "${build_flags[@]}" --target build -t "$build_cache_image" "$root"
podman build "${build_flags[@]}" -t "$image" "$root"
podman image prune -f >/dev/null
podman images --filter reference=localhost/tensorop

# --------------------------------------------------------- image config
section "image config"
inspect="$(podman image inspect "$image")"
config_field() {
  python3 -c '
import json, sys
image = json.loads(sys.stdin.read())[0]
config = image.get("Config") or {}
field = sys.argv[1]
if field == "Healthcheck":
    value = (image.get("Healthcheck") or image.get("HealthCheck")
             or config.get("Healthcheck") or {})
    print("\n".join(value.get("Test") or []))
elif field in ("Entrypoint", "Cmd", "Env"):
    print("\n".join(config.get(field) or []))
elif field == "ExposedPorts":
    print("\n".join(sorted(config.get(field) or {})))
else:
    print(config.get(field) or "")
' "$1" <<<"$inspect"
}
user="$(config_field User)"
mapfile -t entrypoint < <(config_field Entrypoint)
mapfile -t healthcheck < <(config_field Healthcheck)
mapfile -t env < <(config_field Env)
ports="$(config_field ExposedPorts | tr '\n' ' ')"
echo "User:         $user"
echo "ExposedPorts: $ports"
echo "Entrypoint:   ${entrypoint[*]}"
echo "Cmd:          $(config_field Cmd | tr '\n' ' ')"
echo "Healthcheck:  ${healthcheck[*]}"
echo "Env:          ${env[*]}"
case "$user" in 10001:10001 | tensord | tensord:tensord) ;; *) fail "image user is '$user', want 10001:10001";; esac
for port in 50051/tcp 9464/tcp 8000/tcp; do
  grep -qw "$port" <<<"$ports" || fail "image does not expose $port"
done
[ "${#entrypoint[@]}" -gt 0 ] || fail "image has no ENTRYPOINT"
[ "${healthcheck[0]:-}" = "CMD" ] && [ "${healthcheck[1]:-}" = "/usr/local/bin/tensorctl" ] &&
  [ "${healthcheck[2]:-}" = "health" ] ||
  fail "image HEALTHCHECK is '${healthcheck[*]}', want CMD /usr/local/bin/tensorctl health ..."
grep -qx "POCL_CACHE_DIR=/tmp/pocl" < <(printf '%s\n' "${env[@]}") ||
  fail "image does not set POCL_CACHE_DIR=/tmp/pocl"
[ -x "$tensorctl" ] || fail "no host tensorctl at $tensorctl (build it: scripts/build.sh, or set TENSORCTL)"
[ -d "$cases" ] || fail "no conformance cases at $cases"

# ------------------------------------------------------------- container
container=""
server_pid=""
buildah_pid=""
log="$(mktemp)"
cleanup() {
  if alive "$server_pid"; then
    as_root kill -KILL "$server_pid" 2>/dev/null || true
  fi
  if [ -n "$buildah_pid" ]; then wait "$buildah_pid" 2>/dev/null || true; fi
  if [ -n "$container" ]; then buildah rm "$container" >/dev/null 2>&1 || true; fi
  rm -f "$log"
}
trap cleanup EXIT
container="$(buildah from "$image")"
# buildah run does not apply ENTRYPOINT/CMD (given below from the image's config);
# it does apply the image's Env and User, but pass them too so the test does not
# depend on that.
run_flags=(--isolation chroot --network host --user "$user")
for variable in "${env[@]}"; do run_flags+=(--env "$variable"); done
in_container() { buildah run "${run_flags[@]}" "$container" -- "$@"; }
# The health check, bounded (the image's HEALTHCHECK allows 3 s).
health_check() { as_root timeout 20 buildah run "${run_flags[@]}" "$container" -- "${health[@]}"; }

# `podman run` cannot start containers here (crun cannot set rlimits), so the
# image's entrypoint runs through buildah like everything below.
section "version"
image_version="$(in_container "${entrypoint[@]}" --version)"
[ "$image_version" = "tensord $version" ] || fail "the image says \"$image_version\", not tensord $version"
echo "$image_version"

section "libraries inside the image"
for binary in /usr/local/bin/tensord /usr/local/bin/tensorctl; do
  libs="$(in_container ldd "$binary")" || fail "ldd $binary"
  if grep -q "not found" <<<"$libs"; then
    echo "$libs" >&2
    fail "$binary: missing libraries in the image"
  fi
  echo "$binary: $(grep -c '=>' <<<"$libs") libraries, none missing"
done

section "start tensord (image entrypoint, uid ${user}) on 127.0.0.1:0"
in_container "${entrypoint[@]}" --address=127.0.0.1:0 --metrics_address=127.0.0.1:0 --http_address= \
  >"$log" 2>&1 &
buildah_pid=$!
server_log() { echo "-- tensord log:" >&2; cat "$log" >&2; }
port="$(tensord_port "$log" "$buildah_pid")" || { server_log; fail "tensord did not start"; }

# The image's HEALTHCHECK, run inside the container with the test's port.
health=()
for arg in "${healthcheck[@]:1}"; do health+=("${arg/%:50051/:$port}"); done
echo "health check: ${health[*]}"
healthy=0
out=""
deadline=$(( SECONDS + 60 ))
while [ "$SECONDS" -lt "$deadline" ]; do
  if ! alive "$buildah_pid"; then
    server_log
    fail "tensord exited during startup"
  fi
  if out="$(health_check 2>&1)"; then
    healthy=1
    echo "$out"
    break
  fi
  sleep 1
done
if [ "$healthy" -ne 1 ]; then
  echo "last health check: $out" >&2
  server_log
  fail "tensord not healthy after 60 s"
fi

# The server process itself (buildah run may not forward signals): its command
# line starts with the image's entrypoint (/usr/local/bin/tensord, not a host
# tensord).
server_pid="$(pgrep -f -x -- "${entrypoint[*]} --address=127\.0\.0\.1:0 .*" | head -n 1 || true)"
[ -n "$server_pid" ] || { server_log; fail "cannot find the tensord process"; }
server_uid="$(ps -o uid= -p "$server_pid" | tr -d ' ')"
echo "tensord pid $server_pid runs as uid $server_uid"
[ "$server_uid" = "10001" ] || fail "tensord runs as uid $server_uid, want 10001"
grep -E '"event":"device"' "$log" || true

# ----------------------------------------------------------- conformance
status=0
for run in "cpu" "cpu --stream" "opencl" "opencl --stream"; do
  read -r backend mode <<<"$run"
  section "conformance --backend $backend ${mode:-(unary)}"
  # shellcheck disable=SC2086
  if ! out="$(timeout 300 "$tensorctl" conformance --target "127.0.0.1:$port" --backend "$backend" $mode \
                "$cases" 2>&1)"; then
    status=1
  fi
  echo "$out" | tail -n 20
  grep -Eq '^conformance: [1-9][0-9]* passed, 0 failed' <<<"$out" || status=1
done
if [ "$status" -ne 0 ]; then
  server_log
  fail "conformance cases failed against the container"
fi
# A failing device hands its requests to the CPU, so passing cases alone do not
# prove PoCL works in the image: the request log must show them on the device.
on_device="$(grep -c '"backend":"opencl:' "$log" || true)"
echo "requests run on an OpenCL device: $on_device"
if [ "$on_device" -eq 0 ] || grep -q '"event":"device_failure"' "$log"; then
  server_log
  fail "the OpenCL backend did not run on PoCL in the image"
fi

# -------------------------------------------------------------- shutdown
section "SIGTERM tensord"
as_root kill -TERM "$server_pid"
exit_status=0
deadline=$(( SECONDS + 45 ))
while alive "$buildah_pid" && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.2; done
if alive "$buildah_pid"; then
  server_log
  fail "tensord still running 45 s after SIGTERM"
fi
wait "$buildah_pid" || exit_status=$?
buildah_pid=""
if [ "$exit_status" -ne 0 ]; then
  server_log
  fail "tensord exited with status $exit_status after SIGTERM, want 0"
fi
echo "tensord exited 0"
# The HEALTHCHECK must also fail when nothing serves (exit 1 by its contract).
health_status=0
out="$(health_check 2>&1)" || health_status=$?
# (buildah adds "subprocess exited with status N" and "Error: exit status N".)
out="$(grep -Ev '^(subprocess exited|Error: exit status)' <<<"$out" || true)"
echo "health check with the server gone: exit $health_status: $out"
[ "$health_status" -eq 1 ] || fail "health check exits $health_status without a server, want 1"

# Kubernetes runs the image with a read-only root filesystem and an emptyDir at
# /tmp: the server (PoCL's kernel cache included) must write nowhere else.
section "files written outside /tmp"
changes="$(podman diff "$container")" || fail "podman diff $container"
echo "written (allowed: /tmp, /run):"
echo "$changes" | grep -E ' /tmp(/[^/]+){0,2}$' | head -n 5 || true
written="$(grep -Ev ' /(tmp|run)(/.*)?$' <<<"$changes" || true)"
if [ -n "$written" ]; then
  echo "$written" >&2
  fail "tensord wrote outside /tmp (the root filesystem is read-only in Kubernetes)"
fi
echo "nothing written outside /tmp"

# ------------------------------------------------------------------- TLS
# As the tls Kubernetes overlay runs it, with the certificate files where a
# Secret would be mounted (here copied in) and probes on the health port.
section "TLS: certificates (openssl on the host)"
command -v openssl >/dev/null || fail "no openssl on the host (scripts/setup.sh installs it)"
pki="$(mktemp -d)"
trap 'cleanup; rm -rf "$pki"' EXIT
ossl() { openssl "$@" >/dev/null 2>&1 || fail "openssl $*"; }
ossl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -keyout "$pki/ca.key" -out "$pki/ca.crt" -subj "/CN=container-test CA"
ossl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$pki/tls.key" \
  -out "$pki/tls.csr" -subj "/CN=tensord" -addext "subjectAltName=DNS:localhost,IP:127.0.0.1"
ossl x509 -req -in "$pki/tls.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
  -copy_extensions copy -days 2 -out "$pki/tls.crt"
ossl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$pki/client.key" \
  -out "$pki/client.csr" -subj "/CN=container-test"
ossl x509 -req -in "$pki/client.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
  -days 2 -out "$pki/client.crt"
openssl rand -hex 32 >"$pki/client.token"
echo "container-test:$(cat "$pki/client.token")" >"$pki/tokens"
mkdir "$pki/mount"
cp "$pki/tls.crt" "$pki/tls.key" "$pki/ca.crt" "$pki/tokens" "$pki/mount/"
buildah copy --chown 10001:10001 "$container" "$pki/mount" /tmp/tls >/dev/null

section "TLS: start tensord on 127.0.0.1:0 (TLS only), health on 127.0.0.1:0"
in_container "${entrypoint[@]}" --address=127.0.0.1:0 --metrics_address= --http_address= \
  --tls_cert_file=/tmp/tls/tls.crt --tls_key_file=/tmp/tls/tls.key \
  --tls_client_ca_file=/tmp/tls/ca.crt --auth_token_file=/tmp/tls/tokens \
  --health_address=127.0.0.1:0 >"$log" 2>&1 &
buildah_pid=$!
port="$(tensord_port "$log" "$buildah_pid")" || { server_log; fail "tensord (TLS) did not start"; }
health_port="$(tensord_port "$log" "$buildah_pid" health)" ||
  { server_log; fail "tensord (TLS) did not start its health listener"; }
echo "TLS port $port, health port $health_port"
health=()
for arg in "${healthcheck[@]:1}"; do health+=("${arg/%:50051/:$health_port}"); done
echo "health check: ${health[*]}"
healthy=0
deadline=$(( SECONDS + 60 ))
while [ "$SECONDS" -lt "$deadline" ]; do
  alive "$buildah_pid" || { server_log; fail "tensord (TLS) exited during startup"; }
  if out="$(health_check 2>&1)"; then healthy=1; echo "$out"; break; fi
  sleep 1
done
[ "$healthy" -eq 1 ] || { echo "last health check: $out" >&2; server_log; fail "tensord (TLS) not healthy after 60 s"; }
server_pid="$(pgrep -f -x -- "${entrypoint[*]} --address=127\.0\.0\.1:0 .*" | head -n 1 || true)"
[ -n "$server_pid" ] || { server_log; fail "cannot find the tensord (TLS) process"; }

section "TLS: conformance over mutual TLS with a token"
if ! out="$(timeout 300 "$tensorctl" conformance --target "127.0.0.1:$port" --backend cpu \
              --ca_file "$pki/ca.crt" --cert_file "$pki/client.crt" --key_file "$pki/client.key" \
              --token_file "$pki/client.token" "$cases" 2>&1)"; then
  echo "$out" | tail -n 20
  server_log
  fail "conformance over TLS failed against the container"
fi
echo "$out" | tail -n 1
grep -Eq '^conformance: [1-9][0-9]* passed, 0 failed' <<<"$out" || fail "conformance over TLS"
# Plaintext to the TLS port is refused; the token never reaches the log.
if "$tensorctl" health --target "127.0.0.1:$port" >/dev/null 2>&1; then
  fail "a plaintext health check passed on the TLS port"
fi
grep -q '"identity":"token:container-test cert:' "$log" || { server_log; fail "no authenticated identity in the request log"; }
if grep -qF "$(cat "$pki/client.token")" "$log"; then fail "the token appears in the log"; fi

section "TLS: SIGTERM tensord"
as_root kill -TERM "$server_pid"
deadline=$(( SECONDS + 45 ))
while alive "$buildah_pid" && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.2; done
alive "$buildah_pid" && { server_log; fail "tensord (TLS) still running 45 s after SIGTERM"; }
exit_status=0
wait "$buildah_pid" || exit_status=$?
buildah_pid=""
[ "$exit_status" -eq 0 ] || { server_log; fail "tensord (TLS) exited with status $exit_status after SIGTERM"; }
echo "tensord (TLS) exited 0"

section "done"
echo "container-test: ok ($((SECONDS - start)) s)"
