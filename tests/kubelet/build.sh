#!/usr/bin/env bash
# Builds the kubelet emulator (kdp-test-kubelet), the grpc-go test device
# plugin (kdp-go-testplugin) and the grpc-go test DRA driver (kdp-go-testdra)
# offline into OUTDIR (scripts/go-build.sh does
# the work; tests/kubelet/api.proto is the v1beta1 messages plus the
# kubelet's Registration and DevicePlugin services, pluginregistration.proto
# the plugin-watcher Registration service a watcher-mode plugin serves,
# proto/podresources.proto the kubelet's PodResources API the emulator serves,
# proto/dra_v1.proto, proto/dra_v1beta1.proto and proto/dra_health.proto the
# DRA plugin services the emulator calls and kdp-go-testdra serves).
#
#   tests/kubelet/build.sh OUTDIR
set -euo pipefail
if [ $# -ne 1 ] || [ -z "$1" ]; then
    echo "usage: $0 OUTDIR" >&2
    exit 2
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
exec "$root/scripts/go-build.sh" "$1" \
    "$here/api.proto,$here/pluginregistration.proto,$root/proto/podresources.proto,$root/proto/dra_v1.proto,$root/proto/dra_v1beta1.proto,$root/proto/dra_health.proto" \
    "kdp-test-kubelet=$here/main.go,$here/registry.go,$here/watcher.go,$here/podres.go,$here/dra.go,$here/dracmd.go" \
    "kdp-go-testplugin=$here/testplugin/main.go" \
    "kdp-go-testdra=$here/testdra/main.go,$here/testdra/publish.go"
