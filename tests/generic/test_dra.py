#!/usr/bin/python3
"""kdp-generic-dra, kdp-generic as a DRA driver (a resource's dra: section,
docs/generic.md)
end to end, on the fake PCI host of test_pci.py, between the API-server
emulator (kdp-test-apiserver) and the kubelet emulator's DRA side
(kdp-test-kubelet): the slices hold each GPU with the standard attributes
(pciBusID, pcieRoot, numaNode), its PCI IDs and the entry's attributes and
capacity; --list shows the same; a claim is prepared with the GPU's node,
the shared nodes and the env through CDI, and unprepared; a GPU unbound
leaves the slices; config errors.

usage: KDP_BIN_DIR=<build>/bin /usr/bin/python3 test_dra.py [-v] [Test.name ...]
"""

import json
import os
import shutil
import sys
import time
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "pylib"))
sys.path.insert(0, HERE)
import kdptest  # noqa: E402
from kdptest import T, binary  # noqa: E402
from kdptest.apiserver import ApiServer  # noqa: E402
from kdptest.kubelet import Kubelet  # noqa: E402
from test_generic import FakeHost  # noqa: E402  (the fixture only)
from test_pci import NV, SHARED, PciHost  # noqa: E402

DRV = "gpu.example.com"
NODE = "node-a"
GPU_NAME = "pci-0000-00-06-0"

BODY = """resources:
  - name: nvidia.com/gpu
    rescanInterval: 200ms
    dra: {driver: gpu.example.com, unhealthyTaint: NoExecute}
    devices:
      - pci: {vendor: 10de, driver: nvidia}
        attributes: {model: H200, memoryGiB: 141, mig: false, firmware: {version: 96.0.165}}
        capacity: {memory: 141Gi}
    sharedNodes: [/dev/nvidiactl, /dev/nvidia-uvm, /dev/nvidia-uvm-tools]
    env: {NVIDIA_VISIBLE_DEVICES: void}
"""


class Base(kdptest.ProcTest):
    TEST_BOUND = 90.0

    def setUp(self):
        super().setUp()
        for d in ("root/device-plugins", "root/plugins_registry", "cdi", "files"):
            os.makedirs(self.path(d), exist_ok=True)
        self.host = FakeHost(self.path("host"))
        self.pci = PciHost(self.host).standard()

    def config(self, body, api=None):
        head = "root: %s\nsysfs: %s\ncdiDir: %s\n" % (self.host.root, self.host.sysfs,
                                                     self.path("cdi"))
        if api:
            head += "kubeconfig: %s\n" % api.kubeconfig_token
        path = self.path("files", "config.yaml")
        with open(path, "w") as f:
            f.write(head + body)
        return path

    def generic_argv(self, cfg, *extra):
        return [binary("kdp-generic-dra"), "--config", cfg, "--kubelet-root", self.path("root"),
                "--device-plugin-dir", self.path("root", "device-plugins")] + list(extra)

    def up(self):
        api = self.start_proc(ApiServer(self.path("api"), nodes=[NODE]))
        kl = self.start_proc(Kubelet(self.path("root", "device-plugins"),
                                     registry=self.path("root", "plugins_registry")))
        env = {k: v for k, v in os.environ.items()
               if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "POD_UID")}
        env["NODE_NAME"] = NODE
        gen = self.start_proc(kdptest.Proc(self.generic_argv(self.config(BODY, api)),
                                           name="kdp-generic-dra", env=env))
        kl.wait_dra_registered(DRV, T)
        return api, kl, gen

    def devices(self, api):
        return [d for s in api.slices() if s["spec"]["driver"] == DRV
                for d in s["spec"].get("devices") or []]

    def wait_devices(self, api, names, timeout=T):
        deadline = time.time() + timeout
        while True:
            devs = self.devices(api)
            if sorted(d["name"] for d in devs) == names:
                return devs
            if time.time() > deadline:
                raise AssertionError("slices hold %s, not %s" % (devs, names))
            time.sleep(0.05)


class Driver(Base):
    def test_slices_prepare_unprepare(self):
        api, kl, gen = self.up()
        dev = self.wait_devices(api, [GPU_NAME])[0]
        self.assertEqual(dev["attributes"], {
            "resource.kubernetes.io/pciBusID": {"string": "0000:00:06.0"},
            "resource.kubernetes.io/pcieRoot": {"string": "pci0000:00"},
            "resource.kubernetes.io/numaNode": {"int": 0},
            "pciVendorID": {"string": "10de"},
            "pciDeviceID": {"string": "2335"},
            "pciClass": {"string": "030200"},
            "kernelDriver": {"string": "nvidia"},
            "model": {"string": "H200"},
            "memoryGiB": {"int": 141},
            "mig": {"bool": False},
            "firmware": {"version": "96.0.165"}})
        self.assertEqual(dev["capacity"], {"memory": {"value": "141Gi"}})
        uid = api.create_claim("default", "c1", DRV, NODE, "gpu", [GPU_NAME])
        r = kl.dra_prepare(DRV, ["default/c1/" + uid])
        self.assertTrue(r["ok"], r)
        d = r["by_uid"][uid]["devices"][0]
        self.assertEqual(d["cdi_device_ids"], ["k8s.%s/claim=%s-%s" % (DRV, uid, GPU_NAME)])
        spec_path = self.path("cdi", "k8s.%s-claim_%s.json" % (DRV, uid))
        with open(spec_path) as f:
            spec = json.load(f)
        edits = spec["devices"][0]["containerEdits"]
        self.assertEqual([n["path"] for n in edits["deviceNodes"]], ["/dev/nvidia0"] + SHARED)
        self.assertEqual(edits["env"], ["NVIDIA_VISIBLE_DEVICES=void"])
        r = kl.dra_unprepare(DRV, ["default/c1/" + uid])
        self.assertTrue(r["ok"], r)
        self.assertFalse(os.path.exists(spec_path))
        # DRA only: nothing registered with the device-plugin API
        self.assertEqual([e for e in kl.events_since(0, "registered")], [])

    def test_unbound_gpu_leaves_the_slices(self):
        api, kl, gen = self.up()
        self.wait_devices(api, [GPU_NAME])
        self.pci.unbind(NV)
        shutil.rmtree(self.host.p("/proc/driver/nvidia/gpus/0000:00:06.0"))
        self.wait_devices(api, [])
        self.pci.bind(NV, "nvidia")
        self.pci.nvidia_info("0000:00:06.0", 0)
        self.wait_devices(api, [GPU_NAME])

    def test_shared_node_missing_taints_the_gpu(self):
        api, kl, gen = self.up()
        self.wait_devices(api, [GPU_NAME])
        self.host.rm("/dev/nvidia-uvm")
        deadline = time.time() + T
        while True:
            taints = self.devices(api)[0].get("taints") or []
            if taints or time.time() > deadline:
                break
            time.sleep(0.05)
        self.assertEqual([(x["key"], x["effect"]) for x in taints],
                         [(DRV + "/unhealthy", "NoExecute")])
        self.host.node("/dev/nvidia-uvm")
        deadline = time.time() + T
        while self.devices(api)[0].get("taints") and time.time() < deadline:
            time.sleep(0.05)
        self.assertFalse(self.devices(api)[0].get("taints"))

    def test_deploy_configmap_checks(self):
        """deploy/generic-dra's configuration is valid as shipped."""
        import yaml  # python3-yaml (make test installs it)
        with open(os.path.join(HERE, "..", "..", "deploy", "generic-dra", "configmap.yaml")) as f:
            cm = yaml.safe_load(f)
        path = self.path("files", "deploy.yaml")
        with open(path, "w") as f:
            f.write(cm["data"]["config.yaml"])
        out = kdptest.run([binary("kdp-generic-dra"), "--config", path, "--check",
                           "--device-plugin-dir", self.path("root", "device-plugins")], T)
        self.assertEqual(out.returncode, 0, out.stderr)

    def test_kdp_generic_refuses_dra(self):
        """Plain kdp-generic (no libkdp-dra) says which binary serves DRA."""
        out = kdptest.run([binary("kdp-generic"), "--config", self.config(BODY), "--check"], T)
        self.assertEqual(out.returncode, 1, out)
        self.assertIn("resources[0].dra: kdp-generic serves no DRA: run kdp-generic-dra", out.stderr)

    def test_list_shows_the_slice_view(self):
        out = kdptest.run(self.generic_argv(self.config(BODY), "--list"), T)
        self.assertEqual(out.returncode, 0, out.stderr)
        res = json.loads(out.stdout)
        self.assertEqual(res["driver"], DRV)
        dra = res["devices"][0]["dra"]
        self.assertEqual(dra["name"], GPU_NAME)
        self.assertEqual(dra["attributes"]["resource.kubernetes.io/pciBusID"],
                         {"string": "0000:00:06.0"})
        self.assertEqual(dra["attributes"]["firmware"], {"version": "96.0.165"})
        self.assertEqual(dra["capacity"], {"memory": "141Gi"})


BAD = [
    ("    dra: {devicePlugin: true}\n", "resources[0].dra", "driver is required"),
    ("    dra: {driver: GPU_Example}\n", "resources[0].dra.driver", "invalid DRA driver name"),
    ("    dra: {driver: gpu.example.com, unhealthyTaint: Soon}\n",
     "resources[0].dra.unhealthyTaint", "must be NoSchedule, NoExecute"),
    ("    count: 2\n    dra: {driver: gpu.example.com}\n", "resources[0].dra",
     "cannot serve count above 1"),
    ("    dra: {driver: gpu.example.com}\n  - name: example.com/b\n    devices: [/dev/null]\n"
     "    dra: {driver: gpu.example.com}\n", "resources[1].dra.driver", "is also resources[0]'s"),
]
ENTRY_BAD = [
    ("        attributes: {9lives: 1}\n", "resources[0].devices[0].attributes.9lives",
     "must be a C identifier"),
    ("        attributes: {model: %s}\n" % ("x" * 65), "resources[0].devices[0].attributes.model",
     "64 bytes at most"),
    ("        capacity: {memory: lots}\n", "resources[0].devices[0].capacity.memory",
     "must be a quantity"),
    ("        attributes: {memory: 1}\n        capacity: {memory: 1Gi}\n",
     "resources[0].devices[0].capacity.memory", "is also an attribute"),
    ("        attributes: {Bad_Domain.com/x: 1}\n",
     "resources[0].devices[0].attributes.Bad_Domain.com/x", "DNS subdomain"),
]


class ConfigErrors(Base):
    def check(self, text):
        path = self.path("files", "bad.yaml")
        with open(path, "w") as f:
            f.write(text)
        return kdptest.run([binary("kdp-generic-dra"), "--config", path, "--check",
                            "--device-plugin-dir", self.path("root", "device-plugins")], T)

    def test_bad_dra_configs(self):
        cases = [("resources:\n  - name: nvidia.com/gpu\n    devices: [/dev/null]\n" + tail, k, p)
                 for tail, k, p in BAD]
        cases += [("resources:\n  - name: nvidia.com/gpu\n    dra: {driver: gpu.example.com}\n"
                   "    devices:\n      - pci: 10de\n" + tail, k, p) for tail, k, p in ENTRY_BAD]
        for text, key, phrase in cases:
            with self.subTest(key=key, phrase=phrase):
                out = self.check(text)
                self.assertEqual(out.returncode, 1, out)
                self.assertIn("%s: " % key, out.stderr)
                self.assertIn(phrase, out.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2 if "-v" in sys.argv else 1,
                  argv=[a for a in sys.argv if a != "-v"])
