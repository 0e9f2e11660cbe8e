#!/usr/bin/env bash
# Builds the benchmark tools offline into OUTDIR:
#   kdp-bench-goplugin  the reference device plugin in Go (bench/goplugin)
#   kdp-bench-driver    the kubelet-playing driver (bench/driver)
#   kdp-bench-floor     the raw unix-socket round trip (bench/floor.c, cc -O2)
#
#   bench/build.sh OUTDIR
#
# Like tests/kubelet/build.sh: Go code for tests/kubelet/api.proto is
# generated with protoc + protoc-gen-go + protoc-gen-go-grpc into
# OUTDIR/gopath/src/kdptest/kubeletpb, and both Go programs are built in
# GOPATH mode (GO111MODULE=off) against Debian's /usr/share/gocode (grpc-go
# 1.33, protobuf-go 1.28, golang.org/x/sys). No network. The Go programs are
# built with CGO_ENABLED=0 (static, as device plugins usually ship in
# containers). Re-runs only rewrite what changed.
#
# Overridable: PROTOC, PROTOC_GEN_GO, PROTOC_GEN_GO_GRPC, GO, CC, GOCODE_DIR,
# GOCACHE (default OUTDIR/gocache; pointing it at another build's warm cache,
# e.g. BUILD/kubelet-go/gocache, saves compiling grpc-go again).
set -euo pipefail

if [ $# -ne 1 ] || [ -z "$1" ]; then
    echo "usage: $0 OUTDIR" >&2
    exit 2
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
mkdir -p "$1"
out=$(cd "$1" && pwd)

PROTOC=${PROTOC:-protoc}
PROTOC_GEN_GO=${PROTOC_GEN_GO:-$(command -v protoc-gen-go || true)}
PROTOC_GEN_GO_GRPC=${PROTOC_GEN_GO_GRPC:-$(command -v protoc-gen-go-grpc || true)}
GO=${GO:-go}
CC=${CC:-cc}
GOCODE_DIR=${GOCODE_DIR:-/usr/share/gocode}

for tool in "$PROTOC" "$GO" "$CC"; do
    command -v "$tool" >/dev/null 2>&1 || { echo "bench/build.sh: $tool not found" >&2; exit 1; }
done
[ -n "$PROTOC_GEN_GO" ] || { echo "bench/build.sh: protoc-gen-go not found" >&2; exit 1; }
[ -n "$PROTOC_GEN_GO_GRPC" ] || { echo "bench/build.sh: protoc-gen-go-grpc not found" >&2; exit 1; }
for d in google.golang.org/grpc golang.org/x/sys/unix; do
    [ -d "$GOCODE_DIR/src/$d" ] || {
        echo "bench/build.sh: $d not found under $GOCODE_DIR/src (scripts/install-deps.sh)" >&2
        exit 1
    }
done

gopath="$out/gopath"
pkg="$gopath/src/kdptest"

sync_file() {
    if ! cmp -s "$1" "$2"; then
        mkdir -p "$(dirname "$2")"
        cp "$1" "$2.tmp.$$"
        mv -f "$2.tmp.$$" "$2"
    fi
}

# 1. Generated code for the v1beta1 API (the services included).
gen="$out/gen.tmp.$$"
rm -rf "$gen"
mkdir -p "$gen"
trap 'rm -rf "$gen"' EXIT
"$PROTOC" -I "$root/tests/kubelet" \
    --plugin=protoc-gen-go="$PROTOC_GEN_GO" \
    --plugin=protoc-gen-go-grpc="$PROTOC_GEN_GO_GRPC" \
    --go_out="$gen" --go-grpc_out="$gen" \
    "$root/tests/kubelet/api.proto"
for f in api.pb.go api_grpc.pb.go; do
    sync_file "$gen/kdptest/kubeletpb/$f" "$pkg/kubeletpb/$f"
done

# 2. The two main packages.
sync_file "$here/goplugin/main.go" "$pkg/cmd/kdp-bench-goplugin/main.go"
sync_file "$here/driver/main.go" "$pkg/cmd/kdp-bench-driver/main.go"

# 3. Go, offline, GOPATH mode.
export GO111MODULE=off
export GOPATH="$gopath:$GOCODE_DIR"
export GOCACHE=${GOCACHE:-$out/gocache}
export GOFLAGS=
export GOPROXY=off
export GOENV=off
export CGO_ENABLED=0
mkdir -p "$GOCACHE"
(
    cd "$gopath/src"
    "$GO" build -o "$out/kdp-bench-goplugin" kdptest/cmd/kdp-bench-goplugin
    "$GO" build -o "$out/kdp-bench-driver" kdptest/cmd/kdp-bench-driver
)

# 4. The floor.
if [ ! -x "$out/kdp-bench-floor" ] || [ "$here/floor.c" -nt "$out/kdp-bench-floor" ]; then
    "$CC" -O2 -Wall -Wextra -o "$out/kdp-bench-floor" "$here/floor.c"
fi
