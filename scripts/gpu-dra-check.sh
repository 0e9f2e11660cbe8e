#!/bin/sh
# Checks kdp-generic-dra on a real NVIDIA GPU node without a cluster: the
# GPUs bound to the nvidia driver, with the shared control and UVM nodes,
# served as the DRA driver gpu.example.com to kdpctl's API-server and
# kubelet emulators in a temporary directory. --list must show each GPU's
# standard attributes; the driver must register and publish a
# ResourceSlice; a claim for the first GPU, prepared by the kubelet
# emulator, must get a CDI spec with its /dev/nvidiaN, /dev/nvidiactl and
# /dev/nvidia-uvm, gone again after the unprepare. Touches nothing outside
# its temporary directory.
#
#   scripts/gpu-dra-check.sh [KDP_GENERIC_DRA [KDPCTL]]
#
# Binaries default to those on PATH (the dynamically linked build: kdpctl
# with `kdpctl dra`). KDP_ROOT and KDP_SYSFS (default / and /sys) point it
# at another tree. Exit 0 when every step passes, 1 otherwise.
set -u
generic=${1:-kdp-generic-dra}
kdpctl=${2:-kdpctl}
drv=gpu.example.com
dir=$(mktemp -d /tmp/kdp-gpu-dra-check.XXXXXX)
pids=
# shellcheck disable=SC2317 # called by the trap
cleanup() {
    exec 7>&- 2>/dev/null
    for p in $pids; do kill "$p" 2>/dev/null; done
    for p in $pids; do wait "$p" 2>/dev/null; done
    rm -rf "$dir"
}
trap cleanup EXIT INT TERM
fail() {
    echo "FAIL: $*"
    for f in "$dir"/*.log; do [ -e "$f" ] && sed "s#^#  $(basename "$f" .log): #" "$f"; done
    exit 1
}
# wait_log FILE PATTERN: up to 10 s
wait_log() {
    i=0
    while ! grep -q "$2" "$1" 2>/dev/null; do
        i=$((i + 1))
        [ $i -gt 100 ] && fail "no \"$2\" in $(basename "$1") after 10 s"
        sleep 0.1
    done
}

mkdir -p "$dir/root/plugins_registry" "$dir/cdi"
cat >"$dir/gpu.yaml" <<EOF
root: ${KDP_ROOT:-/}
sysfs: ${KDP_SYSFS:-/sys}
cdiDir: $dir/cdi
kubeconfig: $dir/api/kubeconfig
resources:
  - name: nvidia.com/gpu
    dra: {driver: $drv}
    devices:
      - pci: {vendor: 10de, class: "0302", driver: nvidia}
        attributes: {vendor: nvidia}
    sharedNodes: [/dev/nvidiactl, /dev/nvidia-uvm]
EOF
echo "== the configuration"
sed 's/^/  /' "$dir/gpu.yaml"

echo "== kdp-generic-dra --list"
list=$("$generic" --config "$dir/gpu.yaml" --list) || fail "--list failed"
echo "$list"
name=$(echo "$list" | grep -o '"dra": {"name": "[^"]*"' | head -n 1 | sed 's/.*"name": "\(.*\)"/\1/')
[ -n "$name" ] || fail "no GPU listed"
echo "$list" | grep -q '"resource.kubernetes.io/pciBusID"' || fail "no pciBusID attribute"

echo "== kdpctl dra apiserver, kdpctl dra kubelet, kdp-generic-dra"
"$kdpctl" dra apiserver --dir "$dir/api" --node node-a --timeout 120s >"$dir/apiserver.log" 2>&1 </dev/null &
pids="$!"
wait_log "$dir/apiserver.log" "dra-apiserver: serving https"
mkfifo "$dir/kubelet.in" || fail "mkfifo"
exec 7<>"$dir/kubelet.in"
"$kdpctl" dra kubelet --kubelet-root "$dir/root" --timeout 120s >"$dir/kubelet.log" 2>&1 <&7 &
pids="$pids $!"
wait_log "$dir/kubelet.log" "dra-kubelet: watching"
NODE_NAME=node-a "$generic" --config "$dir/gpu.yaml" --kubelet-root "$dir/root" \
    --device-plugin-dir "$dir/root" >"$dir/driver.log" 2>&1 </dev/null &
pids="$pids $!"
wait_log "$dir/kubelet.log" "$drv registered"
wait_log "$dir/apiserver.log" "slice ADDED"
sed 's/^/  kubelet| /' "$dir/kubelet.log"
sed 's/^/  apiserver| /' "$dir/apiserver.log"

echo "== a claim for $name, prepared"
uid=$("$kdpctl" dra claim --kubeconfig "$dir/api/kubeconfig" default/gpu --driver "$drv" \
    --node node-a --device "$name" </dev/null) || fail "kdpctl dra claim"
echo "prepare $drv default/gpu/$uid" >&7
wait_log "$dir/kubelet.log" "prepare $drv default/gpu"
spec=$(find "$dir/cdi" -type f | head -n 1)
[ -n "$spec" ] || fail "no CDI spec"
cat "$spec" && echo
status=0
for node in /dev/nvidiactl /dev/nvidia-uvm; do
    grep -q "\"$node\"" "$spec" || { echo "FAIL: no $node in the spec"; status=1; }
done
grep -q '"/dev/nvidia[0-9]*"' "$spec" || { echo "FAIL: no /dev/nvidiaN in the spec"; status=1; }

echo "== unprepared"
echo "unprepare $drv default/gpu/$uid" >&7
wait_log "$dir/kubelet.log" "unprepare $drv default/gpu .*: done"
[ -z "$(find "$dir/cdi" -type f)" ] || { echo "FAIL: the CDI spec is still there"; status=1; }
sed 's/^/  driver| /' "$dir/driver.log"
[ $status -eq 0 ] && echo "PASS: $name served through DRA"
exit $status
