#!/usr/bin/env bash
# Builds promparse (Prometheus's own text parser, for the metrics tests)
# offline in GOPATH mode against Debian's packaged Go sources
# (golang-github-prometheus-common-dev and what it needs).
#
#   tests/metrics/build.sh OUTDIR
set -euo pipefail
if [ $# -ne 1 ] || [ -z "$1" ]; then
    echo "usage: $0 OUTDIR" >&2
    exit 2
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$1"
out=$(cd "$1" && pwd)
src="$out/gopath/src/kdptest/cmd/promparse"
mkdir -p "$src"
cmp -s "$here/promparse.go" "$src/main.go" || cp "$here/promparse.go" "$src/main.go"
cd "$src"
GOPATH="$out/gopath:${GOCODE_DIR:-/usr/share/gocode}" GO111MODULE=off GOPROXY=off GOFLAGS= \
    GOCACHE="${GOCACHE:-$out/gocache}" CGO_ENABLED=0 "${GO:-go}" build -o "$out/kdp-promparse" .
