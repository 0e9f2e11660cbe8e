#!/usr/bin/env bash
# make lint: fails on any clang-format difference or clang-tidy finding.
#
#   scripts/lint.sh BUILD_DIR
#
# clang-format (.clang-format) checks every C file we write, and no module
# of src/, tools/ or examples/ is over 600 lines; clang-tidy
# (.clang-tidy, and src/.clang-tidy for the library's kdp_ prefix) checks the
# library, the tools and the examples, one process per file, with the flags of
# BUILD_DIR/compile_commands.json. Each finding is printed as
# file:line:col: warning: text [check]. A finding that is wrong for a line is
# silenced on that line only, with the reason:
#   // NOLINTNEXTLINE(check-name): why
set -euo pipefail

if [ $# -ne 1 ] || [ ! -f "$1/compile_commands.json" ]; then
    echo "usage: $0 BUILD_DIR (a configured build: make build)" >&2
    exit 2
fi
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(cd "$1" && pwd)
cd "$root"
status=0

shopt -s nullglob
c_files=(include/*.h src/*/*.[ch] examples/*.[ch] tools/*/*.[ch] tests/unit/*.c tests/interop/*.c
         tests/plugin/*.c fuzz/*.c)
if ! clang-format --dry-run -Werror "${c_files[@]}" 2> "$build/lint-format.txt"; then
    grep -E 'error:' "$build/lint-format.txt" | sed 's/ \[-Wclang-format-violations\]//' || true
    echo "lint: clang-format: the files above differ from .clang-format (fix: make format)"
    status=1
fi

# run-clang-tidy's own exit status says nothing about findings: read them.
run-clang-tidy -p "$build" -j "$(nproc)" -quiet "$root/(src|tools|examples)/" \
    > "$build/lint-tidy.txt" 2>&1 || true
sed 's/\x1b\[[0-9;]*m//g' "$build/lint-tidy.txt" | grep -E '^[^ ].*: (warning|error): ' |
    sed "s|^$root/||" | sort -u > "$build/lint-findings.txt" || true
n=$(wc -l < "$build/lint-findings.txt")
if [ "$n" -gt 0 ]; then
    cat "$build/lint-findings.txt"
    echo "lint: clang-tidy: $n finding(s) (whole output: $build/lint-tidy.txt)"
    status=1
fi
# One module per concern, kept small: no .c file of the library, the tools
# or the examples over 600 lines (split it by what its parts own).
big=$(wc -l src/*/*.c tools/*/*.c examples/*.c | awk '$2 != "total" && $1 > 600 {print $2 " (" $1 " lines)"}')
if [ -n "$big" ]; then
    echo "$big"
    echo "lint: the files above are over 600 lines: split them (a part with its own struct and header)"
    status=1
fi
files=$(grep -c '"file"' "$build/compile_commands.json" || true)
[ $status -eq 0 ] && echo "lint: clean (clang-format; clang-tidy on src/, tools/, examples/; $files compile commands; no module over 600 lines)"
exit $status
