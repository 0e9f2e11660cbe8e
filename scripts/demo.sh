#!/bin/sh
# SPDX-License-Identifier: MIT
#
# make demo: a narrated story of a device plugin's life, with kdpctl's kubelet
# emulator and the gopher example plugin (every file in a directory is a
# device; "unhealthy" in its content makes it Unhealthy); then the same
# gophers as a DRA driver (kdp-example-gopher-dra) with `kdpctl dra`'s API
# server and kubelet: slices, a claim, prepare, health, unprepare.
# Everything runs in a temporary directory; no root, no Kubernetes, no stdin
# needed.
#
#   scripts/demo.sh BIN_DIR      (BIN_DIR holds kdpctl and kdp-example-gopher;
#                                 the DRA chapter also kdp-example-gopher-dra)
#
# Bounded: every wait has a timeout and the whole story a budget (DEMO_BUDGET
# seconds, default 30); every process started here is stopped on exit, pass
# or fail. Exit 0 on success, 1 with the failed step and the logs otherwise.
set -u

BIN=${1:-}
BUDGET=${DEMO_BUDGET:-30}
if [ -z "$BIN" ] || [ ! -x "$BIN/kdpctl" ] || [ ! -x "$BIN/kdp-example-gopher" ]; then
    echo "usage: $0 BIN_DIR  (BIN_DIR must hold kdpctl and kdp-example-gopher: run make build)" >&2
    exit 2
fi
BIN=$(cd "$BIN" && pwd)

# Short paths: a unix socket path must stay under 107 bytes.
WORK=$(mktemp -d /tmp/kdp-demo.XXXXXX) || exit 1
DP=$WORK/dp
GOPHERS=$WORK/gophers
KLOG=$WORK/kubelet.log
PLOG=$WORK/gopher.log
mkdir -p "$DP" "$GOPHERS"
KUBELET_PID=
PLUGIN_PID=
API_PID=
DRAKL_PID=
DRV_PID=
ALOG=$WORK/dra-apiserver.log
DKLOG=$WORK/dra-kubelet.log
DLOG=$WORK/gopher-dra.log
SHOWN=0
START=$(date +%s)

# On a terminal: bold step lines and a short pause between steps, for a
# person to read along (DEMO_PACE seconds, default 0.6). Never under CI.
if [ -t 1 ] && [ "${CI:-}" != "true" ]; then
    PACE=${DEMO_PACE:-0.6}
    if [ -z "${NO_COLOR:-}" ]; then
        BOLD=$(printf '\033[1m')
        OFF=$(printf '\033[0m')
    fi
fi
PACE=${PACE:-0}
BOLD=${BOLD:-}
OFF=${OFF:-}
# kdpctl bounds its own calls (--timeout); coreutils' timeout bounds kdpctl.
BOUND=
command -v timeout >/dev/null 2>&1 && BOUND="timeout 10"

# shellcheck disable=SC2317 # called from the EXIT trap
stop_process() { # PID: SIGTERM, then SIGKILL after 3 s
    [ -n "$1" ] || return 0
    kill -TERM "$1" 2>/dev/null || return 0
    i=0
    while kill -0 "$1" 2>/dev/null && [ "$i" -lt 60 ]; do
        sleep 0.05
        i=$((i + 1))
    done
    kill -KILL "$1" 2>/dev/null
    wait "$1" 2>/dev/null
    return 0
}

# shellcheck disable=SC2317 # the EXIT trap
cleanup() {
    stop_process "$DRV_PID"
    stop_process "$DRAKL_PID"
    stop_process "$API_PID"
    stop_process "$PLUGIN_PID"
    stop_process "$KUBELET_PID"
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

say() {
    [ "$PACE" = 0 ] || sleep "$PACE"
    printf '\n%s==> %s%s\n' "$BOLD" "$*" "$OFF"
}
indent() { sed 's/^/    /'; }

fail() {
    printf '\n%sdemo FAILED: %s%s\n' "$BOLD" "$*" "$OFF" >&2
    for f in "$KLOG" "$PLOG" "$ALOG" "$DKLOG" "$DLOG"; do
        if [ -s "$f" ]; then
            printf '\n--- last lines of %s ---\n' "$(basename "$f")" >&2
            tail -n 15 "$f" >&2
        fi
    done
    exit 1
}

left() { # seconds left in the budget
    echo $((BUDGET - ($(date +%s) - START)))
}

# wait_for FILE REGEX SECONDS: until a line of FILE matches (grep -E).
# Like wait_for, but only lines after the first $2 of the file count.
wait_after() {
    limit=$4
    [ "$(left)" -lt "$limit" ] && limit=$(left)
    [ "$limit" -lt 1 ] && fail "out of time (the demo's budget is ${BUDGET}s)"
    i=0
    while [ $i -lt $((limit * 20)) ]; do
        tail -n +"$(($2 + 1))" "$1" 2>/dev/null | grep -Eq -- "$3" && return 0
        sleep 0.05
        i=$((i + 1))
    done
    fail "no line matching \"$3\" after line $2 of $1 within ${limit}s"
}

wait_for() {
    limit=$3
    [ "$(left)" -lt "$limit" ] && limit=$(left)
    [ "$limit" -lt 1 ] && fail "out of time (the demo's budget is ${BUDGET}s)"
    i=0
    while [ $i -lt $((limit * 20)) ]; do
        grep -Eq -- "$2" "$1" 2>/dev/null && return 0
        if [ -n "$KUBELET_PID" ] && ! kill -0 "$KUBELET_PID" 2>/dev/null; then
            fail "kdpctl kubelet exited while waiting for: $2"
        fi
        sleep 0.05
        i=$((i + 1))
    done
    fail "no line matching \"$2\" in $(basename "$1") within ${limit}s"
}

# Shows the kubelet emulator's lines printed since the last call.
show_kubelet() {
    total=$(wc -l <"$KLOG")
    if [ "$total" -gt "$SHOWN" ]; then
        sed -n "$((SHOWN + 1)),${total}p" "$KLOG" | indent
        SHOWN=$total
    fi
}

run_kdpctl() { # like kdpctl, keeping its exit status
    out=$($BOUND "$BIN/kdpctl" --device-plugin-dir "$DP" --timeout 3s "$@" </dev/null 2>&1)
    rc=$?
    printf '%s\n' "$out" | indent
    [ $rc -eq 0 ] || fail "kdpctl $* exited $rc"
}

echo "kdp demo: a device plugin's life, watched by kdpctl's kubelet emulator"
echo "(everything happens in $WORK; the story takes a few seconds)"

say "1. Start the kubelet emulator: kdpctl kubelet --device-plugin-dir $DP"
"$BIN/kdpctl" kubelet --device-plugin-dir "$DP" --timeout "$((BUDGET + 5))s" \
    </dev/null >"$KLOG" 2>&1 &
KUBELET_PID=$!
wait_for "$KLOG" "listening on" 5
show_kubelet

say "2. Start a plugin: kdp-example-gopher (each file in $GOPHERS is a device)"
echo "gopher" >"$GOPHERS/gopher-1"
echo "gopher" >"$GOPHERS/gopher-2"
"$BIN/kdp-example-gopher" --devices-dir "$GOPHERS" --device-plugin-dir "$DP" \
    </dev/null >"$PLOG" 2>&1 &
PLUGIN_PID=$!
echo "   It serves $DP/gopher.sock and registers; the kubelet dials it back, asks for"
echo "   its options, then watches its devices:"
wait_for "$KLOG" "example.com/gopher: devices #1" 5
show_kubelet

say "3. The device table, as the kubelet sees it: kdpctl list gopher.sock"
run_kdpctl list gopher.sock

say "4. Hot-plug: a new device appears (touch $GOPHERS/gopher-3)"
echo "gopher" >"$GOPHERS/gopher-3"
wait_for "$KLOG" "added +gopher-3" 5
show_kubelet

say "5. A device turns Unhealthy (its file now says \"unhealthy\")..."
echo "unhealthy" >"$GOPHERS/gopher-2"
wait_for "$KLOG" "gopher-2 +Healthy -> Unhealthy" 5
show_kubelet
say "   ...and recovers"
echo "gopher" >"$GOPHERS/gopher-2"
wait_for "$KLOG" "gopher-2 +Unhealthy -> Healthy" 5
show_kubelet

say "6. An allocation, as a pod asking for two gophers gets it: kdpctl allocate gopher.sock gopher-1 gopher-3"
run_kdpctl allocate gopher.sock gopher-1 gopher-3

say "7. A kubelet restart (SIGHUP to kdpctl kubelet): sockets deleted, kubelet.sock re-created"
BEFORE_HUP=$(wc -l <"$KLOG")
kill -HUP "$KUBELET_PID"
wait_for "$KLOG" "example.com/gopher: came back in" 5
wait_after "$KLOG" "$BEFORE_HUP" "example.com/gopher: devices #1" 5
show_kubelet

say "8. The plugin is stopped (SIGTERM): it removes its socket and the stream ends"
kill -TERM "$PLUGIN_PID"
i=0
while kill -0 "$PLUGIN_PID" 2>/dev/null && [ $i -lt 100 ]; do
    sleep 0.05
    i=$((i + 1))
done
kill -0 "$PLUGIN_PID" 2>/dev/null && fail "the plugin did not exit within 5s of SIGTERM"
wait "$PLUGIN_PID"
rc=$?
PLUGIN_PID=
[ $rc -eq 0 ] || fail "the plugin exited $rc after SIGTERM"
wait_for "$KLOG" "ListAndWatch ended" 5
show_kubelet
if [ -e "$DP/gopher.sock" ]; then
    fail "$DP/gopher.sock is still there"
fi
echo "    the plugin exited 0; $DP/gopher.sock is gone:"
find "$DP" -mindepth 1 -maxdepth 1 -printf '%f\n' | sort | indent

# ---- DRA: the same gophers as a DRA driver, without a cluster ----

# Shows FILE's lines after line $2 (and returns the new count in SEEN).
show_after() {
    total=$(wc -l <"$1")
    if [ "$total" -gt "$2" ]; then
        sed -n "$(($2 + 1)),${total}p" "$1" | indent
    fi
    SEEN=$total
}

if [ ! -x "$BIN/kdp-example-gopher-dra" ] || ! "$BIN/kdpctl" dra --help >/dev/null 2>&1; then
    say "DRA chapter skipped: $BIN has no kdp-example-gopher-dra or this kdpctl has no DRA"
    say "Done in $(($(date +%s) - START))s. Try it on your own plugin: kdpctl help"
    exit 0
fi

ROOT=$WORK/root
DGOPHERS=$WORK/dra-gophers
API=$WORK/api
CDI=$WORK/cdi
DRV=gopher.example.com
mkdir -p "$ROOT" "$DGOPHERS" "$CDI"
for g in gopher-0 gopher-1 gopher-2; do : >"$DGOPHERS/$g"; done

say "9. DRA without a cluster: kdpctl dra apiserver --dir $API --node node-a"
echo "    (HTTPS with a CA, a server certificate and a bearer token it makes; $API/kubeconfig)"
"$BIN/kdpctl" dra apiserver --dir "$API" --node node-a --timeout "$(left)s" >"$ALOG" 2>&1 </dev/null &
API_PID=$!
wait_for "$ALOG" "dra-apiserver: serving https" 5
ASEEN=0
show_after "$ALOG" 0
ASEEN=$SEEN

say "10. The kubelet's DRA side: kdpctl dra kubelet --kubelet-root $ROOT"
# Its commands (prepare, unprepare) go through a FIFO held open here.
mkfifo "$WORK/dra-kubelet.in" || fail "mkfifo"
exec 7<>"$WORK/dra-kubelet.in"
"$BIN/kdpctl" dra kubelet --kubelet-root "$ROOT" --timeout "$(left)s" >"$DKLOG" 2>&1 <&7 &
DRAKL_PID=$!
wait_for "$DKLOG" "dra-kubelet: watching" 5
show_after "$DKLOG" 0
KSEEN=$SEEN

say "11. The driver: kdp-example-gopher-dra --dra $DRV --kubeconfig $API/kubeconfig"
"$BIN/kdp-example-gopher-dra" --devices-dir "$DGOPHERS" --kubelet-root "$ROOT" --dra "$DRV" \
    --kubeconfig "$API/kubeconfig" --node node-a --cdi-dir "$CDI" --state-dir "$WORK/state" \
    >"$DLOG" 2>&1 </dev/null &
DRV_PID=$!
wait_for "$DKLOG" "$DRV: health \(v1, stream opened\)" 5
show_after "$DKLOG" "$KSEEN"
KSEEN=$SEEN

say "12. The ResourceSlice it published, as the API server printed it"
wait_for "$ALOG" "slice ADDED" 5
show_after "$ALOG" "$ASEEN"
ASEEN=$SEEN

say "13. A claim for two gophers, allocated as the scheduler would: kdpctl dra claim"
echo "    kdpctl dra claim --kubeconfig $API/kubeconfig default/two-gophers --driver $DRV \\"
echo "        --node node-a --device gopher-0,gopher-2"
UID_=$($BOUND "$BIN/kdpctl" dra claim --kubeconfig "$API/kubeconfig" default/two-gophers \
    --driver "$DRV" --node node-a --device gopher-0,gopher-2 </dev/null 2>"$WORK/claim.err") ||
    fail "kdpctl dra claim: $(cat "$WORK/claim.err")"
echo "    its UID: $UID_"

say "14. The kubelet prepares it (stdin of kdpctl dra kubelet: prepare $DRV default/two-gophers/UID)"
echo "prepare $DRV default/two-gophers/$UID_" >&7
wait_after "$DKLOG" "$KSEEN" "prepare $DRV default/two-gophers" 5
show_after "$DKLOG" "$KSEEN"
KSEEN=$SEEN
SPEC=$(find "$CDI" -type f | head -n 1)
[ -n "$SPEC" ] || fail "no CDI spec in $CDI"
echo "    the CDI spec the container runtime reads, $SPEC:"
sed 's/^/    /' "$SPEC" | head -n 40

say "15. A gopher turns unhealthy: the health stream tells the kubelet"
echo unhealthy >"$DGOPHERS/gopher-2"
wait_after "$DKLOG" "$KSEEN" "gopher-2 +Unhealthy" 5
show_after "$DKLOG" "$KSEEN"
KSEEN=$SEEN

say "16. The pod is gone: the kubelet unprepares the claim"
echo "unprepare $DRV default/two-gophers/$UID_" >&7
wait_after "$DKLOG" "$KSEEN" "unprepare $DRV default/two-gophers .*: done" 5
show_after "$DKLOG" "$KSEEN"
[ -z "$(find "$CDI" -type f)" ] || fail "the CDI spec is still in $CDI"
echo "    the claim's CDI spec is gone from $CDI"
exec 7>&-

say "Done in $(($(date +%s) - START))s. Try it on your own plugin: kdpctl help; kdpctl dra help"
exit 0
