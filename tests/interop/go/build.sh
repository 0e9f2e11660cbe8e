#!/usr/bin/env bash
# Builds the grpc-go interop peers, kdp-go-client and kdp-go-server, offline
# into OUTDIR (scripts/go-build.sh does the work; tests/interop/echo.proto is
# their API).
#
#   tests/interop/go/build.sh OUTDIR
set -euo pipefail
if [ $# -ne 1 ] || [ -z "$1" ]; then
    echo "usage: $0 OUTDIR" >&2
    exit 2
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
exec "$root/scripts/go-build.sh" "$1" "$root/tests/interop/echo.proto" \
    "kdp-go-client=$here/client/main.go" "kdp-go-server=$here/server/main.go"
