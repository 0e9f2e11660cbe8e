#!/usr/bin/env bash
# Builds the API-server emulator (kdp-test-apiserver) offline into OUTDIR
# with scripts/go-build.sh: standard library only, no proto.
#
#   tests/apiserver/build.sh OUTDIR
set -euo pipefail
if [ $# -ne 1 ] || [ -z "$1" ]; then
    echo "usage: $0 OUTDIR" >&2
    exit 2
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
files=$(cd "$here" && ls ./*.go | sed "s|^\./|$here/|" | paste -sd, -)
exec "$root/scripts/go-build.sh" "$1" - "kdp-test-apiserver=$files"
