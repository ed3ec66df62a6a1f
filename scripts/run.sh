#!/usr/bin/env bash
# The run command: installs what is missing, builds, and starts tensord in the
# foreground (listening on 0.0.0.0:50051 unless --address says otherwise).
# Extra arguments go to tensord, e.g. scripts/run.sh --address=127.0.0.1:6000
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/scripts/build.sh" release tensord tensorctl >&2
exec "$root/build/bin/tensord" "$@"
