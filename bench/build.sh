#!/usr/bin/env bash
# Builds the benchmark tools offline into OUTDIR:
#   kdp-bench-goplugin  the reference device plugin in Go (bench/goplugin)
#   kdp-bench-driver    the kubelet-playing driver (bench/driver)
#   kdp-bench-floor     the raw unix-socket round trip (bench/floor.c, cc -O2)
#
#   bench/build.sh OUTDIR
#
# The Go programs are built by scripts/go-build.sh against
# tests/kubelet/api.proto, with CGO_ENABLED=0 (static, as device plugins
# usually ship in containers); they also need golang.org/x/sys from Debian's
# /usr/share/gocode. Overridable: CC, GOCODE_DIR, GOCACHE (pointing it at
# another build's warm cache, e.g. BUILD/kubelet-go/gocache, saves compiling
# grpc-go again), and what scripts/go-build.sh takes.
set -euo pipefail

if [ $# -ne 1 ] || [ -z "$1" ]; then
    echo "usage: $0 OUTDIR" >&2
    exit 2
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
mkdir -p "$1"
out=$(cd "$1" && pwd)
CC=${CC:-cc}
GOCODE_DIR=${GOCODE_DIR:-/usr/share/gocode}

command -v "$CC" >/dev/null 2>&1 || { echo "bench/build.sh: $CC not found" >&2; exit 1; }
[ -d "$GOCODE_DIR/src/golang.org/x/sys/unix" ] || {
    echo "bench/build.sh: golang.org/x/sys/unix not found under $GOCODE_DIR/src" \
        "(scripts/install-deps.sh)" >&2
    exit 1
}

CGO_ENABLED=0 "$root/scripts/go-build.sh" "$out" "$root/tests/kubelet/api.proto" \
    "kdp-bench-goplugin=$here/goplugin/main.go" "kdp-bench-driver=$here/driver/main.go"

if [ ! -x "$out/kdp-bench-floor" ] || [ "$here/floor.c" -nt "$out/kdp-bench-floor" ]; then
    "$CC" -O2 -Wall -Wextra -o "$out/kdp-bench-floor" "$here/floor.c"
fi
