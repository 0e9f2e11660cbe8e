#!/usr/bin/env bash
# Measures kdp's gRPC layer with the test Echo server and the grpc-go client:
# idle RSS and threads of the server, unary latency over N calls, and the
# push-to-receive latency of a server stream.
#
#   bench/transport.sh [BUILD_DIR] [N]      (defaults: build 10000)
#
# Prints a markdown table. Not a test: figures depend on the machine.
set -euo pipefail
build=${1:-build}
n=${2:-10000}
bin="$build/bin"
for b in kdp-echo-server kdp-go-client; do
  [ -x "$bin/$b" ] || { echo "transport.sh: $bin/$b missing: run make first" >&2; exit 1; }
done
dir=$(mktemp -d)
sock="$dir/echo.sock"
"$bin/kdp-echo-server" --socket "$sock" 2>"$dir/server.log" &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done

field() { awk -v k="$1" '$1 == k":" {print $2}' "/proc/$pid/status"; }
sleep 0.5
rss_idle=$(field VmRSS)
threads=$(field Threads)
ticks0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
wake0=$(field voluntary_ctxt_switches)
sleep 5
ticks1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
wake1=$(field voluntary_ctxt_switches)

unary=$("$bin/kdp-go-client" -socket "$sock" -scenario bench -n "$n" -timeout 120s)
stream=$("$bin/kdp-go-client" -socket "$sock" -scenario stream -n 200 -timeout 60s)
rss_after=$(field VmRSS)

get() { sed -n "s/.*\"$2\":\([0-9.]*\).*/\1/p" <<<"$1"; }
cat <<TABLE
| figure | value |
|---|---|
| server idle RSS | ${rss_idle} kB |
| server threads | ${threads} |
| server CPU ticks / wakeups over 5 s idle | $((ticks1 - ticks0)) / $((wake1 - wake0)) |
| unary p50 / p90 / p99 (grpc-go client, ${n} calls, 16 B) | $(get "$unary" p50_us) / $(get "$unary" p90_us) / $(get "$unary" p99_us) us |
| unary calls/s (sequential) | $(get "$unary" calls_per_s) |
| stream push-to-receive p50 / p99 (200 messages) | $(get "$stream" latency_us_p50) / $(get "$stream" latency_us_p99) us |
| server RSS after the run | ${rss_after} kB |
TABLE
