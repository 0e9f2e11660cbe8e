#!/bin/sh
# Builds one kdp executable dynamically linked (against Debian's shared
# nghttp2, protobuf-c, libyaml and glibc; kdp itself is linked in from
# libkdp.a) and stripped, with the metrics endpoint: kdp dlopen()s
# libmicrohttpd.so.12 when one is started. This is the build stage of
# deploy/Dockerfile.metrics (build-static.sh is deploy/Dockerfile's, whose
# static binaries cannot load libmicrohttpd), and
# tests/packaging/test_metrics_image.py runs it on the same files the
# Dockerfile copies, so the test checks the binary the image gets.
#
#   deploy/build-dynamic.sh BUILD_DIR TARGET OUT
#
# TARGET: any executable under examples/ or tools/ (kdp-example-gopher,
# kdp-generic, ...). OUT: where the stripped binary goes. JOBS: build jobs (2).
# Needs libmicrohttpd-dev (its header; configure fails without it).
set -eu
if [ $# -ne 3 ]; then
    echo "usage: $0 BUILD_DIR TARGET OUT" >&2
    exit 2
fi
build=$1 target=$2 out=$3
src=$(cd "$(dirname "$0")/.." && pwd)
generator=
if command -v ninja >/dev/null 2>&1; then
    generator="-G Ninja"
fi
# RelWithDebInfo (-O2 -g, then stripped), like build-static.sh.
# shellcheck disable=SC2086 # $generator is empty or two words
cmake -S "$src" -B "$build" $generator -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKDP_STATIC_TOOLS=OFF \
    -DKDP_WERROR=ON -DKDP_TESTS=OFF -DKDP_INTEROP=OFF
cmake --build "$build" -j "${JOBS:-2}" --target "$target"
strip -o "$out" "$build/bin/$target"
ls -l "$out"
