#!/usr/bin/env bash
# Runs every libFuzzer target in BIN_DIR for SECONDS each, JOBS at a time
# (default: the number of CPUs; each target is one process on one core, so
# two at a time on two cores fuzz as much as one after another, in half the
# time).
#
#   [JOBS=N] scripts/run-fuzz.sh BIN_DIR SECONDS
#
# Each fuzz_<name> runs on a scratch copy of fuzz/corpus/<name>/ (new units
# never land in the repo), with fuzz/<name>.dict if there is one. Prints one
# summary line per target and exits non-zero if any target found a crash, a
# leak or a timeout. A target that fails leaves in fuzz/artifacts/ the input
# libFuzzer saved (<name>-crash-<sha1>, or -leak-, -timeout-, -oom-) and its
# whole log (<name>-<UTC time>.log); its summary names both, or says that no
# input was saved and how the target ended. Needs no terminal or stdin (CI);
# a reader that goes away early (| head, | grep -q) stops neither the runs
# nor what they save.
set -euo pipefail

# Messages go through a subshell: if our reader has gone, SIGPIPE ends the
# subshell, not the script (the targets still run with SIGPIPE's default).
say() { (exec 2>/dev/null; printf '%s\n' "$@") || true; }
err() { (exec 3>&2 2>/dev/null; printf '%s\n' "$@" >&3) || true; }

if [ $# -ne 2 ] || [ -z "$1" ] || ! [[ "$2" =~ ^[0-9]+$ ]]; then
    err "usage: $0 BIN_DIR SECONDS"
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
    err "run-fuzz: no fuzz_* binaries in $bin_dir (run 'make fuzz-build')"
    exit 1
fi

scratch=$(mktemp -d "${TMPDIR:-/tmp}/kdp-fuzz-XXXXXX")
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$artifacts"

# Leaks are checked after every input that allocated more than it freed.
# A failed CHECK (SIGABRT) is reported by ASan (handle_abort=1; libFuzzer
# then leaves SIGABRT to it), not by libFuzzer's own handler: ASan reports
# one crash at a time, so a second thread failing meanwhile waits until the
# input is saved; with libFuzzer's handler it killed the process first (no
# input, exit 134, and llvm-symbolizer's "IO failure on output stream:
# Broken pipe", as its reader was gone).
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=1:handle_abort=1"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}print_stacktrace=1"

# The number after $2 on the last line of log $1 that has it.
final_stat() {
    grep -o "$2 *[0-9]*" "$1" | tail -n 1 | grep -o '[0-9]*$' || echo "?"
}

# The files in fuzz/artifacts/ named after target $1, sorted.
artifact_files() {
    find "$artifacts" -maxdepth 1 -type f -name "$1-*" ! -name "$1-*.log" | LC_ALL=C sort
}

# How a target that saved no input ended, from its exit status $1.
how_it_ended() {
    if [ "$1" -gt 128 ]; then
        echo "killed by SIG$(kill -l $(($1 - 128)) 2>/dev/null || echo $(($1 - 128)))"
    else
        echo "exit $1"
    fi
}

# One target: its summary line into $scratch/$name.sum, what it has to say
# (on a failure) into $scratch/$name.msg; exit status 1 if it failed.
run_one() {
    local bin=$1
    local name=${bin##*/}
    local short=${name#fuzz_}
    local corpus="$scratch/$short"
    exec 3>"$scratch/$name.msg"
    mkdir -p "$corpus"
    if [ -d "$root/fuzz/corpus/$short" ]; then
        cp -R "$root/fuzz/corpus/$short/." "$corpus/"
    fi
    local args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
                -artifact_prefix="$artifacts/$short-")
    local dict
    for dict in "$root/fuzz/$short.dict" "$root/fuzz/$name.dict"; do
        if [ -f "$dict" ]; then
            args+=(-dict="$dict")
            break
        fi
    done
    local log="$scratch/$name.log"
    local before="$scratch/$name.before"
    artifact_files "$short" >"$before"
    local rc=0
    "$bin" "${args[@]}" "$corpus" </dev/null >"$log" 2>&1 || rc=$?

    local execs rate cov line
    execs=$(final_stat "$log" "stat::number_of_executed_units:")
    rate=$(final_stat "$log" "stat::average_exec_per_sec:")
    cov=$(final_stat "$log" "cov:")
    line=$(printf '%-20s %s  execs=%s exec/s=%s cov=%s' "$name" \
        "$([ $rc -eq 0 ] && echo ok || echo FAIL)" "$execs" "$rate" "$cov")
    if [ $rc -eq 0 ]; then
        printf '%s\n' "$line" >"$scratch/$name.sum"
        return 0
    fi

    # Keep what there is before saying anything. The inputs: those libFuzzer
    # says it wrote (last one last), then any other new file of this target.
    local kept_log
    kept_log="$artifacts/$short-$(date -u +%Y%m%dT%H%M%SZ).log"
    cp "$log" "$kept_log"
    local inputs=()
    declare -A seen=()
    local f
    while IFS= read -r f; do
        if [ -f "$f" ] && [ -z "${seen[$f]-}" ]; then
            seen[$f]=1
            inputs+=("$f")
        fi
    done < <(sed -n 's/^.*Test unit written to //p' "$log"; \
             artifact_files "$short" | LC_ALL=C comm -13 "$before" -)
    if [ ${#inputs[@]} -gt 0 ]; then
        line+="  input: ${inputs[*]}"
    else
        line+="  input: none saved ($(how_it_ended $rc))"
    fi
    printf '%s\n' "$line  log: $kept_log" >"$scratch/$name.sum"

    printf '%s\n' "run-fuzz: $name failed (exit $rc); the end of its log:" >&3
    tail -n 60 "$log" >&3
    printf '%s\n' "run-fuzz: its whole log is $kept_log" >&3
    if [ ${#inputs[@]} -gt 0 ]; then
        local input=${inputs[0]}
        printf '%s\n' "run-fuzz: the input is $input" \
            "run-fuzz: reproduce with: $bin $input" \
            "run-fuzz: once fixed, keep it as a regression seed:" \
            "  cp $input $root/fuzz/corpus/$short/crash_<what>" >&3
    else
        printf '%s\n' "run-fuzz: no input was saved ($(how_it_ended $rc)): see the log" >&3
    fi
    # libFuzzer saves the input its own thread (T0) runs when the report is
    # done: after a crash on another thread, maybe not the input that did it.
    local thread
    thread=$(grep -m 1 -oE '( T[0-9]+\)|thread T[0-9]+)$' "$log" | grep -oE 'T[0-9]+' || true)
    if [ -n "$thread" ] && [ "$thread" != T0 ]; then
        printf '%s\n' "run-fuzz: the crash was on thread $thread, not on libFuzzer's T0: the input" \
            "  saved is the one T0 was running, the cause only if the target waits for" \
            "  its threads before an input ends" >&3
    fi
    return 1
}

jobs=${JOBS:-$(nproc 2>/dev/null || echo 1)}
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || jobs=1
say "run-fuzz: ${#targets[@]} targets, ${seconds}s each, $jobs at a time ..."
running=0
for bin in "${targets[@]}"; do
    if [ "$running" -ge "$jobs" ]; then
        wait -n || true
        running=$((running - 1))
    fi
    run_one "$bin" &
    running=$((running + 1))
done
wait || true

failed=0
summary=()
for bin in "${targets[@]}"; do
    name=${bin##*/}
    if [ -s "$scratch/$name.msg" ]; then
        failed=1
        (exec 3>&2 2>/dev/null; cat "$scratch/$name.msg" >&3) || true
    fi
    if [ -f "$scratch/$name.sum" ]; then
        summary+=("$(cat "$scratch/$name.sum")")
    else
        failed=1
        summary+=("$(printf '%-20s FAIL  (it said nothing: killed?)' "$name")")
    fi
    grep -q ' FAIL' "$scratch/$name.sum" 2>/dev/null && failed=1
done

say "run-fuzz: summary (${seconds}s each)"
for line in "${summary[@]}"; do
    say "  $line"
done
exit $failed
