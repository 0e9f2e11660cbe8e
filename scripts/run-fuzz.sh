#!/usr/bin/env bash
# Runs every libFuzzer target in BIN_DIR for SECONDS each, one after another.
#
#   scripts/run-fuzz.sh BIN_DIR SECONDS
#
# Each fuzz_<name> runs on a scratch copy of fuzz/corpus/<name>/ (new units
# never land in the repo), with fuzz/<name>.dict if there is one. Prints one
# summary line per target and exits non-zero if any target found a crash, a
# leak or a timeout, naming the input libFuzzer saved in fuzz/artifacts/.
# Needs no terminal or stdin (CI).
set -euo pipefail

if [ $# -ne 2 ] || [ -z "$1" ] || ! [[ "$2" =~ ^[0-9]+$ ]]; then
    echo "usage: $0 BIN_DIR SECONDS" >&2
    exit 2
fi
bin_dir=$1
seconds=$2
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
artifacts="$root/fuzz/artifacts"

shopt -s nullglob
targets=()
for bin in "$bin_dir"/fuzz_*; do
    [ -f "$bin" ] && [ -x "$bin" ] && targets+=("$bin")
done
if [ ${#targets[@]} -eq 0 ]; then
    echo "run-fuzz: no fuzz_* binaries in $bin_dir (run 'make fuzz-build')" >&2
    exit 1
fi

scratch=$(mktemp -d "${TMPDIR:-/tmp}/kdp-fuzz-XXXXXX")
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$artifacts"

# Leaks are checked after every input that allocated more than it freed.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=1"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}print_stacktrace=1"

# The number after $2 on the last line of log $1 that has it.
final_stat() {
    grep -o "$2 *[0-9]*" "$1" | tail -n 1 | grep -o '[0-9]*$' || echo "?"
}

failed=0
summary=()
for bin in "${targets[@]}"; do
    name=${bin##*/}
    short=${name#fuzz_}
    corpus="$scratch/$short"
    mkdir -p "$corpus"
    if [ -d "$root/fuzz/corpus/$short" ]; then
        cp -R "$root/fuzz/corpus/$short/." "$corpus/"
    fi
    args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
          -artifact_prefix="$artifacts/$short-")
    for dict in "$root/fuzz/$short.dict" "$root/fuzz/$name.dict"; do
        if [ -f "$dict" ]; then
            args+=(-dict="$dict")
            break
        fi
    done
    log="$scratch/$name.log"
    echo "run-fuzz: $name for ${seconds}s ..."
    rc=0
    "$bin" "${args[@]}" "$corpus" </dev/null >"$log" 2>&1 || rc=$?

    execs=$(final_stat "$log" "stat::number_of_executed_units:")
    rate=$(final_stat "$log" "stat::average_exec_per_sec:")
    cov=$(final_stat "$log" "cov:")
    line=$(printf '%-20s %s  execs=%s exec/s=%s cov=%s' "$name" \
        "$([ $rc -eq 0 ] && echo ok || echo FAIL)" "$execs" "$rate" "$cov")
    summary+=("$line")
    if [ $rc -ne 0 ]; then
        failed=1
        echo "run-fuzz: $name failed (exit $rc); the end of its log:" >&2
        tail -n 60 "$log" >&2
        artifact=$(grep -o "Test unit written to [^ ]*" "$log" | tail -n 1 | cut -d' ' -f5- || true)
        if [ -n "$artifact" ]; then
            echo "run-fuzz: the input is $artifact" >&2
            echo "run-fuzz: reproduce with: $bin $artifact" >&2
            echo "run-fuzz: once fixed, keep it as a regression seed:" \
                "cp $artifact $root/fuzz/corpus/$short/" >&2
        fi
    fi
done

echo "run-fuzz: summary (${seconds}s each)"
for line in "${summary[@]}"; do
    echo "  $line"
done
exit $failed
