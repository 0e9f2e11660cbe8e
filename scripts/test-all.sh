#!/usr/bin/env bash
# make test: everything CI runs, in the order that wastes the least time on
# two cores, saying what each step took.
#
#   scripts/test-all.sh      (from make test, after make build)
#
# 1. The fuzz, TSan and ASan trees start building in the background, at a
#    lower priority (nice 10), while
# 2. lint (clang-format, clang-tidy) and the normal build's tests run: those
#    tests mostly wait on the processes they start (a core or less), so the
#    builds take what they leave and the tests keep their priority.
# 3. Every fuzz target (FUZZ_SECONDS each, two at a time), then the TSan
#    tests, then the ASan+UBSan tests, whose ctest summary closes the output.
# A step that fails ends the run (the background builds with it): its
# output says why; the background builds' log is printed if they failed.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build=${BUILD:-build}
make=(make --no-print-directory)
start=$(date +%s)

took() {
    local now
    now=$(date +%s)
    printf 'make test: %-44s %4d s (%d s in)\n' "$1" $((now - $2)) $((now - start))
}

bg_log="$build/test-builds.log"
# its own process group, so that a failure here stops all of it
setsid nice -n 10 "${make[@]}" fuzz-build tsan-build asan-build >"$bg_log" 2>&1 &
bg=$!
trap 'kill -TERM -- -"$bg" 2>/dev/null || true' EXIT
echo "make test: the fuzz, TSan and ASan trees build in the background ($bg_log)"

t=$(date +%s)
scripts/lint.sh "$build"
took "lint" "$t"

t=$(date +%s)
(cd "$build" && ctest --output-on-failure -j 2)
took "tests of the normal build" "$t"

t=$(date +%s)
if ! wait "$bg"; then
    tail -n 100 "$bg_log"
    echo "make test: building the fuzz, TSan or ASan tree failed (above; whole log: $bg_log)"
    exit 1
fi
trap - EXIT
took "the other trees' builds, waited for" "$t"

t=$(date +%s)
"${make[@]}" fuzz FUZZ_SECONDS="${FUZZ_SECONDS:-15}"
took "fuzz" "$t"

t=$(date +%s)
"${make[@]}" test-tsan
took "tests under TSan" "$t"

# ctest's summary of the ASan+UBSan run closes the output
echo "make test: the tests under ASan+UBSan follow, the last step"
"${make[@]}" test-asan
