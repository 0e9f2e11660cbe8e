#!/usr/bin/python3
"""kdp-generic end to end: the plugin from a YAML file, on a fake /dev and
sysfs tree (per-test temp dir), against the kubelet emulator
(kdp-test-kubelet, grpc-go). Globs, USB matching, groups, count, NUMA,
hot-plug, CDI, mounts/env, config errors (file:line:key), reload (SIGHUP,
--watch-config).

usage: KDP_BIN_DIR=<build>/bin /usr/bin/python3 test_generic.py [-v] [Test.name ...]

Python 3 stdlib only. Every wait is bounded (kdptest.T), every process
stopped at the end of its test (kdptest.plugin.PluginTest).
"""

import json
import os
import signal
import sys
import time
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
import kdptest  # noqa: E402
from kdptest import T, binary, figure  # noqa: E402
from kdptest.plugin import PluginTest  # noqa: E402

SERIAL = "example.com/serial"
SERIAL_SOCK = "kdp-example-com-serial.sock"

PCI = "devices/pci0000:00/0000:00:14.0"
USB1 = PCI + "/usb1"
DEV11 = USB1 + "/1-1"
DEV12 = USB1 + "/1-2"


def sock_for(resource):
    """kdp-generic's default socket name (docs/generic.md)."""
    return "kdp-" + "".join(c if (c.islower() or c.isdigit()) else
                            (c.lower() if c.isupper() else "-") for c in resource) + ".sock"


def ids_of(ev):
    return sorted(d["id"] for d in ev["devices"])


def numa_of(ev):
    return {d["id"]: d["numa"] for d in ev["devices"]}


class FakeHost:
    """A fake host root: <root>/dev (regular files and fifos as nodes) and
    <root>/sys (attributes as files, relative links as sysfs makes them)."""

    def __init__(self, root):
        self.root = root
        self.sysfs = os.path.join(root, "sys")
        os.makedirs(os.path.join(root, "dev"), exist_ok=True)
        os.makedirs(self.sysfs, exist_ok=True)

    def p(self, host_path):
        return self.root + host_path

    def node(self, host_path, fifo=False):
        path = self.p(host_path)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if fifo:
            os.mkfifo(path)
        else:
            open(path, "w").close()

    def rm(self, host_path):
        os.remove(self.p(host_path))

    def link(self, target, host_path):
        path = self.p(host_path)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.symlink(target, path)

    def sys(self, rel, content):
        path = os.path.join(self.sysfs, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(content)

    def sys_link(self, target, link):
        path = os.path.join(self.sysfs, link)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.symlink("../" * link.count("/") + target, path)

    def usb(self, sysdir, vid, pid, serial, devnum):
        self.sys(sysdir + "/idVendor", vid + "\n")
        self.sys(sysdir + "/idProduct", pid + "\n")
        if serial:
            self.sys(sysdir + "/serial", serial + "\n")
        self.sys(sysdir + "/busnum", "1\n")
        self.sys(sysdir + "/devnum", "%d\n" % devnum)
        self.sys(sysdir + "/uevent", "DEVNAME=bus/usb/001/%03d\nDEVTYPE=usb_device\n" % devnum)
        self.node("/dev/bus/usb/001/%03d" % devnum)
        self.sys_link(sysdir, "bus/usb/devices/" + os.path.basename(sysdir))

    def usb_serial(self, sysdir, tty):
        """A USB serial port of the USB device at sysdir: /dev/<tty>."""
        iface = sysdir + "/" + os.path.basename(sysdir) + ":1.0"
        self.sys(iface + "/bInterfaceNumber", "00\n")
        port = "%s/%s/tty/%s" % (iface, tty, tty)
        self.sys(port + "/uevent", "DEVNAME=%s\n" % tty)
        self.sys_link(port, "class/tty/" + tty)
        self.node("/dev/" + tty)

    def standard(self):
        """An FTDI adapter (0403:6001, serial A1) with ttyUSB0 and a CH340
        (1a86:7523, no serial) with ttyUSB1, on a USB controller on NUMA node
        1; /dev/ttyS0 on nothing; /dev/kvm, /dev/fuse (virtual, no NUMA);
        /dev/net/tun; /dev/nvme0 on a PCI device with numa_node -1."""
        self.sys(PCI + "/numa_node", "1\n")
        self.usb(DEV11, "0403", "6001", "A1", 2)
        self.usb_serial(DEV11, "ttyUSB0")
        self.usb(DEV12, "1a86", "7523", None, 3)
        self.usb_serial(DEV12, "ttyUSB1")
        self.link("../../ttyUSB0", "/dev/serial/by-id/usb-FTDI_FT232R_A1-if00-port0")
        for name in ("kvm", "fuse"):
            self.sys("devices/virtual/misc/%s/uevent" % name, "DEVNAME=%s\n" % name)
            self.sys_link("devices/virtual/misc/" + name, "class/misc/" + name)
            self.node("/dev/" + name)
        self.node("/dev/net/tun", fifo=True)
        self.sys("devices/pci0000:00/0000:00:1c.0/numa_node", "-1\n")
        self.sys("devices/pci0000:00/0000:00:1c.0/nvme/nvme0/uevent", "DEVNAME=nvme0\n")
        self.sys_link("devices/pci0000:00/0000:00:1c.0/nvme/nvme0", "class/nvme/nvme0")
        self.node("/dev/nvme0")
        self.node("/dev/ttyS0")
        return self


class GenericTest(PluginTest):
    def setUp(self):
        super().setUp()
        self.host = FakeHost(self.subdir("host")).standard()
        self.cdi_dir = os.path.join(self.subdir("cdi"), "run")

    def config(self, body, name="config.yaml"):
        """Writes a config: the fake roots, then body. Returns its path."""
        text = "root: %s\nsysfs: %s\ncdiDir: %s\n%s" % (self.host.root, self.host.sysfs,
                                                       self.cdi_dir, body)
        return self.raw_config(text, name)

    def raw_config(self, text, name="config.yaml"):
        path = self.file(name)
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.rename(tmp, path)
        return path

    def generic(self, cfg, resources, extra=()):
        return self.plugin("kdp-generic",
                           ["--config", cfg, "--device-plugin-dir", self.dir] + list(extra),
                           sock_for(resources[0]), resources, name="kdp-generic")

    def start(self, body, resources):
        kl = self.kubelet()
        pl = self.generic(self.config(body), resources)
        evs = {}
        for res in resources:
            kl.wait_event("registered", T, since=0, resource=res)
            evs[res] = kl.wait_event("devices", T, since=0, resource=res)
        return kl, pl, evs

    def container(self, kl, resource, ids):
        r = self.assertOk(kl.command("allocate %s %s" % (resource, ids)))
        self.assertEqual(len(r["container_responses"]), 1)
        return r["container_responses"][0]

    @staticmethod
    def spec(path, perm="rw"):
        return {"container_path": path, "host_path": path, "permissions": perm}


class Discovery(GenericTest):
    def test_four_line_serial_example(self):
        kl, pl, evs = self.start("resources:\n"
                                 "  - name: example.com/serial\n"
                                 "    devices:\n"
                                 "      - path: /dev/ttyUSB*\n", [SERIAL])
        reg = kl.events_since(0, "registered", resource=SERIAL)[0]
        self.assertEqual(reg["endpoint"], SERIAL_SOCK)
        ev = evs[SERIAL]
        self.assertEqual(ids_of(ev), ["ttyUSB0", "ttyUSB1"])
        self.assertEqual(numa_of(ev), {"ttyUSB0": [1], "ttyUSB1": [1]})
        self.assertEqual({d["health"] for d in ev["devices"]}, {"Healthy"})
        c = self.container(kl, SERIAL, "ttyUSB1")
        self.assertEqual(c["devices"], [self.spec("/dev/ttyUSB1")])
        self.assertEqual(c["envs"], {"KDP_DEVICES_EXAMPLE_COM_SERIAL": "ttyUSB1"})
        self.assertEqual(c["mounts"], [])
        self.assertEqual(c["cdi_devices"], [])
        self.assertFailed(kl.command("allocate %s ttyUSB7" % SERIAL), "InvalidArgument", "ttyUSB7")
        self.assertStopsCleanly(pl)
        self.assertEqual(self.dir_entries(), ["kubelet.sock"])

    def test_preferred_packed(self):
        kl, pl, evs = self.start("resources:\n"
                                 "  - name: example.com/serial\n"
                                 "    count: 2\n"
                                 "    preferred: packed\n"
                                 "    devices:\n"
                                 "      - path: /dev/ttyUSB*\n", [SERIAL])
        reg = kl.events_since(0, "registered", resource=SERIAL)[0]
        self.assertTrue(reg["options"]["get_preferred_allocation_available"], reg)
        r = self.assertOk(kl.command("preferred %s available=ttyUSB1-1,ttyUSB0-0,ttyUSB1-0 "
                                     "must=ttyUSB1-1 size=2" % SERIAL))
        # count is kdp's replicas: packed fills the must-include ID's device
        # (ttyUSB1) before taking another (the fewest physical devices)
        self.assertEqual(r["container_responses"][0]["deviceIDs"], ["ttyUSB1-1", "ttyUSB1-0"])

    def test_spread_and_one_per_container(self):
        kl, pl, evs = self.start("resources:\n"
                                 "  - name: example.com/serial\n"
                                 "    count: 2\n"
                                 "    preferred: spread\n"
                                 "    onePerContainer: true\n"
                                 "    devices:\n"
                                 "      - path: /dev/ttyUSB*\n", [SERIAL])
        ids = ids_of(evs[SERIAL])
        self.assertIn("ttyUSB0-1", ids)
        self.assertIn("ttyUSB1-0", ids)
        # spread: one replica of each adapter before a second of any
        r = self.assertOk(kl.command("preferred %s available=ttyUSB0-0,ttyUSB0-1,ttyUSB1-1,"
                                     "ttyUSB1-0 size=2" % SERIAL))
        self.assertEqual(r["container_responses"][0]["deviceIDs"], ["ttyUSB0-0", "ttyUSB1-0"])
        # onePerContainer: two replicas for one container are refused
        self.assertFailed(kl.command("allocate %s ttyUSB0-0,ttyUSB1-1" % SERIAL),
                          "InvalidArgument", "allows one per container")
        c = self.container(kl, SERIAL, "ttyUSB1-1")
        self.assertEqual(c["devices"], [self.spec("/dev/ttyUSB1")])
        self.assertEqual(c["envs"], {"KDP_DEVICES_EXAMPLE_COM_SERIAL": "ttyUSB1-1"})
        self.assertStopsCleanly(pl)

    def test_usb_matching(self):
        body = """resources:
  - name: example.com/ftdi
    devices:
      - path: /dev/ttyUSB*
        usb: 0403:6001
  - name: example.com/by-serial
    devices:
      - path: /dev/ttyUSB*
        usb: {vendor: "0403", serial: A1}
      - path: /dev/ttyUSB*
        usb: {vendor: "1a86", serial: NOPE}
  - name: example.com/ch340
    devices:
      - usb: {vendor: 1a86, product: "7523"}
  - name: example.com/by-id
    devices:
      - /dev/serial/by-id/*
"""
        res = ["example.com/ftdi", "example.com/by-serial", "example.com/ch340",
               "example.com/by-id"]
        kl, pl, evs = self.start(body, res)
        self.assertEqual(ids_of(evs[res[0]]), ["ttyUSB0"])
        self.assertEqual(ids_of(evs[res[1]]), ["ttyUSB0"])
        # a USB device by vendor:product: all its nodes are one device
        self.assertEqual(ids_of(evs[res[2]]), ["usb-1-2"])
        self.assertEqual(numa_of(evs[res[2]]), {"usb-1-2": [1]})
        c = self.container(kl, res[2], "usb-1-2")
        self.assertEqual(c["devices"], [self.spec("/dev/bus/usb/001/003"),
                                        self.spec("/dev/ttyUSB1")])
        # by-id links are handed out as the links
        self.assertEqual(ids_of(evs[res[3]]), ["serial_by-id_usb-FTDI_FT232R_A1-if00-port0"])
        self.assertEqual(numa_of(evs[res[3]]),
                         {"serial_by-id_usb-FTDI_FT232R_A1-if00-port0": [1]})
        self.assertStopsCleanly(pl)

    def test_groups_count_numa_mounts_env(self):
        body = """resources:
  - name: example.com/vm
    count: 3
    permissions: rwm
    devices:
      - paths: [/dev/kvm, /dev/net/tun]
        id: vm
      - paths: [/dev/kvm, /dev/vhost-net]   # incomplete: no device
    mounts:
      - hostPath: /etc/vm
        containerPath: /etc/vm-host
        readOnly: true
      - hostPath: /var/lib/vm
    env:
      VM_MODE: fast
      EMPTY: ""
  - name: example.com/disk
    devices:
      - /dev/nvme0
      - /dev/ttyS0
"""
        kl, pl, evs = self.start(body, ["example.com/vm", "example.com/disk"])
        self.assertEqual(ids_of(evs["example.com/vm"]), ["vm-0", "vm-1", "vm-2"])
        self.assertEqual(numa_of(evs["example.com/vm"]), {"vm-0": [], "vm-1": [], "vm-2": []})
        # numa_node -1 and no sysfs entry: no topology
        self.assertEqual(numa_of(evs["example.com/disk"]), {"nvme0": [], "ttyS0": []})
        c = self.container(kl, "example.com/vm", "vm-0,vm-2")
        self.assertEqual(c["devices"], [self.spec("/dev/kvm", "rwm"),
                                        self.spec("/dev/net/tun", "rwm")])  # once, not twice
        self.assertEqual(c["mounts"], [
            {"container_path": "/etc/vm-host", "host_path": "/etc/vm", "read_only": True},
            {"container_path": "/var/lib/vm", "host_path": "/var/lib/vm", "read_only": False}])
        self.assertEqual(c["envs"], {"VM_MODE": "fast", "EMPTY": "",
                                     "KDP_DEVICES_EXAMPLE_COM_VM": "vm-0,vm-2"})
        # one container per request: two containers share the device
        r = self.assertOk(kl.command("allocate example.com/vm vm-0;vm-1"))
        self.assertEqual(len(r["container_responses"]), 2)
        self.assertStopsCleanly(pl)

    def test_list_flag(self):
        cfg = self.config("resources:\n"
                          "  - name: example.com/serial\n"
                          "    count: 2\n"
                          "    devices: [/dev/ttyUSB*, /dev/nvme0]\n")
        out = kdptest.run([binary("kdp-generic"), "--config", cfg, "--list"], T)
        self.assertEqual(out.returncode, 0, out.stderr)
        got = json.loads(out.stdout)
        self.assertEqual(got["resource"], SERIAL)
        self.assertEqual(got["ids"], 6)
        self.assertEqual([(d["id"], d["paths"], d["numa"]) for d in got["devices"]],
                         [("nvme0", ["/dev/nvme0"], []), ("ttyUSB0", ["/dev/ttyUSB0"], [1]),
                          ("ttyUSB1", ["/dev/ttyUSB1"], [1])])

    def test_list_escapes_paths(self):
        """--list is JSON whatever the file names: a newline as \\n, a quote
        escaped, a byte that is not UTF-8 as \\ufffd (RFC 8259, section 8.1;
        the escaper kdpctl uses too)."""
        for name in (b"odd\n1", b'odd"2', b"odd\xff3"):
            open(os.fsencode(self.host.p("/dev/")) + name, "w").close()
        cfg = self.config("resources:\n"
                          "  - name: example.com/odd\n"
                          "    devices: [/dev/odd*]\n")
        out = kdptest.run([binary("kdp-generic"), "--config", cfg, "--list"], T)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn('"/dev/odd\\n1"', out.stdout)
        self.assertIn('"/dev/odd\\ufffd3"', out.stdout)
        got = json.loads(out.stdout)
        self.assertEqual(sorted(p for d in got["devices"] for p in d["paths"]),
                         ["/dev/odd\n1", '/dev/odd"2', "/dev/odd\ufffd3"])


class Hotplug(GenericTest):
    def test_nodes_come_and_go(self):
        body = """resources:
  - name: example.com/serial
    count: 2
    devices:
      - path: /dev/ttyUSB*
  - name: example.com/tun
    devices:
      - paths: [/dev/net/tun, /dev/vhost-net]
        id: net
  - name: example.com/late
    devices:
      - /dev/later/dir/node*
"""
        kl, pl, evs = self.start(body, [SERIAL, "example.com/tun", "example.com/late"])
        self.assertEqual(ids_of(evs["example.com/tun"]), [])
        self.assertEqual(ids_of(evs["example.com/late"]), [])
        # appears: pushed at once
        mark = kl.mark()
        t0 = time.time_ns()
        self.host.node("/dev/ttyUSB2", fifo=True)
        ev = kl.wait_event("devices", T, since=mark, resource=SERIAL)
        figure("hot-plug: node created -> devices event", "%.1f ms" % ((ev["t_ns"] - t0) / 1e6))
        self.assertEqual(ids_of(ev), ["ttyUSB0-0", "ttyUSB0-1", "ttyUSB1-0", "ttyUSB1-1",
                                      "ttyUSB2-0", "ttyUSB2-1"])
        # disappears
        mark = kl.mark()
        self.host.rm("/dev/ttyUSB0")
        ev = kl.wait_event("devices", T, since=mark, resource=SERIAL)
        self.assertEqual(ids_of(ev), ["ttyUSB1-0", "ttyUSB1-1", "ttyUSB2-0", "ttyUSB2-1"])
        # a group appears once every part is there
        mark = kl.mark()
        self.host.node("/dev/vhost-net")
        ev = kl.wait_event("devices", T, since=mark, resource="example.com/tun")
        self.assertEqual(ids_of(ev), ["net"])
        c = self.container(kl, "example.com/tun", "net")
        self.assertEqual(c["devices"], [self.spec("/dev/net/tun"), self.spec("/dev/vhost-net")])
        # a directory that did not exist at start
        mark = kl.mark()
        os.makedirs(self.host.p("/dev/later/dir"))
        self.host.node("/dev/later/dir/node1")
        ev = kl.wait_event("devices", T, since=mark, resource="example.com/late")
        self.assertEqual(ids_of(ev), ["later_dir_node1"])
        # other resources did not see a change
        self.assertEqual(kl.events_since(mark, "devices", resource=SERIAL), [])
        self.assertStopsCleanly(pl)

    def test_usb_device_plugged(self):
        body = """resources:
  - name: example.com/dongle
    devices:
      - usb: 1050:0407
"""
        kl, pl, evs = self.start(body, ["example.com/dongle"])
        self.assertEqual(ids_of(evs["example.com/dongle"]), [])
        mark = kl.mark()
        # the kernel: sysfs first, then the nodes
        self.host.sys(USB1 + "/1-3/1-3:1.0/0003:1050:0407.0001/hidraw/hidraw0/uevent",
                      "DEVNAME=hidraw0\n")
        self.host.usb(USB1 + "/1-3", "1050", "0407", "Y1", 5)
        self.host.node("/dev/hidraw0")
        ev = kl.wait_event(lambda e: e.get("event") == "devices" and ids_of(e) == ["usb-1-3"],
                           T, since=mark)
        self.assertEqual(numa_of(ev), {"usb-1-3": [1]})
        deadline = time.monotonic() + T
        while True:  # the hidraw node may come a moment after the device (same ID)
            c = self.container(kl, "example.com/dongle", "usb-1-3")
            if len(c["devices"]) == 2 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        self.assertEqual(c["devices"], [self.spec("/dev/bus/usb/001/005"),
                                        self.spec("/dev/hidraw0")])
        self.assertStopsCleanly(pl)


class Cdi(GenericTest):
    def read_spec(self, name="example.com-serial.json"):
        with open(os.path.join(self.cdi_dir, name)) as f:
            return json.load(f)

    def test_spec_and_cdi_devices(self):
        body = """resources:
  - name: example.com/serial
    cdi: true
    devices:
      - path: /dev/ttyUSB*
  - name: example.com/vm
    cdi: {kind: vendor.example/vm, deviceSpecs: true}
    devices:
      - paths: [/dev/kvm, /dev/net/tun]
        id: vm
"""
        kl, pl, _ = self.start(body, [SERIAL, "example.com/vm"])
        spec = self.read_spec()
        self.assertEqual(spec["cdiVersion"], "0.3.0")
        self.assertEqual(spec["kind"], SERIAL)
        self.assertEqual(spec["devices"], [
            {"name": "ttyUSB0", "containerEdits": {"deviceNodes": [
                {"path": "/dev/ttyUSB0", "permissions": "rw"}]}},
            {"name": "ttyUSB1", "containerEdits": {"deviceNodes": [
                {"path": "/dev/ttyUSB1", "permissions": "rw"}]}}])
        c = self.container(kl, SERIAL, "ttyUSB0")
        self.assertEqual(c["cdi_devices"], [{"name": "example.com/serial=ttyUSB0"}])
        self.assertEqual(c["devices"], [])  # CDI only, by default
        vm = self.read_spec("vendor.example-vm.json")
        self.assertEqual([d["name"] for d in vm["devices"]], ["vm"])
        self.assertEqual(len(vm["devices"][0]["containerEdits"]["deviceNodes"]), 2)
        c = self.container(kl, "example.com/vm", "vm")
        self.assertEqual(c["cdi_devices"], [{"name": "vendor.example/vm=vm"}])
        self.assertEqual(c["devices"], [self.spec("/dev/kvm"), self.spec("/dev/net/tun")])
        # hot-plug rewrites the spec (atomically: a rename)
        mark = kl.mark()
        self.host.node("/dev/ttyUSB5")
        kl.wait_event("devices", T, since=mark, resource=SERIAL)
        self.assertEqual([d["name"] for d in self.read_spec()["devices"]],
                         ["ttyUSB0", "ttyUSB1", "ttyUSB5"])
        self.assertEqual(sorted(os.listdir(self.cdi_dir)),
                         ["example.com-serial.json", "vendor.example-vm.json"])
        self.assertStopsCleanly(pl)
        # left in place at exit: containers that restart still need it
        self.assertTrue(os.path.exists(os.path.join(self.cdi_dir, "example.com-serial.json")))


# A dozen bad configs: (text, the line, the key, a phrase of the message).
BAD = [
    ("resources:\n  - name: example.com/x\n    devices: [/dev/x]\n    preferred: tight\n",
     4, "resources[0].preferred", 'must be "packed" or "none", not "tight"'),
    ("resources:\n  - name: example.com/x\n    count: 0\n    devices: [/dev/x]\n",
     3, "resources[0].count", "must be a positive integer"),
    ("resources:\n  - name: example.com/x\n    devices: [/dev/x]\n    count: many\n",
     4, "resources[0].count", "must be a positive integer"),
    ("resources:\n  - name: example.com/x\n    devices: [/dev/x]\n    count: 5000\n",
     4, "resources[0].count", "must be at most 1024"),
    ("resources:\n  - name: x\n    devices: [/dev/x]\n",
     2, "resources[0].name", "invalid resource name"),
    ("resources:\n  - name: example.com/x\n    devices:\n      - path: dev/ttyUSB*\n",
     4, "resources[0].devices[0].path", "must be an absolute path"),
    ("resources:\n  - name: example.com/x\n    devices:\n      - usb: 12345\n",
     4, "resources[0].devices[0].usb", "hexadecimal"),
    ("resources:\n  - name: example.com/x\n    devices:\n      - usb: {product: '6001'}\n",
     4, "resources[0].devices[0].usb", "vendor is required"),
    ("resources:\n  - name: example.com/x\n    devcies: [/dev/x]\n",
     3, "resources[0].devcies", "unknown key"),
    ("resources:\n  - name: example.com/x\n    devices: [/dev/x]\n  - name: example.com/x\n"
     "    devices: [/dev/y]\n", 4, "resources[1].name", "duplicate resource name"),
    ("resources:\n  - name: example.com/x\n    permissions: rx\n    devices: [/dev/x]\n",
     3, "resources[0].permissions", "rwm"),
    ("resources:\n  - name: example.com/x\n    devices: [/dev/x]\n    mounts:\n"
     "      - containerPath: /a\n", 5, "resources[0].mounts[0]", "hostPath is required"),
    ("resources:\n  - name: example.com/x\n    devices: [/dev/x]\n    env: [A, B]\n",
     4, "resources[0].env", "must be a mapping"),
    ("resources:\n  - name: example.com/x\n    devices: [/dev/x]\n    cdi: {kind: nokind}\n",
     4, "resources[0].cdi.kind", "invalid CDI kind"),
    ("resources:\n  - name: example.com/x\n    devices:\n      - id: a\n        path: /dev/x\n",
     4, "resources[0].devices[0]", "id is only for a group"),
    ("resources:\n  - name: example.com/x\n    devices: []\n",
     3, "resources[0].devices", "at least 1 item"),
    ("resources:\n  - name: example.com/x\n    name: example.com/y\n    devices: [/dev/x]\n",
     3, "resources[0].name", "duplicate key"),
    ("resources:\n  - name: example.com/x\n    devices: [/dev/x]\n    socket: a/b.sock\n",
     4, "resources[0].socket", "without '/'"),
    ("resources:\n  - name: example.com/x\n    devices: [/dev/x]\n  -\n",
     4, "resources[1]", "must be a mapping"),
    ("resources:\n  - name: example.com/x\n   devices: [/dev/x]\n",
     3, "", "YAML syntax error"),
    ("resources: 3\n", 1, "resources", "must be a list"),
    ("", 1, "", "the file is empty"),
    ("root: /\n", 1, "resources", "is required"),
    # 100,000 nested brackets (200 KB): refused before libyaml's scanner,
    # which would take about a minute over them
    ("# deep\nresources: " + "[" * 100000 + "]" * 100000 + "\n", 2, "",
     "[ and { nest deeper than 64 levels"),
]


class ConfigErrors(GenericTest):
    def check(self, text):
        cfg = self.raw_config(text, "bad.yaml")
        out = kdptest.run([binary("kdp-generic"), "--config", cfg, "--check",
                           "--device-plugin-dir", self.dir], T)
        return out, cfg

    def test_bad_configs_name_file_line_key(self):
        for text, line, key, phrase in BAD:
            with self.subTest(key=key, phrase=phrase):
                out, cfg = self.check(text)
                self.assertEqual(out.returncode, 1, out)
                want = "%s:%d: %s%s" % (cfg, line, key, ": " if key else "")
                self.assertIn(want, out.stderr)
                self.assertIn(phrase, out.stderr)
                self.assertNotIn("\n", out.stderr.strip().split("] ", 1)[1])  # one line

    def test_good_config_checks(self):
        out, cfg = self.check("resources:\n  - name: example.com/serial\n    devices:\n"
                              "      - path: /dev/ttyUSB*\n")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip(), "%s: OK (1 resource)" % cfg)

    def test_one_per_container_needs_count(self):
        out, cfg = self.check("resources:\n  - name: example.com/x\n    devices: [/dev/x]\n"
                              "    onePerContainer: true\n")
        self.assertEqual(out.returncode, 1, out)
        self.assertIn("%s:4: resources[0].onePerContainer: needs count above 1" % cfg, out.stderr)
        out, cfg = self.check("resources:\n  - name: example.com/x\n    devices: [/dev/x]\n"
                              "    count: 2\n    onePerContainer: true\n    preferred: spread\n")
        self.assertEqual(out.returncode, 0, out)

    def test_caps(self):
        big = "resources:\n" + "".join("  - name: example.com/r%d\n    devices: [/dev/x]\n" % i
                                        for i in range(65))
        out, cfg = self.check(big)
        self.assertEqual(out.returncode, 1, out)
        self.assertIn("%s:2: resources: must list at most 64 items" % cfg, out.stderr)
        out, cfg = self.check("# " + "x" * (1 << 20) + "\n")
        self.assertEqual(out.returncode, 1, out)
        self.assertIn("must be a regular file of at most 1048576 bytes", out.stderr)
        long_dir = "/tmp/" + "d" * 90
        cfg = self.raw_config("resources:\n  - name: example.com/serial\n    devices: [/dev/x]\n")
        out = kdptest.run([binary("kdp-generic"), "--config", cfg, "--check",
                           "--device-plugin-dir", long_dir], T)
        self.assertEqual(out.returncode, 1, out)
        self.assertIn("%s:2: resources[0].socket: the socket path" % cfg, out.stderr)

    def test_invalid_config_at_start_exits(self):
        cfg = self.raw_config("resources:\n  - name: example.com/x\n    count: -1\n"
                              "    devices: [/dev/x]\n")
        pl = self.generic(cfg, ["example.com/x"])
        self.assertEqual(pl.wait_exit(T), 1)
        self.assertIn("config.yaml:3: resources[0].count: must be a positive integer",
                      pl.log_text())


class Reload(GenericTest):
    BEFORE = """resources:
  - name: example.com/a
    devices: [/dev/ttyUSB0]
  - name: example.com/b
    devices: [/dev/ttyUSB1]
  - name: example.com/c
    devices: [/dev/kvm]
"""
    AFTER = """resources:
  - name: example.com/d
    devices: [/dev/fuse]
  - name: example.com/a    # unchanged (moved, comments do not matter)
    devices: [/dev/ttyUSB0]
  - name: example.com/b
    count: 2
    devices: [/dev/ttyUSB1]
"""

    def test_add_remove_change_keep(self):
        kl, pl, evs = self.start(self.BEFORE, ["example.com/a", "example.com/b", "example.com/c"])
        self.assertEqual(ids_of(evs["example.com/b"]), ["ttyUSB1"])
        mark = kl.mark()
        self.config(self.AFTER)
        pl.signal(signal.SIGHUP)
        kl.wait_event("registered", T, since=mark, resource="example.com/d")
        ev = kl.wait_event("devices", T, since=mark, resource="example.com/d")
        self.assertEqual(ids_of(ev), ["fuse"])
        kl.wait_event("stream_end", T, since=mark, resource="example.com/c")
        kl.wait_event("registered", T, since=mark, resource="example.com/b")
        # b restarts with count 2 (a late message of its old stream may come first)
        ev = kl.wait_event(lambda e: e.get("event") == "devices"
                           and e.get("resource") == "example.com/b"
                           and ids_of(e) == ["ttyUSB1-0", "ttyUSB1-1"], T, since=mark)
        self.assertEqual(ids_of(ev), ["ttyUSB1-0", "ttyUSB1-1"])
        pl.wait_log(r"reload: example\.com/a unchanged", T)
        # the unchanged one was left alone: no new stream, no end, no devices
        kl.assert_no_event(lambda e: e.get("resource") == "example.com/a", within=0.3,
                           since=mark)
        self.assertFalse(os.path.exists(os.path.join(self.dir, sock_for("example.com/c"))))
        self.assertOk(kl.command("allocate example.com/a ttyUSB0"))
        self.assertOk(kl.command("allocate example.com/b ttyUSB1-1"))
        self.assertFalse(kl.command("allocate example.com/c kvm").get("ok"))
        self.assertStopsCleanly(pl)

    def test_invalid_file_keeps_running_config(self):
        kl, pl, _ = self.start(self.BEFORE, ["example.com/a", "example.com/b", "example.com/c"])
        mark = kl.mark()
        log = pl.log_mark()
        self.config(self.AFTER.replace("count: 2", "count: two"))
        pl.signal(signal.SIGHUP)
        line = pl.wait_log(r"reload rejected", T, since=log)
        self.assertIn("config.yaml:10: resources[2].count: must be a positive integer", line)
        kl.assert_no_event(lambda e: e.get("event") in ("stream_end", "registered", "devices"),
                           within=0.5, since=mark)
        for res, dev in (("example.com/a", "ttyUSB0"), ("example.com/c", "kvm")):
            self.assertOk(kl.command("allocate %s %s" % (res, dev)))
        # a valid file afterwards is taken
        self.config(self.AFTER)
        pl.signal(signal.SIGHUP)
        kl.wait_event("registered", T, since=mark, resource="example.com/d")
        ev = kl.wait_event("devices", T, since=mark, resource="example.com/d")
        self.assertEqual(ids_of(ev), ["fuse"])
        self.assertTrue(pl.alive())
        self.assertStopsCleanly(pl)

    def configmap(self, version, body):
        """A ConfigMap volume as the kubelet writes it: config.yaml -> ..data/
        config.yaml, ..data -> ..<version>; an update swaps ..data with a
        rename. Returns the config path."""
        d = self.subdir("configmap")
        os.makedirs(os.path.join(d, ".." + version))
        with open(os.path.join(d, ".." + version, "config.yaml"), "w") as f:
            f.write("root: %s\nsysfs: %s\n%s" % (self.host.root, self.host.sysfs, body))
        os.symlink(".." + version, os.path.join(d, "..data_tmp"))
        os.rename(os.path.join(d, "..data_tmp"), os.path.join(d, "..data"))
        path = os.path.join(d, "config.yaml")
        if not os.path.islink(path):
            os.symlink("..data/config.yaml", path)
        return path

    def test_watch_config_configmap_update(self):
        kl = self.kubelet()
        cfg = self.configmap("v1", self.BEFORE)
        res = ["example.com/a", "example.com/b", "example.com/c"]
        pl = self.generic(cfg, res, extra=["--watch-config"])
        for r in res:
            kl.wait_event("registered", T, since=0, resource=r)
            kl.wait_event("devices", T, since=0, resource=r)
        mark = kl.mark()
        self.configmap("v2", self.AFTER)  # no signal
        kl.wait_event("registered", T, since=mark, resource="example.com/d")
        kl.wait_event("stream_end", T, since=mark, resource="example.com/c")
        # b restarts with count 2. The old instance's stream may still deliver
        # a late message under load (the emulator reports every stream), so
        # wait for the new IDs rather than take the first devices event.
        ev = kl.wait_event(lambda e: e.get("event") == "devices"
                           and e.get("resource") == "example.com/b"
                           and ids_of(e) == ["ttyUSB1-0", "ttyUSB1-1"], T, since=mark)
        self.assertEqual(ids_of(ev), ["ttyUSB1-0", "ttyUSB1-1"])
        # the same content again: nothing happens
        log = pl.log_mark()
        mark = kl.mark()
        self.configmap("v3", self.AFTER)
        kl.assert_no_event(lambda e: e.get("event") in ("registered", "stream_end"), within=0.5,
                           since=mark)
        self.assertEqual(pl.count_log(r"changed", since=log), 0)
        self.assertStopsCleanly(pl)

    def test_reload_log_names_its_trigger(self):
        """A reload says what asked for it: the file's change under
        --watch-config, or SIGHUP; never SIGHUP for a change of the file."""
        kl = self.kubelet()
        cfg = self.config(self.BEFORE)
        res = ["example.com/a", "example.com/b", "example.com/c"]
        pl = self.generic(cfg, res, extra=["--watch-config"])
        for r in res:
            kl.wait_event("registered", T, since=0, resource=r)
        log = pl.log_mark()
        self.config(self.AFTER)  # renamed into place: no signal
        line = pl.wait_log(r"re-read", T, since=log)
        self.assertIn("config file changed: re-read %s (3 resources)" % cfg, line)
        self.assertEqual(pl.count_log(r"SIGHUP", since=log), 0, pl.log_lines(log))
        log = pl.log_mark()
        pl.signal(signal.SIGHUP)  # the same content: SIGHUP reads it anyway
        line = pl.wait_log(r"re-read", T, since=log)
        self.assertIn("SIGHUP: re-read %s (3 resources)" % cfg, line)
        self.assertEqual(pl.count_log(r"config file changed", since=log), 0, pl.log_lines(log))
        log = pl.log_mark()
        self.config(self.AFTER.replace("count: 2", "count: two"))
        line = pl.wait_log(r"reload rejected", T, since=log)
        self.assertIn("reload rejected (config file changed), keeping the running "
                      "configuration: ", line)
        log = pl.log_mark()
        pl.signal(signal.SIGHUP)
        line = pl.wait_log(r"reload rejected", T, since=log)
        self.assertIn("reload rejected (SIGHUP), keeping the running configuration: ", line)
        self.assertTrue(pl.alive())
        self.assertStopsCleanly(pl)

    def test_cdi_spec_follows_reload(self):
        kl, pl, _ = self.start("resources:\n  - name: example.com/a\n    cdi: true\n"
                               "    devices: [/dev/ttyUSB0]\n", ["example.com/a"])
        spec = os.path.join(self.cdi_dir, "example.com-a.json")
        self.assertTrue(os.path.exists(spec))
        mark = kl.mark()
        self.config("resources:\n  - name: example.com/b\n    devices: [/dev/ttyUSB0]\n")
        pl.signal(signal.SIGHUP)
        kl.wait_event("registered", T, since=mark, resource="example.com/b")
        self.assertFalse(os.path.exists(spec))  # the removed resource's spec went with it
        self.assertStopsCleanly(pl)


if __name__ == "__main__":
    unittest.main(verbosity=2)
