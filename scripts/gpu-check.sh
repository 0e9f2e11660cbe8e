#!/bin/sh
# Checks kdp-generic's PCI discovery on a real NVIDIA GPU node: a resource
# with a pci: entry for 3D controllers (class 0302) of vendor 10de bound to
# the nvidia driver, and the shared control and UVM nodes, is listed
# (--list), then served to kdpctl's
# kubelet emulator in a temporary directory, and each GPU is allocated with
# kdpctl: the answer must hand its /dev/nvidiaN, /dev/nvidiactl and
# /dev/nvidia-uvm. Touches nothing outside its temporary directory.
#
#   scripts/gpu-check.sh [KDP_GENERIC [KDPCTL]]
#
# Binaries default to those on PATH; static ones from deploy/build-static.sh
# run on any x86-64 Linux. Exit 0 when every GPU found passes, 1 otherwise.
# KDP_ROOT and KDP_SYSFS (default / and /sys) point it at another tree (a
# host mounted in a container, or a fake one).
set -u
generic=${1:-kdp-generic}
kdpctl=${2:-kdpctl}
dir=$(mktemp -d /tmp/kdp-gpu-check.XXXXXX)
pids=
# shellcheck disable=SC2317 # called by the trap
cleanup() {
    for p in $pids; do kill "$p" 2>/dev/null; done
    for p in $pids; do wait "$p" 2>/dev/null; done
    rm -rf "$dir"
}
trap cleanup EXIT INT TERM
fail() {
    echo "FAIL: $*"
    exit 1
}

echo "== the machine"
uname -srm
ls -l "${KDP_ROOT:-}"/dev/nvidia* 2>&1 | sed 's/^/  /'
for g in "${KDP_ROOT:-}"/proc/driver/nvidia/gpus/*; do
    [ -e "$g/information" ] && sed 's/^/  /' "$g/information" | grep -E "Model|Bus Location|Device Minor"
done

mkdir -p "$dir/dp" "$dir/cdi"
cat >"$dir/gpu.yaml" <<EOF
root: ${KDP_ROOT:-/}
sysfs: ${KDP_SYSFS:-/sys}
cdiDir: $dir/cdi
resources:
  - name: nvidia.com/gpu
    cdi: {kind: nvidia.com/gpu, deviceSpecs: true}
    devices:
      - pci: {vendor: 10de, class: "0302", driver: nvidia}
    sharedNodes: [/dev/nvidiactl, /dev/nvidia-uvm]
EOF
echo "== the configuration"
sed 's/^/  /' "$dir/gpu.yaml"
"$generic" --config "$dir/gpu.yaml" --check || fail "the configuration does not check"

echo "== kdp-generic --list"
list=$("$generic" --config "$dir/gpu.yaml" --list) || fail "--list failed"
echo "$list"
ids=$(echo "$list" | grep -o '"id": "pci-[^"]*"' | sed 's/"id": "\(.*\)"/\1/')
[ -n "$ids" ] || fail "no GPU listed"
for id in $ids; do
    echo "$list" | grep -q "\"id\": \"$id\", \"paths\": \[\"/dev/nvidia[0-9]*\"\]" ||
        fail "$id: no /dev/nvidiaN node"
done
echo "$list" | grep -q '"sharedMissing": null' || fail "a shared node is missing"

echo "== served to kdpctl kubelet"
"$kdpctl" --device-plugin-dir "$dir/dp" kubelet >"$dir/kubelet.log" 2>&1 &
pids="$!"
i=0
while [ ! -S "$dir/dp/kubelet.sock" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
KDP_DEVICE_PLUGIN_DIR="$dir/dp" "$generic" --config "$dir/gpu.yaml" >"$dir/generic.log" 2>&1 &
pids="$pids $!"
i=0
while ! grep -q "nvidia.com/gpu: devices" "$dir/kubelet.log" && [ $i -lt 100 ]; do
    sleep 0.1
    i=$((i + 1))
done
sed 's/^/  kubelet| /' "$dir/kubelet.log"
sed 's/^/  generic| /' "$dir/generic.log"
grep -q "nvidia.com/gpu: registered" "$dir/kubelet.log" || fail "kdp-generic did not register"

status=0
for id in $ids; do
    echo "== kdpctl allocate $id"
    out=$("$kdpctl" --device-plugin-dir "$dir/dp" allocate kdp-nvidia-com-gpu.sock "$id") ||
        fail "allocate $id: $out"
    echo "$out"
    for node in /dev/nvidiactl /dev/nvidia-uvm; do
        echo "$out" | grep -q "device  $node <- $node" || { echo "FAIL: $id: no $node"; status=1; }
    done
    echo "$out" | grep -q "device  /dev/nvidia[0-9]* <-" || { echo "FAIL: $id: no /dev/nvidiaN"; status=1; }
done
echo "== CDI spec"
cat "$dir/cdi/nvidia.com-gpu.json" && echo
[ $status -eq 0 ] && echo "PASS: $(echo "$ids" | wc -w) GPU(s)"
exit $status
