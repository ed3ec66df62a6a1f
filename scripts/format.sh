#!/usr/bin/env bash
# clang-format (Debian's clang-format, the .clang-format at the root) over the
# C++ sources git knows.
#   scripts/format.sh           rewrites them in place
#   scripts/format.sh --check   lists the files it would change and fails (CI)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
. "$root/scripts/lib.sh"
apt_install clang-format
cd "$root"
mapfile -t files < <(git ls-files '*.cc' '*.h')
if [[ "${1:-}" == "--check" ]]; then
  clang-format --dry-run -Werror "${files[@]}"
  echo "format: ${#files[@]} files formatted as .clang-format says"
else
  clang-format -i "${files[@]}"
fi
