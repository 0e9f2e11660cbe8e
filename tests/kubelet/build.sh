#!/usr/bin/env bash
# Build the kubelet emulator (kdp-test-kubelet) and the grpc-go test device
# plugin (kdp-go-testplugin) offline.
#
#   tests/kubelet/build.sh OUTDIR
#
# Generates Go code for tests/kubelet/api.proto (the v1beta1 messages plus the
# kubelet's Registration and DevicePlugin services) with protoc +
# protoc-gen-go + protoc-gen-go-grpc into OUTDIR/gopath/src/kdptest/kubeletpb,
# copies the main packages next to it and builds OUTDIR/kdp-test-kubelet and
# OUTDIR/kdp-go-testplugin in GOPATH mode (GO111MODULE=off) against the
# Debian packaged sources in /usr/share/gocode (grpc-go 1.33, protobuf-go
# 1.28). Everything, including the Go build cache, stays inside OUTDIR.
# Re-runs only rewrite files whose content changed: quick and idempotent.
#
# Overridable: PROTOC, PROTOC_GEN_GO, PROTOC_GEN_GO_GRPC, GO, GOCODE_DIR.
set -euo pipefail

if [ $# -ne 1 ] || [ -z "$1" ]; then
    echo "usage: $0 OUTDIR" >&2
    exit 2
fi

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

mkdir -p "$1"
out=$(cd "$1" && pwd)

PROTOC=${PROTOC:-protoc}
PROTOC_GEN_GO=${PROTOC_GEN_GO:-$(command -v protoc-gen-go || true)}
PROTOC_GEN_GO_GRPC=${PROTOC_GEN_GO_GRPC:-$(command -v protoc-gen-go-grpc || true)}
GO=${GO:-go}
GOCODE_DIR=${GOCODE_DIR:-/usr/share/gocode}

for tool in "$PROTOC" "$GO"; do
    command -v "$tool" >/dev/null 2>&1 || { echo "build.sh: $tool not found" >&2; exit 1; }
done
[ -n "$PROTOC_GEN_GO" ] || { echo "build.sh: protoc-gen-go not found" >&2; exit 1; }
[ -n "$PROTOC_GEN_GO_GRPC" ] || { echo "build.sh: protoc-gen-go-grpc not found" >&2; exit 1; }
[ -d "$GOCODE_DIR/src/google.golang.org/grpc" ] || {
    echo "build.sh: grpc-go sources not found under $GOCODE_DIR/src (install golang-google-grpc-dev)" >&2
    exit 1
}

gopath="$out/gopath"
pkg="$gopath/src/kdptest"

# Copy $1 to $2 unless $2 already has the same content (keeps mtimes stable).
sync_file() {
    if ! cmp -s "$1" "$2"; then
        mkdir -p "$(dirname "$2")"
        cp "$1" "$2.tmp.$$"
        mv -f "$2.tmp.$$" "$2"
    fi
}

# 1. Generate into a scratch dir, then sync into the GOPATH.
gen="$out/gen.tmp.$$"
rm -rf "$gen"
mkdir -p "$gen"
trap 'rm -rf "$gen"' EXIT
"$PROTOC" -I "$here" \
    --plugin=protoc-gen-go="$PROTOC_GEN_GO" \
    --plugin=protoc-gen-go-grpc="$PROTOC_GEN_GO_GRPC" \
    --go_out="$gen" --go-grpc_out="$gen" \
    "$here/api.proto"
for f in api.pb.go api_grpc.pb.go; do
    [ -f "$gen/kdptest/kubeletpb/$f" ] || { echo "build.sh: protoc did not produce $f" >&2; exit 1; }
    sync_file "$gen/kdptest/kubeletpb/$f" "$pkg/kubeletpb/$f"
done

# 2. The main packages.
for f in main.go registry.go; do
    sync_file "$here/$f" "$pkg/cmd/kdp-test-kubelet/$f"
done
sync_file "$here/testplugin/main.go" "$pkg/cmd/kdp-go-testplugin/main.go"

# 3. Build, offline, GOPATH mode, cache inside OUTDIR.
export GO111MODULE=off
export GOPATH="$gopath:$GOCODE_DIR"
export GOCACHE="$out/gocache"
export GOFLAGS=
export GOPROXY=off
export GOENV=off
export GOTMPDIR=
mkdir -p "$GOCACHE"
cd "$gopath/src"
"$GO" build -o "$out/kdp-test-kubelet" kdptest/cmd/kdp-test-kubelet
"$GO" build -o "$out/kdp-go-testplugin" kdptest/cmd/kdp-go-testplugin
