#!/usr/bin/env bash
# kdp side by side with the Go way and with the physical floor (`make bench`).
#
#   bench/run.sh [BUILD_DIR] [--quick] [--docs]
#
# Builds the benchmark tools (bench/build.sh -> BUILD_DIR/bench/tools), runs
# bench/bench.py against BUILD_DIR/bin/kdp-example-gopher and the Go reference
# plugin, then bench/dra.py (the DRA driver: kdp-example-gopher-dra and
# kdp-go-testdra), prints the markdown tables and writes into $KDP_BENCH_OUT
# (default BUILD_DIR/bench): results.json, results.md, dra.json, dra.md,
# samples/, bench-latency.png
# (if gnuplot is installed: scripts/install-deps.sh bench).
#   --quick  tiny counts: checks the harness, not the figures (ctest smoke run)
#   --docs   also copy the table and the plot into docs/benchmarks.md and
#            docs/bench-latency.png
# About 3-4 minutes in full. Figures depend on the machine: not a test.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)

build=build
quick=
docs=
for a in "$@"; do
    case "$a" in
        --quick) quick=--quick ;;
        --docs) docs=1 ;;
        -*) echo "usage: $0 [BUILD_DIR] [--quick] [--docs]" >&2; exit 2 ;;
        *) build=$a ;;
    esac
done
build=$(cd "$build" && pwd)
out=${KDP_BENCH_OUT:-$build/bench}
tools=${KDP_BENCH_TOOLS:-$build/bench/tools}
[ -x "$build/bin/kdp-example-gopher" ] || {
    echo "bench/run.sh: $build/bin/kdp-example-gopher missing: build first (make)" >&2
    exit 1
}
mkdir -p "$out"
export KDP_BENCH_COMMAND="bench/run.sh $*"
"$here/build.sh" "$tools"
/usr/bin/python3 "$here/bench.py" --bin "$build/bin" --tools "$tools" --out "$out" $quick
# the DRA driver side by side (kdp's example and the grpc-go test driver)
/usr/bin/python3 "$here/dra.py" --bin "$build/bin" --out "$out" $quick

if command -v gnuplot >/dev/null 2>&1; then
    gnuplot -e "dir='$out/samples'; out='$out/bench-latency.png'" "$here/plot.gp"
    echo "bench: wrote $out/results.json, $out/results.md and $out/bench-latency.png" >&2
else
    echo "bench: wrote $out/results.json and $out/results.md (no gnuplot: no plot;" \
         "scripts/install-deps.sh bench installs it)" >&2
fi

if [ -n "$docs" ]; then
    /usr/bin/python3 "$here/docs.py" "$out" "$root/docs/benchmarks.md"
    [ -f "$out/bench-latency.png" ] && cp "$out/bench-latency.png" "$root/docs/bench-latency.png"
    echo "bench: updated docs/benchmarks.md" >&2
fi
