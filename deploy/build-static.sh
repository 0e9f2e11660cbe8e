#!/bin/sh
# Builds one kdp executable fully static (-static, against the .a files of
# glibc, nghttp2 and protobuf-c) and stripped. This is the build stage of
# deploy/Dockerfile, and tests/packaging/test_static.py runs it on the same
# files the Dockerfile copies, so `make test` checks the binary an image gets.
#
#   deploy/build-static.sh BUILD_DIR TARGET OUT
#
# TARGET: any executable under examples/ or tools/ (kdp-example-gopher,
# kdp-generic, ...). OUT: where the stripped binary goes. JOBS: build jobs (2).
# KDP_STATIC_TOOLS=OFF links it dynamically instead (deploy/build-dynamic.sh).
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
# RelWithDebInfo (-O2 -g, then stripped): the flags every test of the tree
# runs with; -O3 or -Os change the size by under 2% (glibc is most of it).
# shellcheck disable=SC2086 # $generator is empty or two words
cmake -S "$src" -B "$build" $generator -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKDP_STATIC_TOOLS="${KDP_STATIC_TOOLS:-ON}" \
    -DKDP_WERROR=ON -DKDP_TESTS=OFF -DKDP_INTEROP=OFF
cmake --build "$build" -j "${JOBS:-2}" --target "$target"
strip -o "$out" "$build/bin/$target"
ls -l "$out"
