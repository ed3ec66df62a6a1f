# Shell helpers shared by scripts/, bench/ and tests/ (bash). Source it:
#   . "$root/scripts/lib.sh"
# It defines functions only; it sets no shell options and runs nothing.

# Runs a command as root: directly when we are root, else through sudo.
as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# Whether Debian package $1 is installed.
package_installed() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

# Installs those of the named Debian packages that are missing (no recommends);
# does nothing, and needs no root, when all are there. Waits for another apt
# run's lock instead of failing (CI may run setup steps side by side).
apt_install() {
  local missing=() package
  for package in "$@"; do
    package_installed "$package" || missing+=("$package")
  done
  [ "${#missing[@]}" -gt 0 ] || return 0
  echo "installing ${missing[*]} (apt-get)" >&2
  as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 update -q >&2
  as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 \
    install -y -q --no-install-recommends "${missing[@]}" >&2
}

# The Debian entries apt uses on this machine whose suite matches the extended
# regular expression $1 (default: bookworm, -updates and -security), one
# "URI SUITE COMPONENTS..." line each, from deb822 .sources files and one-line
# sources.list files.
debian_sources() {
  local suites="${1:-bookworm(-updates|-security)?}" files=() f
  for f in /etc/apt/sources.list.d/*.sources; do [ -f "$f" ] && files+=("$f"); done
  if [ "${#files[@]}" -gt 0 ]; then
    awk -v want="^($suites)\$" '
      function flush() {
        if (types ~ /(^| )deb( |$)/ && enabled !~ /^[Nn]o/) {
          n = split(uris, u, " "); m = split(suites, s, " ")
          for (i = 1; i <= n; i++) for (j = 1; j <= m; j++)
            if (s[j] ~ want) print u[i], s[j], comps
        }
        types = uris = suites = comps = enabled = ""
      }
      FNR == 1 { flush() }
      /^[ \t]*#/ { next }
      /^[ \t]*$/ { flush(); next }
      { key = tolower($1); sub(/:$/, "", key); $1 = ""; sub(/^ +/, "")
        if (key == "types") types = $0; else if (key == "uris") uris = $0
        else if (key == "suites") suites = $0; else if (key == "components") comps = $0
        else if (key == "enabled") enabled = $0 }
      END { flush() }' "${files[@]}"
  fi
  files=()
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do [ -f "$f" ] && files+=("$f"); done
  if [ "${#files[@]}" -gt 0 ]; then
    sed -e 's/#.*//' -e 's/\[[^]]*\]//' "${files[@]}" |
      awk -v want="^($suites)\$" '$1 == "deb" && $3 ~ want { $1 = ""; sub(/^ +/, ""); print }'
  fi
}

# The mirror apt uses for bookworm here (default: deb.debian.org).
debian_mirror() {
  local mirror
  mirror="$(debian_sources bookworm | awk '{ print $1; exit }')"
  echo "${mirror:-http://deb.debian.org/debian}"
}

# Makes a minimal Debian 12 root in directory $1 (debootstrap --variant=minbase,
# from the mirror apt uses here) whose apt sources are this machine's bookworm,
# -updates and -security entries, in deb822 form as in the official image. Its
# package lists and caches are left empty, as on a fresh install. Needs root.
debootstrap_bookworm() {
  local rootfs="$1" sources mirror log
  apt_install debootstrap
  sources="$(debian_sources | sort -u)"
  mirror="$(debian_mirror)"
  [ -n "$sources" ] || sources="$mirror bookworm main"
  echo "debootstrap bookworm into $rootfs from $mirror; apt sources there:" >&2
  echo "$sources" >&2
  log="$(mktemp)"
  if ! as_root debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    rm -f "$log"
    return 1
  fi
  rm -f "$log"
  while read -r uri suite components; do
    printf '%s\n' "Types: deb" "URIs: $uri" "Suites: $suite" "Components: ${components:-main}" \
      "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg" ""
  done <<<"$sources" | as_root tee "$rootfs/etc/apt/sources.list.d/debian.sources" >/dev/null
  as_root rm -f "$rootfs/etc/apt/sources.list"
  as_root find "$rootfs/var/cache/apt" "$rootfs/var/lib/apt/lists" -type f -delete
}

# Makes apt see bookworm-backports, as a sources entry of its own on the same
# mirror as bookworm, unless some entry already names that suite. Idempotent.
enable_backports() {
  [ -z "$(debian_sources bookworm-backports)" ] || return 0
  local file=/etc/apt/sources.list.d/bookworm-backports.sources
  echo "enabling bookworm-backports ($file)" >&2
  printf '%s\n' "Types: deb" "URIs: $(debian_mirror)" "Suites: bookworm-backports" \
    "Components: main" "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg" |
    as_root tee "$file" >/dev/null
  as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 update -q >&2
}

# "1.23.5" from `go env GOVERSION` ("go1.23.5", "go1.26rc1"); empty if $1 is not
# a working go.
go_version() {
  local v
  v="$("$1" env GOVERSION 2>/dev/null)" || return 0
  v="${v#go}"
  echo "${v%%[!0-9.]*}"
}

# Whether the go binary $1 is at least 1.$2.
go_at_least() {
  local v major minor
  v="$(go_version "$1")"
  [ -n "$v" ] || return 1
  major="${v%%.*}"
  minor="${v#*.}"
  minor="${minor%%.*}"
  [ "$major" -gt 1 ] || { [ "$major" -eq 1 ] && [ "${minor:-0}" -ge "$2" ]; }
}

# Prints the path of a Go >= 1.23 (ghz, grpcurl and the manifests' validator
# need it): the go on PATH or /usr/local/go/bin/go when new enough, else
# Debian's golang-1.23-go from bookworm-backports (Debian 12's own golang-go is
# 1.19), installed when missing. Never a downloaded toolchain: callers run it
# with GOTOOLCHAIN=local.
GO_MIN_MINOR=23
go_binary() {
  local candidate
  for candidate in "$(command -v go 2>/dev/null || true)" /usr/local/go/bin/go \
                   "/usr/lib/go-1.$GO_MIN_MINOR/bin/go"; do
    if [ -n "$candidate" ] && [ -x "$candidate" ] && go_at_least "$candidate" "$GO_MIN_MINOR"; then
      echo "$candidate"
      return 0
    fi
  done
  echo "no Go >= 1.$GO_MIN_MINOR on PATH: installing golang-1.$GO_MIN_MINOR-go from bookworm-backports" >&2
  enable_backports
  apt_install "golang-1.$GO_MIN_MINOR-go"
  candidate="/usr/lib/go-1.$GO_MIN_MINOR/bin/go"
  if ! go_at_least "$candidate" "$GO_MIN_MINOR"; then
    echo "$candidate is not a Go >= 1.$GO_MIN_MINOR after installing it" >&2
    return 1
  fi
  echo "$candidate"
}

# Waits until tensord, started with --address=HOST:0 (the kernel picks a free
# port; no guessing at random ones) and its stdout in file $1, says where it
# listens, and prints that port. With $3 = metrics, the port of its /metrics
# instead. Fails if tensord (pid $2, optional) exits first, or after 30 s.
tensord_port() {
  local out="$1" pid="${2:-}" what="${3:-listening}" port="" i
  for ((i = 0; i < 600; i++)); do
    # The file may not exist yet: a server started with `>FILE &` makes it
    # in its own process, after the caller has gone on to this loop.
    port="$(sed -n "s/^tensord $what on .*:\([0-9][0-9]*\)\$/\1/p" "$out" 2>/dev/null | head -n 1)"
    if [ -n "$port" ]; then echo "$port"; return 0; fi
    if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then break; fi
    sleep 0.05
  done
  echo "tensord did not say where it is $what (stdout: $out)" >&2
  return 1
}

# For bench scripts: the directory holding tensord and tensorctl (and any other
# `targets`): $TENSOROP_BIN when set, else a release build of them made now.
# `root` is the repository root.
bench_bin_dir() {
  local root="$1"
  shift
  if [ -z "${TENSOROP_BIN:-}" ]; then
    "$root/scripts/build.sh" release "$@" >&2
    echo "$root/build/bin"
  else
    (cd "$TENSOROP_BIN" && pwd)
  fi
}

# For bench scripts: sets $work to a scratch directory and $servers to an empty
# list of PIDs; on exit the servers get SIGTERM (and are waited for) and the
# directory goes.
bench_scratch() {
  work="$(mktemp -d)"
  servers=()
  trap bench_cleanup EXIT
}
bench_cleanup() {
  stop_servers
  rm -rf "$work"
}
# SIGTERM to each PID in $servers, each waited for; the list emptied.
stop_servers() {
  local pid
  for pid in "${servers[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  servers=()
}

# The options of the load benchmarks (bench/load/): sets $rounds (--rounds N,
# default 3) and $json_out (--json FILE, default none).
bench_load_options() {
  rounds=3
  json_out=""
  while [ "$#" -gt 0 ]; do
    case "$1" in
      --rounds) rounds="$2"; shift 2 ;;
      --json) json_out="$2"; shift 2 ;;
      *) echo "usage: $0 [--rounds N] [--json FILE]" >&2; exit 2 ;;
    esac
  done
}
