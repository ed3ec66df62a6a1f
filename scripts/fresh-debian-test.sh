#!/usr/bin/env bash
# Proves the README's test command on a bare Debian 12: debootstraps a minimal
# bookworm root (nothing but apt, no Go, no compiler), puts a clean clone of this
# repository's HEAD in it (and ../shared beside it when this machine has one, as CI
# has: the test command then checks that tests/conformance/cases is still its
# conformance/cases), and runs scripts/test.sh there as root
# with chroot, so every package, Go toolchain and Python module the tests need
# must be installed by the project's own scripts.
#
#   scripts/fresh-debian-test.sh            test command in a new root, removed after
#   scripts/fresh-debian-test.sh CMD...     another command in it (e.g. scripts/run.sh --help)
#   scripts/fresh-debian-test.sh --deb      the .deb of build/ (cpack) installed with apt-get
#                                           in a new root: its user, tensord --version,
#                                           and the public cases served by the flags it ships
#   FRESH_ROOT=/var/tmp/x KEEP_ROOT=1 ...   reuse/keep a root (to look around afterwards)
#
# Needs root (or sudo), about 12 GB of disk and, on 2 cores, about an hour. The
# chroot runs in private mount and PID namespaces, so its /proc, /dev and /sys
# mounts vanish and every process in it dies when the command ends. Not run by
# the test command itself: it would run that command again, from scratch.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
. "$root/scripts/lib.sh"

command=("$@")
[ "${#command[@]}" -gt 0 ] || command=(scripts/test.sh)
deb_dir=""
if [ "${1:-}" = --deb ]; then
  deb_dir="$(mktemp -d)"
  (cd "$root/build" && cpack -G DEB -B "$deb_dir" >/dev/null)
  # In the root: apt-get resolves the package's Depends from Debian's archive.
  command=(bash -euo pipefail -c '
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ./tensord_*.deb >/dev/null
    getent passwd tensord
    tensord --version
    tensord --flagfile=/etc/tensord/tensord.flags --address=127.0.0.1:0 --metrics_address= \
      --http_address= --backends=cpu >/tmp/tensord.out 2>/tmp/tensord.log &
    for i in $(seq 600); do grep -q "listening on" /tmp/tensord.out && break; sleep 0.05; done
    port="$(sed -n "s/^tensord listening on .*:\([0-9]*\)$/\1/p" /tmp/tensord.out)"
    tensorctl conformance --target "127.0.0.1:$port" /work/tensorop/tests/conformance/cases | tail -n 1
    kill %1')
fi
rootfs="${FRESH_ROOT:-$(mktemp -d /var/tmp/tensorop-fresh.XXXXXX)}"
start=$SECONDS

# Never delete a root with something still mounted in it: a bind of /dev there
# would take the host's device nodes with it.
remove_root() {
  if grep -q " $rootfs/" /proc/mounts; then
    echo "fresh-debian-test: $rootfs still has mounts; not removing it" >&2
    return
  fi
  as_root rm -rf --one-file-system "$rootfs"
}
if [ -z "${KEEP_ROOT:-}" ]; then trap remove_root EXIT; fi

if [ ! -x "$rootfs/usr/bin/apt-get" ]; then
  debootstrap_bookworm "$rootfs"
fi
# What a new machine on this network gets from its image, not from the project:
# the resolver, and the local certificate authorities an egress proxy may need
# (ca-certificates, which setup.sh installs, adds them to the system bundle) with
# pip told to use that bundle.
as_root cp /etc/resolv.conf "$rootfs/etc/resolv.conf"
# debootstrap writes no /etc/hosts; an installed Debian has one naming localhost
# (gRPC's c-ares resolver asks DNS for "localhost" without it).
if [ ! -s "$rootfs/etc/hosts" ]; then
  printf '%s\n' "127.0.0.1 localhost" "::1 localhost ip6-localhost ip6-loopback" |
    as_root tee "$rootfs/etc/hosts" >/dev/null
fi
if compgen -G "/usr/local/share/ca-certificates/*" >/dev/null; then
  as_root mkdir -p "$rootfs/usr/local/share/ca-certificates"
  as_root cp -a /usr/local/share/ca-certificates/. "$rootfs/usr/local/share/ca-certificates/"
fi
if [ -f /etc/pip.conf ]; then as_root cp /etc/pip.conf "$rootfs/etc/pip.conf"; fi

# A clean clone of what is committed (as CI sees it), with shared/ beside it when
# there is one (only the drift check of tests/conformance/cases reads it).
as_root rm -rf --one-file-system "$rootfs/work"
as_root mkdir -p "$rootfs/work"
as_root git clone -q "$root" "$rootfs/work/tensorop"
if [ -d "$root/../shared" ]; then as_root cp -a "$root/../shared" "$rootfs/work/shared"; fi
if [ -n "$deb_dir" ]; then as_root cp "$deb_dir"/tensord_*.deb "$rootfs/work/tensorop/"; fi
echo "fresh-debian-test: $(git -C "$root" log -1 --format='%h %s') in $rootfs" >&2

# The environment of a new root login: no Go, no ~/.local/bin, nothing of ours.
status=0
as_root unshare --mount --pid --fork --propagation private \
  env -i TERM=dumb bash -euo pipefail -c '
    rootfs="$1"; shift
    # The root a mount point of its own, as / is on a machine: podman remounts it.
    mount --bind "$rootfs" "$rootfs"
    mount -t proc proc "$rootfs/proc"
    mount --rbind /dev "$rootfs/dev"
    mount --rbind /sys "$rootfs/sys"
    mount -t tmpfs tmpfs "$rootfs/tmp"
    exec chroot "$rootfs" /usr/bin/env -i HOME=/root CI=true LANG=C.UTF-8 \
      PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      bash -c "cd /work/tensorop && exec \"\$@\"" bash "$@"
  ' bash "$rootfs" "${command[@]}" || status=$?

echo "fresh-debian-test: '${command[*]}' exited $status after $((SECONDS - start)) s" >&2
exit "$status"
