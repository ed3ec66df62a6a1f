#!/usr/bin/env bash
# The Debian package: cpack -G DEB from BUILD_DIR, its control fields and
# contents (dpkg-deb --info / --contents), systemd-analyze verify on its unit
# (warnings fail too), and its tensord, unpacked, reporting the build's
# version and serving a public case with the flags file it ships.
# Installing it with apt-get in a fresh Debian root: scripts/fresh-debian-test.sh --deb.
#   deb_test.sh BUILD_DIR CASES_DIR
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
. "$root/scripts/lib.sh"
build="$(cd "$1" && pwd)"
cases="$2"
bench_scratch  # $work, and $servers stopped on exit (scripts/lib.sh)
fail() { echo "deb: FAILED: $*" >&2; exit 1; }

version="$("$build/bin/tensord" --version | cut -d' ' -f2)"  # the build's
arch="$(dpkg --print-architecture)"
(cd "$build" && cpack -G DEB -B "$work/out" >"$work/cpack.log") || { cat "$work/cpack.log" >&2; fail "cpack"; }
deb="$work/out/tensord_${version}_${arch}.deb"
[ -f "$deb" ] || fail "no $(basename "$deb"); cpack made: $(ls "$work/out")"

info="$(dpkg-deb --info "$deb")"
field() { dpkg-deb --field "$deb" "$1"; }
[ "$(field Package)" = tensord ] || fail "Package: $(field Package)"
[ "$(field Version)" = "$version" ] || fail "Version: $(field Version), not $version"
for dependency in adduser libgrpc++1.51 libprotobuf32 libabsl20220623 libtbb12 ocl-icd-libopencl1; do
  grep -q "$dependency" <<<"$(field Depends)" || fail "Depends lacks $dependency: $(field Depends)"
done
grep -q '^ *[0-9]* bytes, *[0-9]* lines *conffiles' <<<"$info" || fail "no conffiles in: $info"
contents="$(dpkg-deb --contents "$deb" | awk '{print $NF}')"
for path in ./usr/bin/tensord ./usr/bin/tensorctl ./usr/lib/systemd/system/tensord.service \
            ./etc/tensord/tensord.flags; do
  grep -qx "$path" <<<"$contents" || fail "no $path in the package: $contents"
done
dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles | grep -qx /etc/tensord/tensord.flags ||
  fail "tensord.flags is not a conffile"

# The unit as installed, its ExecStart pointed at the unpacked binary
# (verify checks that the program exists).
unpacked="$work/root"
dpkg-deb -x "$deb" "$unpacked"
sed "s#/usr/bin/tensord#$unpacked/usr/bin/tensord#" "$unpacked/usr/lib/systemd/system/tensord.service" \
  >"$work/tensord.service"
verify="$(systemd-analyze verify "$work/tensord.service" 2>&1)" || fail "systemd-analyze verify: $verify"
[ -z "$verify" ] || fail "systemd-analyze verify warned: $verify"

[ "$("$unpacked/usr/bin/tensord" --version)" = "tensord $version" ] || fail "tensord --version"
[ "$("$unpacked/usr/bin/tensorctl" --version)" = "tensorctl $version" ] || fail "tensorctl --version"
# The shipped flags, then loopback ports of the kernel's choosing (later flags win).
"$unpacked/usr/bin/tensord" --flagfile="$unpacked/etc/tensord/tensord.flags" \
  --address=127.0.0.1:0 --metrics_address= --http_address= --backends=cpu \
  >"$work/tensord.out" 2>"$work/tensord.log" &
servers+=($!)
port="$(tensord_port "$work/tensord.out" "$!")"
"$unpacked/usr/bin/tensorctl" conformance --target "127.0.0.1:$port" "$cases/slice.json" >"$work/cases.out" ||
  { cat "$work/cases.out" >&2; fail "conformance through the packaged tensord"; }
echo "deb: $(basename "$deb") ($(du -h "$deb" | cut -f1)) verified; $(tail -n 1 "$work/cases.out")"
