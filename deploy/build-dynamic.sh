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
KDP_STATIC_TOOLS=OFF exec "$(dirname "$0")/build-static.sh" "$@"
