#!/usr/bin/env bash
# make test: everything CI runs, arranged so that two cores are kept busy
# (most tests wait on the processes they start), saying what each step took.
#
#   scripts/test-all.sh      (from make test, after make build)
#
# In the background, at a lower priority (nice 10):
#   - the fuzz tree is built, then every fuzz target runs FUZZ_SECONDS, one
#     at a time (one core);
#   - the TSan and ASan trees are built.
# Meanwhile: lint (clang-format, clang-tidy), then the normal build's tests.
# Then the TSan tests and the ASan+UBSan tests side by side, their logs
# printed when both are done, the ASan+UBSan summary last. A step that fails ends the run (the background work with it);
# the background logs are printed when they are waited for.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build=${BUILD:-build}
fuzz_build=${FUZZ_BUILD:-build-fuzz}
seconds=${FUZZ_SECONDS:-15}
make=(make --no-print-directory)
start=$(date +%s)

took() {
    local now
    now=$(date +%s)
    printf 'make test: %-44s %4d s (%d s in)\n' "$1" $((now - $2)) $((now - start))
}

fuzz_log="$build/test-fuzz.log"
builds_log="$build/test-builds.log"
# each in a process group of its own (set -m), so that a failure here
# stops all of it
set -m
(nice -n 10 "${make[@]}" fuzz-build && JOBS=1 nice -n 10 scripts/run-fuzz.sh \
    "$fuzz_build/bin" "$seconds") >"$fuzz_log" 2>&1 &
fuzz=$!
(nice -n 10 "${make[@]}" tsan-build asan-build) >"$builds_log" 2>&1 &
builds=$!
set +m
trap 'kill -TERM -- -"$fuzz" -"$builds" 2>/dev/null || true' EXIT
echo "make test: in the background: the fuzz tree then each fuzz target ${seconds} s ($fuzz_log);"
echo "make test:   the TSan and ASan trees ($builds_log)"

t=$(date +%s)
scripts/lint.sh "$build"
took "lint" "$t"

t=$(date +%s)
(cd "$build" && ctest --output-on-failure -j 2)
took "tests of the normal build" "$t"

t=$(date +%s)
fuzz_rc=0
wait "$fuzz" || fuzz_rc=$?
sed -n '/^run-fuzz:/,$p' "$fuzz_log"
if [ "$fuzz_rc" -ne 0 ]; then
    grep -q '^run-fuzz:' "$fuzz_log" || tail -n 100 "$fuzz_log"
    echo "make test: the fuzz build or a fuzz target failed (above; whole log: $fuzz_log)"
    exit 1
fi
took "fuzz (in the background), waited for" "$t"

t=$(date +%s)
if ! wait "$builds"; then
    tail -n 100 "$builds_log"
    echo "make test: building the TSan or ASan tree failed (above; whole log: $builds_log)"
    exit 1
fi
trap - EXIT
took "the TSan and ASan builds, waited for" "$t"

# The sanitizer runs mostly wait on the processes their tests start (the
# CPUs are more than half idle in either alone): both at once, each in its
# log, printed when both are done; ctest's summary of the ASan+UBSan run
# closes the output.
t=$(date +%s)
tsan_log="$build/test-tsan.log"
asan_log="$build/test-asan.log"
set -m
"${make[@]}" test-tsan >"$tsan_log" 2>&1 &
tsan=$!
"${make[@]}" test-asan >"$asan_log" 2>&1 &
asan=$!
set +m
trap 'kill -TERM -- -"$tsan" -"$asan" 2>/dev/null || true' EXIT
tsan_rc=0
asan_rc=0
wait "$tsan" || tsan_rc=$?
wait "$asan" || asan_rc=$?
trap - EXIT
echo "make test: the tests under TSan ($tsan_log):"
cat "$tsan_log"
took "tests under TSan and under ASan+UBSan, side by side" "$t"
echo "make test: the tests under ASan+UBSan ($asan_log) follow, the last step"
cat "$asan_log"
if [ "$tsan_rc" -ne 0 ] || [ "$asan_rc" -ne 0 ]; then
    echo "make test: failed under $([ "$tsan_rc" -ne 0 ] && echo TSan)$([ "$tsan_rc" -ne 0 ] && [ "$asan_rc" -ne 0 ] && echo ' and ')$([ "$asan_rc" -ne 0 ] && echo ASan+UBSan) (above)"
    exit 1
fi
