#!/usr/bin/env bash
# Installs the Debian 12 packages kdp needs to build, test, fuzz and run its
# demo. As root: apt-get update (once) and install what is missing. Otherwise:
# print the exact command to run and fail. `scripts/install-deps.sh bench` also
# installs what `make bench` needs beyond that (gnuplot, for its plot).
set -euo pipefail

packages=(
  # build
  gcc make cmake ninja-build pkg-config
  libnghttp2-dev libprotobuf-c-dev protobuf-c-compiler
  # the metrics endpoint: libmicrohttpd's header (the library is loaded at run time);
  # kdpctl dra apiserver links it (HTTPS) and OpenSSL's libcrypto (its certificates)
  libmicrohttpd-dev libssl-dev
  # the Kubernetes API-server client (src/k8s/): HTTPS through libcurl, JSON
  # through jansson, kubeconfig files through libyaml
  libcurl4-openssl-dev libjansson-dev
  # kdp-generic's configuration files, and kubeconfig files
  libyaml-dev
  # tests, sanitizers, fuzzing
  libcmocka-dev clang libclang-rt-14-dev valgrind
  # make lint: clang-tidy with the repo's .clang-tidy, clang-format's check
  clang-tidy clang-format
  # real gRPC peers: grpc-go (built offline in GOPATH mode) and grpcio
  golang-go golang-google-grpc-dev golang-google-protobuf-dev
  protobuf-compiler protoc-gen-go protoc-gen-go-grpc
  python3 python3-grpcio python3-protobuf
  # packaging and deploy/ checks (tests/packaging): manifests, unit file, binaries
  python3-yaml python3-kubernetes systemd file
  # the metrics tests (tests/metrics): Prometheus's own text parser and server
  golang-github-prometheus-common-dev prometheus
)

# Optional groups, only when asked for: scripts/install-deps.sh bench
#   bench: gnuplot for the latency plot of `make bench` (docs/bench-latency.png)
for group in "$@"; do
  case "$group" in
    bench) packages+=(gnuplot-nox) ;;
    *) echo "install-deps: unknown group '$group' (known: bench)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [ "$status" = "installed" ] || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "kdp needs these Debian packages: ${missing[*]}" >&2
  echo "Install them with:" >&2
  echo "  sudo apt-get update && sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
