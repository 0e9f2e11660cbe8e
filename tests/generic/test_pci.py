#!/usr/bin/python3
"""kdp-generic's pci: entries and sharedNodes end to end, on a fake host
(per-test temp dir) laid out as the kernel lays out a real one, against the
kubelet emulator (grpc-go): an NVIDIA GPU (its /dev/nvidia0 known only from
/proc/driver/nvidia), an AMD GPU behind a bridge (DRM card and render
nodes), an accelerator (accel node), a GPU bound to vfio-pci in an IOMMU
group; --list for each kind, Allocate and CDI with the shared nodes, a
shared node missing (unhealthy) and back, a driver unbound and another
bound at run time (the rescan interval), pci as a filter, config errors.

usage: KDP_BIN_DIR=<build>/bin /usr/bin/python3 test_pci.py [-v] [Test.name ...]
"""

import json
import os
import shutil
import sys
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "pylib"))
sys.path.insert(0, HERE)
import kdptest  # noqa: E402
from kdptest import T, binary  # noqa: E402
from test_generic import GenericTest, ids_of  # noqa: E402  (the fixture only)

NV = "devices/pci0000:00/0000:00:06.0"
VFIO = "devices/pci0000:00/0000:00:07.0"
BRIDGE = "devices/pci0000:40/0000:40:01.1"
AMD = BRIDGE + "/0000:41:00.0"
ACCEL = "devices/pci0000:80/0000:80:02.0"
GPU = "nvidia.com/gpu"
SHARED = ["/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidiactl"]
NV_INFO = ("Model: \t\t NVIDIA H200\nBus Location: \t 0000:00:06.0\nDevice Minor: \t 0\n"
           "GPU Excluded:\t No\n")


class PciHost:
    """PCI devices on a test_generic FakeHost."""

    def __init__(self, host):
        self.h = host

    def dev(self, sysdir, ids, cls, driver, numa):
        vendor, device, sv, sd = ids.split(":")
        for name, v in (("vendor", vendor), ("device", device), ("subsystem_vendor", sv),
                        ("subsystem_device", sd)):
            self.h.sys("%s/%s" % (sysdir, name), "0x%s\n" % v)
        self.h.sys(sysdir + "/class", "0x%s\n" % cls)
        self.h.sys(sysdir + "/numa_node", "%d\n" % numa)
        if driver:
            self.bind(sysdir, driver)
        self.h.sys_link(sysdir, "bus/pci/devices/" + os.path.basename(sysdir))

    def bind(self, sysdir, driver):
        os.makedirs(os.path.join(self.h.sysfs, "bus/pci/drivers", driver), exist_ok=True)
        self.h.sys_link("bus/pci/drivers/" + driver, sysdir + "/driver")

    def unbind(self, sysdir):
        os.remove(os.path.join(self.h.sysfs, sysdir, "driver"))

    def nvidia_info(self, address, minor):
        d = self.h.p("/proc/driver/nvidia/gpus/" + address)
        os.makedirs(d, exist_ok=True)
        with open(d + "/information", "w") as f:
            f.write(NV_INFO.replace("Minor: \t 0", "Minor: \t %d" % minor))

    def standard(self):
        self.dev(NV, "10de:2335:10de:18bf", "030200", "nvidia", 0)
        self.nvidia_info("0000:00:06.0", 0)
        for n in ["/dev/nvidia0"] + SHARED:
            self.h.node(n)
        self.dev(BRIDGE, "1022:1483:0000:0000", "060400", "pcieport", 1)
        self.dev(AMD, "1002:744c:1da2:e471", "030000", "amdgpu", 1)
        for name in ("card1", "renderD128"):
            self.h.sys("%s/drm/%s/uevent" % (AMD, name), "DEVNAME=dri/%s\n" % name)
            self.h.sys_link("%s/drm/%s" % (AMD, name), "class/drm/" + name)
            self.h.node("/dev/dri/" + name)
        self.dev(ACCEL, "1da3:1020:1da3:0001", "120000", "habanalabs", 1)
        self.h.sys(ACCEL + "/accel/accel0/uevent", "DEVNAME=accel/accel0\n")
        self.h.node("/dev/accel/accel0")
        self.dev(VFIO, "10de:2330:10de:16c1", "030200", "vfio-pci", 0)
        self.vfio_group(VFIO, 42)
        return self

    def vfio_group(self, sysdir, group):
        os.makedirs(os.path.join(self.h.sysfs, "kernel/iommu_groups/%d/devices" % group),
                    exist_ok=True)
        self.h.sys_link("kernel/iommu_groups/%d" % group, sysdir + "/iommu_group")
        self.h.sys_link(sysdir, "kernel/iommu_groups/%d/devices/%s"
                        % (group, os.path.basename(sysdir)))
        self.h.node("/dev/vfio/%d" % group)
        if not os.path.exists(self.h.p("/dev/vfio/vfio")):
            self.h.node("/dev/vfio/vfio")


def health_of(ev):
    return {d["id"]: d["health"] for d in ev["devices"]}


class PciTest(GenericTest):
    def setUp(self):
        super().setUp()
        self.pci = PciHost(self.host).standard()

    def list_json(self, body):
        cfg = self.config(body)
        out = kdptest.run([binary("kdp-generic"), "--config", cfg, "--list",
                           "--device-plugin-dir", self.dir], T)
        self.assertEqual(out.returncode, 0, out.stderr)
        return {r["resource"]: r for r in map(json.loads, out.stdout.splitlines())}


class Listing(PciTest):
    def test_each_kind(self):
        res = self.list_json("""resources:
  - name: nvidia.com/gpu
    devices:
      - pci: {vendor: 10de, class: "0302", driver: nvidia}
    sharedNodes: [/dev/nvidiactl, /dev/nvidia-uvm*]
  - name: amd.com/gpu
    devices:
      - pci: {class: "03", driver: amdgpu}
  - name: example.com/accel
    devices:
      - pci: {class: 12xxxx}
  - name: example.com/vfio
    devices:
      - pci: {vendor: 10de, driver: vfio-pci}
  - name: example.com/any-nvidia
    devices:
      - pci: 10de
  - name: example.com/h200
    devices:
      - pci: "10de:2335"
""")
        gpu = res[GPU]
        self.assertEqual(gpu["devices"], [{
            "id": "pci-0000:00:06.0", "paths": ["/dev/nvidia0"], "numa": [0],
            "pci": {"address": "0000:00:06.0", "vendor": "10de", "device": "2335",
                    "class": "030200", "driver": "nvidia", "pcieRoot": "pci0000:00"}}])
        self.assertEqual(gpu["sharedNodes"], SHARED)
        self.assertIsNone(gpu["sharedMissing"])
        amd = res["amd.com/gpu"]["devices"]
        self.assertEqual([(d["id"], d["paths"], d["numa"], d["pci"]["pcieRoot"]) for d in amd],
                         [("pci-0000:41:00.0", ["/dev/dri/card1", "/dev/dri/renderD128"], [1],
                           "pci0000:40")])
        accel = res["example.com/accel"]["devices"]
        self.assertEqual([(d["id"], d["paths"]) for d in accel],
                         [("pci-0000:80:02.0", ["/dev/accel/accel0"])])
        vfio = res["example.com/vfio"]["devices"]
        self.assertEqual([(d["id"], d["paths"]) for d in vfio],
                         [("pci-0000:00:07.0", ["/dev/vfio/42", "/dev/vfio/vfio"])])
        # a vendor alone: both NVIDIA devices, each with its own nodes
        self.assertEqual(ids_of(res["example.com/any-nvidia"]),
                         ["pci-0000:00:06.0", "pci-0000:00:07.0"])
        self.assertEqual(ids_of(res["example.com/h200"]), ["pci-0000:00:06.0"])

    def test_pci_as_a_filter(self):
        res = self.list_json("""resources:
  - name: amd.com/render
    devices:
      - path: /dev/dri/renderD*
        pci: {vendor: "1002"}
  - name: example.com/nv-nodes
    devices:
      - path: /dev/nvidia[0-9]*
        pci: {class: "0302"}
  - name: example.com/none
    devices:
      - path: /dev/dri/*
        pci: 10de
""")
        self.assertEqual(ids_of(res["amd.com/render"]), ["dri_renderD128"])
        self.assertEqual(res["amd.com/render"]["devices"][0]["numa"], [1])
        self.assertEqual(ids_of(res["example.com/nv-nodes"]), ["nvidia0"])
        # no sysfs parent: the NUMA node of its GPU
        self.assertEqual(res["example.com/nv-nodes"]["devices"][0]["numa"], [0])
        self.assertEqual(ids_of(res["example.com/none"]), [])


class Serving(PciTest):
    BODY = """resources:
  - name: nvidia.com/gpu
    rescanInterval: 200ms
    cdi: {kind: nvidia.com/gpu, deviceSpecs: true}
    devices:
      - pci: {vendor: 10de, driver: nvidia}
    sharedNodes: [/dev/nvidiactl, /dev/nvidia-uvm, /dev/nvidia-uvm-tools]
  - name: example.com/vfio
    rescanInterval: 200ms
    devices:
      - pci: {vendor: 10de, driver: vfio-pci}
"""

    def test_allocate_and_cdi_with_shared_nodes(self):
        kl, pl, evs = self.start(self.BODY, [GPU, "example.com/vfio"])
        self.assertEqual(ids_of(evs[GPU]), ["pci-0000:00:06.0"])
        self.assertEqual(health_of(evs[GPU]), {"pci-0000:00:06.0": "Healthy"})
        c = self.container(kl, GPU, "pci-0000:00:06.0")
        self.assertEqual(c["devices"], [self.spec(p) for p in ["/dev/nvidia0"] + SHARED])
        self.assertEqual(c["cdi_devices"], [{"name": "nvidia.com/gpu=pci-0000:00:06.0"}])
        with open(os.path.join(self.cdi_dir, "nvidia.com-gpu.json")) as f:
            spec = json.load(f)
        nodes = [n["path"] for n in spec["devices"][0]["containerEdits"]["deviceNodes"]]
        self.assertEqual(nodes, ["/dev/nvidia0"] + SHARED)
        c = self.container(kl, "example.com/vfio", "pci-0000:00:07.0")
        self.assertEqual(c["devices"], [self.spec("/dev/vfio/42"), self.spec("/dev/vfio/vfio")])
        self.assertStopsCleanly(pl)

    def test_shared_node_missing_then_back(self):
        kl, pl, evs = self.start(self.BODY, [GPU, "example.com/vfio"])
        mark = kl.mark()
        self.host.rm("/dev/nvidia-uvm")
        kl.wait_event(lambda e: e.get("event") == "devices" and e.get("resource") == GPU and
                      health_of(e) == {"pci-0000:00:06.0": "Unhealthy"}, T, since=mark)
        pl.wait_log("nvidia.com/gpu: shared node /dev/nvidia-uvm is missing: every device is "
                    "unhealthy until it appears", T)
        mark = kl.mark()
        self.host.node("/dev/nvidia-uvm")
        kl.wait_event(lambda e: e.get("event") == "devices" and e.get("resource") == GPU and
                      health_of(e) == {"pci-0000:00:06.0": "Healthy"}, T, since=mark)
        pl.wait_log("nvidia.com/gpu: the shared nodes are all there again", T)
        self.assertStopsCleanly(pl)

    def test_unbind_then_bind_to_vfio(self):
        """The kernel's order: the driver unbinds (its proc entry goes),
        vfio-pci binds and its group node appears; another device is
        removed. sysfs sends no inotify event: the rescan interval sees
        it."""
        kl, pl, evs = self.start(self.BODY, [GPU, "example.com/vfio"])
        self.assertEqual(ids_of(evs["example.com/vfio"]), ["pci-0000:00:07.0"])
        mark = kl.mark()
        self.pci.unbind(NV)
        shutil.rmtree(self.host.p("/proc/driver/nvidia/gpus/0000:00:06.0"))
        kl.wait_event(lambda e: e.get("event") == "devices" and e.get("resource") == GPU and
                      ids_of(e) == [], T, since=mark)
        mark = kl.mark()
        self.pci.bind(NV, "vfio-pci")
        self.pci.vfio_group(NV, 7)
        kl.wait_event(lambda e: e.get("event") == "devices" and
                      e.get("resource") == "example.com/vfio" and
                      ids_of(e) == ["pci-0000:00:06.0", "pci-0000:00:07.0"], T, since=mark)
        c = self.container(kl, "example.com/vfio", "pci-0000:00:06.0")
        self.assertEqual(c["devices"], [self.spec("/dev/vfio/7"), self.spec("/dev/vfio/vfio")])
        # a device removed (hot-unplug, or echo 1 > remove): its sysfs entry
        # and its nodes go
        mark = kl.mark()
        os.remove(os.path.join(self.host.sysfs, "bus/pci/devices/0000:00:07.0"))
        shutil.rmtree(os.path.join(self.host.sysfs, VFIO))
        self.host.rm("/dev/vfio/42")
        kl.wait_event(lambda e: e.get("event") == "devices" and
                      e.get("resource") == "example.com/vfio" and
                      ids_of(e) == ["pci-0000:00:06.0"], T, since=mark)
        # and back to nvidia
        mark = kl.mark()
        self.pci.unbind(NV)
        self.pci.bind(NV, "nvidia")
        self.pci.nvidia_info("0000:00:06.0", 0)
        kl.wait_event(lambda e: e.get("event") == "devices" and e.get("resource") == GPU and
                      ids_of(e) == ["pci-0000:00:06.0"], T, since=mark)
        self.assertStopsCleanly(pl)


BAD = [
    ("      - pci: {class: '0302y'}\n", "resources[0].devices[0].pci.class",
     "must be 2, 4 or 6 hexadecimal digits"),
    ("      - pci: {device: '2335'}\n", "resources[0].devices[0].pci",
     "needs vendor, class or driver"),
    ("      - pci: 10de:23356\n", "resources[0].devices[0].pci", "VENDOR:DEVICE in hexadecimal"),
    ("      - pci: {driver: ../x}\n", "resources[0].devices[0].pci.driver", "a driver's name"),
    ("      - {pci: 10de, usb: 0403}\n", "resources[0].devices[0]",
     "usb and pci cannot be used together"),
    ("      - pci: 10de\n    rescanInterval: 50ms\n", "resources[0].rescanInterval",
     "0s (off) or from 100ms"),
    ("      - pci: 10de\n    sharedNodes: [dev/nvidiactl]\n", "resources[0].sharedNodes[0]",
     "must be an absolute path"),
    ("      - pci: {vendor: 10de, bus: 3}\n", "resources[0].devices[0].pci.bus", "unknown key"),
]


class ConfigErrors(GenericTest):
    def test_bad_pci_configs(self):
        for tail, key, phrase in BAD:
            with self.subTest(key=key, phrase=phrase):
                cfg = self.raw_config("resources:\n  - name: nvidia.com/gpu\n    devices:\n" + tail,
                                      "bad.yaml")
                out = kdptest.run([binary("kdp-generic"), "--config", cfg, "--check",
                                   "--device-plugin-dir", self.dir], T)
                self.assertEqual(out.returncode, 1, out)
                self.assertIn("%s: " % key, out.stderr)
                self.assertIn(phrase, out.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2 if "-v" in sys.argv else 1,
                  argv=[a for a in sys.argv if a != "-v"])
