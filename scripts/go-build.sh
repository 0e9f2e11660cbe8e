#!/usr/bin/env bash
# Builds Go programs offline against Debian's packaged Go sources: the one
# build script of every Go peer (the interop peers, the kubelet emulator and
# its test plugin, the benchmark tools).
#
#   scripts/go-build.sh OUTDIR PROTO[,PROTO...] NAME=FILE[,FILE...] [NAME=FILE[,...] ...]
#   scripts/go-build.sh OUTDIR - NAME=FILE[,FILE...] ...   (no proto: standard library
#                                                         and /usr/share/gocode only)
#
# Generates Go code for each PROTO (its go_package is kdptest/<pkg>) with protoc +
# protoc-gen-go + protoc-gen-go-grpc into OUTDIR/gopath/src/kdptest/<pkg>,
# copies each program's files (one main package) to
# OUTDIR/gopath/src/kdptest/cmd/NAME and builds OUTDIR/NAME in GOPATH mode
# (GO111MODULE=off) against /usr/share/gocode (grpc-go 1.33, protobuf-go
# 1.28). No network. Everything, the Go build cache included, stays inside
# OUTDIR. Re-runs only rewrite files whose content changed: quick and
# idempotent.
#
# Overridable: PROTOC, PROTOC_GEN_GO, PROTOC_GEN_GO_GRPC, GO, GOCODE_DIR,
# GOCACHE (default OUTDIR/gocache), CGO_ENABLED (passed on to go build).
set -euo pipefail

if [ $# -lt 3 ] || [ -z "$1" ] || [ -z "$2" ]; then
    echo "usage: $0 OUTDIR PROTO[,PROTO...]|- NAME=FILE[,FILE...] ..." >&2
    exit 2
fi
mkdir -p "$1"
out=$(cd "$1" && pwd)
proto_args=()
if [ "$2" != "-" ]; then
    IFS=, read -r -a proto_args <<<"$2"
fi
protos=()
for p in ${proto_args[@]+"${proto_args[@]}"}; do
    [ -f "$p" ] || { echo "go-build.sh: $p: no such file" >&2; exit 2; }
    protos+=("$(cd "$(dirname "$p")" && pwd)/$(basename "$p")")
done
shift 2

PROTOC=${PROTOC:-protoc}
PROTOC_GEN_GO=${PROTOC_GEN_GO:-$(command -v protoc-gen-go || true)}
PROTOC_GEN_GO_GRPC=${PROTOC_GEN_GO_GRPC:-$(command -v protoc-gen-go-grpc || true)}
GO=${GO:-go}
GOCODE_DIR=${GOCODE_DIR:-/usr/share/gocode}

command -v "$GO" >/dev/null 2>&1 || { echo "go-build.sh: $GO not found" >&2; exit 1; }
if [ ${#protos[@]} -gt 0 ]; then
    command -v "$PROTOC" >/dev/null 2>&1 || { echo "go-build.sh: $PROTOC not found" >&2; exit 1; }
    [ -n "$PROTOC_GEN_GO" ] || { echo "go-build.sh: protoc-gen-go not found" >&2; exit 1; }
    [ -n "$PROTOC_GEN_GO_GRPC" ] || { echo "go-build.sh: protoc-gen-go-grpc not found" >&2; exit 1; }
    [ -d "$GOCODE_DIR/src/google.golang.org/grpc" ] || {
        echo "go-build.sh: grpc-go sources not found under $GOCODE_DIR/src" \
            "(install golang-google-grpc-dev)" >&2
        exit 1
    }
fi

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
for proto in ${protos[@]+"${protos[@]}"}; do
    rm -rf "$gen"
    mkdir -p "$gen"
    "$PROTOC" -I "$(dirname "$proto")" \
        --plugin=protoc-gen-go="$PROTOC_GEN_GO" \
        --plugin=protoc-gen-go-grpc="$PROTOC_GEN_GO_GRPC" \
        --go_out="$gen" --go-grpc_out="$gen" \
        "$proto"
    generated=$(cd "$gen" && find . -name '*.go' | sort)
    [ -n "$generated" ] || { echo "go-build.sh: protoc produced no Go file for $proto" >&2; exit 1; }
    for f in $generated; do
        case "$f" in
        ./kdptest/*) sync_file "$gen/$f" "$gopath/src/${f#./}" ;;
        *) echo "go-build.sh: $proto: go_package must be kdptest/<pkg> (got $f)" >&2; exit 1 ;;
        esac
    done
done

# 2. The main packages.
names=()
for spec in "$@"; do
    name=${spec%%=*}
    files=${spec#*=}
    if [ -z "$name" ] || [ "$name" = "$spec" ] || [ -z "$files" ]; then
        echo "go-build.sh: bad program spec \"$spec\" (want NAME=FILE[,FILE...])" >&2
        exit 2
    fi
    IFS=, read -r -a list <<<"$files"
    keep=()
    for f in "${list[@]}"; do
        [ -f "$f" ] || { echo "go-build.sh: $f: no such file" >&2; exit 1; }
        sync_file "$f" "$pkg/cmd/$name/$(basename "$f")"
        keep+=("$(basename "$f")")
    done
    # a file no longer in the program (renamed, removed) leaves it
    for g in "$pkg/cmd/$name"/*.go; do
        case " ${keep[*]} " in *" $(basename "$g") "*) ;; *) rm -f "$g" ;; esac
    done
    names+=("$name")
done

# 3. Build, offline, GOPATH mode.
export GO111MODULE=off
export GOPATH="$gopath:$GOCODE_DIR"
export GOCACHE=${GOCACHE:-$out/gocache}
export GOFLAGS=
export GOPROXY=off
export GOENV=off
export GOTMPDIR=
mkdir -p "$GOCACHE"
cd "$gopath/src"
for name in "${names[@]}"; do
    "$GO" build -o "$out/$name" "kdptest/cmd/$name"
done
