#!/usr/bin/python3
"""`kdpctl kubelet`, the kubelet emulator, against a device plugin written
with grpc-go (kdp-go-testplugin: a peer, not kdp itself) and against kdp's
own examples: registration in the kubelet's order, the kubelet's rejections,
device changes, restarts on SIGHUP (who came back, how fast), stream ends,
the directory cleanup and the way it stops.

usage: KDP_BIN_DIR=<build>/bin /usr/bin/python3 test_kubelet.py [-v] [Class.test ...]
"""

import os
import re
import signal
import socket
import stat
import sys
import time
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
import kdptest  # noqa: E402
from kdptest import T  # noqa: E402
from kdptest.proc import binary  # noqa: E402
from kdptest.kdpctl import KdpctlTest  # noqa: E402

RES = "example.com/dev"


class GoPeer(KdpctlTest):
    def test_registration_and_changes(self):
        kl = self.kubelet()
        p = self.goplugin("-devices", "a,b", "-unhealthy", "c", "-numa", "0", "-preferred")
        reg = kl.wait_event("registered", resource=RES)
        self.assertEqual(reg["endpoint"], "tp.sock")
        self.assertEqual(reg["version"], "v1beta1")
        self.assertEqual(reg["options"], {"pre_start_required": False,
                                          "get_preferred_allocation_available": True})
        self.assertFalse(reg["options_differ"])
        # The kubelet's order: GetDevicePluginOptions BEFORE Register is answered.
        opts = p.wait_event("get_options", since=0)
        done = p.wait_event("registered", since=0)
        self.assertLess(opts["t_ns"], done["t_ns"])
        self.assertEqual(opts["authority"], "localhost")
        ev = kl.wait_event("devices", resource=RES, seq=1)
        self.assertEqual((ev["n"], ev["healthy"], ev["unhealthy"]), (3, 2, 1))
        self.assertEqual([(c["id"], c["change"], c["health"], c["numa"]) for c in ev["changes"]],
                         [("a", "added", "Healthy", [0]), ("b", "added", "Healthy", [0]),
                          ("c", "added", "Unhealthy", [0])])
        p.send("set a Unhealthy")
        ev = kl.wait_event("devices", resource=RES, seq=2)
        self.assertEqual([(c["id"], c["change"], c["old_health"], c["health"])
                          for c in ev["changes"]], [("a", "changed", "Healthy", "Unhealthy")])
        p.send("set d Healthy")
        ev = kl.wait_event("devices", resource=RES, seq=3)
        self.assertEqual([(c["id"], c["change"]) for c in ev["changes"]], [("d", "added")])
        p.send("set c Healthy")
        ev = kl.wait_event("devices", resource=RES, seq=4)
        self.assertEqual([(c["id"], c["health"]) for c in ev["changes"]], [("c", "Healthy")])
        self.assertEqual((ev["healthy"], ev["unhealthy"]), (3, 1))

    def test_sighup_restart(self):
        kl = self.kubelet()
        p = self.goplugin()
        kl.wait_event("devices", resource=RES, seq=1)
        mark = kl.mark()
        kl.signal(signal.SIGHUP)
        kl.wait_event("restart", since=mark, phase="begin")
        done = kl.wait_event("restart", since=mark, phase="done")
        self.assertIn("tp.sock", done["removed"])
        self.assertEqual(done["expected"], [RES])
        back = kl.wait_event("came_back", since=mark, resource=RES)
        self.assertGreater(back["ms"], 0)
        self.assertLess(back["ms"], 5000)
        summary = kl.wait_event("restart_summary", since=mark)
        self.assertEqual(summary["missing"], [])
        self.assertEqual([b["resource"] for b in summary["back"]], [RES])
        kl.wait_event("registered", since=mark, resource=RES)
        kl.wait_event("devices", since=mark, resource=RES, seq=1)
        # The node status: forgotten at the restart, back with the devices
        # (each capacity line follows its devices line: wait for the third).
        deadline = time.monotonic() + T
        while True:
            caps = [(e["capacity"], e["allocatable"], e["cause"])
                    for e in kl.events() if e["event"] == "capacity"]
            if len(caps) >= 3 or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        self.assertEqual(caps, [(2, 2, "devices"), (0, 0, "restart"), (2, 2, "devices")])
        # The peer saw its socket deleted and kubelet.sock re-created.
        p.wait_event("socket_gone")
        regs = [e for e in p.events() if e.get("event") == "registered"]
        deadline = time.monotonic() + T
        while len(regs) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
            regs = [e for e in p.events() if e.get("event") == "registered"]
        self.assertEqual(len(regs), 2, p.diagnostics())

    def test_invalid_resource_name(self):
        kl = self.kubelet()
        p = self.goplugin(resource="bad")
        ev = kl.wait_event("rejected", resource="bad")
        self.assertEqual(ev["error"], 'the ResourceName "bad" is invalid')
        self.assertEqual(ev["status"], "UNKNOWN")
        failed = p.wait_event("register_failed")
        self.assertEqual(failed["code"], "Unknown")
        self.assertIn('the ResourceName "bad" is invalid', failed["error"])
        p2 = self.goplugin(socket="k.sock", resource="kubernetes.io/x")
        ev = kl.wait_event("rejected", resource="kubernetes.io/x")
        self.assertEqual(ev["error"], 'the ResourceName "kubernetes.io/x" is invalid')
        self.assertIn('the ResourceName "kubernetes.io/x" is invalid',
                      p2.wait_event("register_failed")["error"])

    def test_unsupported_version(self):
        kl = self.kubelet()
        p = self.goplugin("-version", "v1alpha1")
        ev = kl.wait_event("rejected", resource=RES)
        want = ('requested API version "v1alpha1" is not supported by kubelet. '
                'Supported version is ["v1beta1"]')
        self.assertEqual(ev["error"], want)
        self.assertIn(want, p.wait_event("register_failed")["error"])

    def test_dial_failure(self):
        kl = self.kubelet()
        p = self.goplugin("-endpoint", "missing.sock")
        ev = kl.wait_event("rejected", resource=RES)
        self.assertTrue(ev["error"].startswith("failed to dial device plugin: "), ev)
        self.assertIn("missing.sock", ev["error"])
        self.assertIn("failed to dial device plugin", p.wait_event("register_failed")["error"])

    def test_replaced(self):
        kl = self.kubelet()
        self.goplugin("-devices", "a")
        kl.wait_event("devices", resource=RES, seq=1, endpoint="tp.sock")
        self.goplugin("-devices", "b", socket="tp2.sock")
        ev = kl.wait_event("replaced", resource=RES)
        self.assertEqual((ev["old_endpoint"], ev["endpoint"]), ("tp.sock", "tp2.sock"))
        ev = kl.wait_event("devices", resource=RES, seq=1, endpoint="tp2.sock")
        self.assertEqual([d["id"] for d in ev["devices"]], ["b"])

    def test_capacity_follows_health(self):
        kl = self.kubelet()
        p = self.goplugin("-devices", "a,b", "-unhealthy", "c")
        ev = kl.wait_event("capacity", resource=RES)
        self.assertEqual((ev["capacity"], ev["allocatable"], ev["cause"], ev["endpoint"]),
                         (3, 2, "devices", "tp.sock"))
        p.send("set a Unhealthy")
        ev = kl.wait_event("capacity", resource=RES)
        self.assertEqual((ev["capacity"], ev["allocatable"]), (3, 1))
        p.send("set d Healthy")  # a device list that changes the counts
        ev = kl.wait_event("capacity", resource=RES)
        self.assertEqual((ev["capacity"], ev["allocatable"]), (4, 2))
        p.stop()
        ev = kl.wait_event("capacity", resource=RES)
        self.assertEqual((ev["capacity"], ev["allocatable"], ev["cause"], ev["endpoint"]),
                         (4, 0, "stream_end", "tp.sock"))

    def test_list_over_4mib(self):
        """The kubelet's 4 MiB receive limit applies to the emulator's stream
        and to kdpctl list (the grpc-go peer sends about 5 MB)."""
        kl = self.kubelet()
        self.goplugin("-count", "50000", "-id-len", "80")
        end = kl.wait_event("stream_end", resource=RES, timeout=20)
        self.assertEqual(end["status"], "RESOURCE_EXHAUSTED")
        r = self.kdpctl("list", "tp.sock", timeout=20)
        self.assertEqual(r.returncode, 1, r)
        self.assertIn("RESOURCE_EXHAUSTED", r.stderr)
        self.assertIn("over the kubelet's 4 MiB message limit", r.stderr)

    def test_human_output(self):
        kl = self.kubelet(json_out=False)
        p = self.goplugin("-devices", "a")
        kl.wait_line(r"example.com/dev: registered \(endpoint tp.sock, options: "
                     r"pre_start_required=false get_preferred_allocation_available=false")
        kl.wait_line(r"example.com/dev: devices #1: 1 device: 1 healthy, 0 unhealthy")
        kl.wait_line(r"^\s+added\s+a\s+Healthy$")
        p.send("set a Unhealthy")
        kl.wait_line(r"^\s+health\s+a\s+Healthy -> Unhealthy$")
        kl.signal(signal.SIGHUP)
        line = kl.wait_line(r"example.com/dev: came back in [0-9.]+ ms")
        self.assertIsNotNone(re.search(r"came back in \d+\.\d ms", line))
        kl.wait_line(r"restart: all 1 plugin came back, the last in [0-9.]+ ms")
        self.goplugin(socket="bad.sock", resource="bad")
        kl.wait_line(r'bad: Register rejected \(UNKNOWN\): the ResourceName "bad" is invalid')


KRES = "kdp.test/dev"


class Handover(KdpctlTest):
    """A DaemonSet rolling update with maxSurge: two instances of one plugin
    (one resource, two sockets) at once, under each --endpoint-tracking.
    socket (kubelets with kubernetes/kubernetes PR #135437): the old
    instance's end leaves the resource alone, allocatable never drops.
    resource (the kubelets before it): the old instance's stream end makes
    the kubelet disconnect the NEWEST registration of the resource:
    allocatable 0 until the new instance registers again."""

    def instance(self, inst):
        """kdp-test-plugin as instance inst: socket kdp-test-dev-<inst>.sock;
        an older instance stops by itself once a newer one registered."""
        return self.start([binary("kdp-test-plugin"), "--device-plugin-dir", self.dp,
                           "--resource", KRES, "--devices", "a,b"],
                          "test-plugin:" + inst, env=self.env(KDP_INSTANCE=inst))

    def caps(self, kl, since=0, resource=KRES):
        return [(e["capacity"], e["allocatable"], e["cause"], e["endpoint"])
                for e in kl.events_since(since, "capacity", resource=resource)]

    def kdp_handover(self, tracking):
        """Old registered (2 of 2), new started; returns once the old one has
        exited by itself and its stream end was seen."""
        kl = self.kubelet("--endpoint-tracking", tracking)
        self.assertEqual(kl.wait_event("ready", since=0)["endpoint_tracking"], tracking)
        old = self.instance("old")
        kl.wait_event("registered", resource=KRES, endpoint="kdp-test-dev-old.sock")
        kl.wait_event("capacity", resource=KRES, capacity=2, allocatable=2)
        mark = kl.mark()
        new = self.instance("new")
        rep = kl.wait_event("replaced", since=mark, resource=KRES)
        self.assertEqual((rep["old_endpoint"], rep["endpoint"]),
                         ("kdp-test-dev-old.sock", "kdp-test-dev-new.sock"))
        self.assertEqual(old.wait_exit(T), 0, old.diagnostics())
        end = kl.wait_event("stream_end", since=mark, endpoint="kdp-test-dev-old.sock")
        self.assertTrue(end["replaced"])
        self.assertFalse(os.path.exists(os.path.join(self.dp, "kdp-test-dev-old.sock")))
        return kl, new, mark, end

    def test_kdp_socket_tracking_never_drops(self):
        kl, new, mark, end = self.kdp_handover("socket")
        self.assertEqual(end["marked_unhealthy"], 0)
        kl.wait_event("devices", since=mark, endpoint="kdp-test-dev-new.sock", seq=1)
        kl.assert_no_event("disconnected", within=0.5, since=mark)
        kl.assert_no_event("capacity", within=0.1, since=mark)
        self.assertEqual(self.caps(kl), [(2, 2, "devices", "kdp-test-dev-old.sock")])
        self.assertEqual(len(kl.events_since(mark, "registered", resource=KRES)), 1)
        self.assertEqual(new.count_log("restarting"), 0)
        self.assertTrue(new.alive())

    def test_kdp_resource_tracking_drops_then_back(self):
        kl, new, mark, end = self.kdp_handover("resource")
        self.assertEqual(end["marked_unhealthy"], 2)
        d = kl.wait_event("disconnected", since=mark, resource=KRES)
        self.assertEqual((d["endpoint"], d["via"], d["cause"], d["cause_endpoint"],
                          d["marked_unhealthy"]),
                         ("kdp-test-dev-new.sock", "kubelet.sock", "stream_end",
                          "kdp-test-dev-old.sock", 2))
        kl.wait_event("capacity", since=mark, resource=KRES, allocatable=0)  # after the line above
        caps = self.caps(kl, mark)
        self.assertEqual(caps[0], (2, 0, "stream_end", "kdp-test-dev-old.sock"))
        # libkdp's new instance sees its stream cut and registers again at
        # once; when the cut came before its stream opened, it takes the
        # kubelet for gone after 5 s without the stream, and registers again
        again = kl.wait_event("registered", resource=KRES, endpoint="kdp-test-dev-new.sock",
                              timeout=T + 5)
        self.assertGreater(again["t_ns"], d["t_ns"])
        back = kl.wait_event("capacity", since=mark, resource=KRES, allocatable=2)
        self.assertGreater(back["t_ns"], again["t_ns"])
        self.assertEqual(self.caps(kl, mark),
                         [(2, 0, "stream_end", "kdp-test-dev-old.sock"),
                          (2, 2, "devices", "kdp-test-dev-new.sock")])
        self.assertEqual(len(kl.events_since(mark, "registered", resource=KRES)), 2)
        gap_ms = (back["t_ns"] - kl.events_since(mark, "capacity", allocatable=0)[0]["t_ns"]) / 1e6
        kdptest.log("FIGURE kdpctl --endpoint-tracking resource: allocatable 0 for %.1f ms"
                    % gap_ms)

    def test_kdp_resource_tracking_human(self):
        kl = self.kubelet("--endpoint-tracking", "resource", json_out=False, wait=False)
        kl.wait_line(r"kubelet: listening on .*kubelet.sock; endpoint tracking by resource name "
                     r"\(kubelets before PR #135437\)", since=0)
        old = self.instance("old")
        kl.wait_line(r"kdp.test/dev: capacity 2, allocatable 2 \(a device list from "
                     r"kdp-test-dev-old.sock\)")
        self.instance("new")
        self.assertEqual(old.wait_exit(T), 0, old.diagnostics())
        kl.wait_line(r"kdp.test/dev: ListAndWatch of the replaced registration ended")
        kl.wait_line(r"kdp.test/dev: disconnected \(endpoint kdp-test-dev-new.sock, the newest "
                     r"registration\): endpoint tracking by resource name found it when "
                     r"kdp-test-dev-old.sock's ListAndWatch ended; its 2 devices counted "
                     r"unhealthy until it registers again")
        kl.wait_line(r"kdp.test/dev: capacity 2, allocatable 0 \(the ListAndWatch of "
                     r"kdp-test-dev-old.sock ended\)")

    def go_handover(self, tracking):
        kl = self.kubelet("--endpoint-tracking", tracking)
        a = self.goplugin("-devices", "a0,a1", socket="a.sock")
        kl.wait_event("capacity", resource=RES, capacity=2, allocatable=2)
        mark = kl.mark()
        b = self.goplugin("-devices", "b0,b1,b2", socket="b.sock")
        kl.wait_event("capacity", since=mark, resource=RES, capacity=3, allocatable=3)
        a.stop()
        kl.wait_event("stream_end", since=mark, endpoint="a.sock")
        return kl, b, mark

    def test_go_socket_tracking(self):
        kl, b, mark = self.go_handover("socket")
        kl.assert_no_event("stream_end", within=0.5, since=mark, endpoint="b.sock")
        self.assertEqual([c[:2] for c in self.caps(kl, resource=RES)], [(2, 2), (3, 3)])
        b.send("set b3 Healthy")
        ev = kl.wait_event("capacity", since=mark, resource=RES, capacity=4)
        self.assertEqual((ev["allocatable"], ev["endpoint"]), (4, "b.sock"))

    def test_go_resource_tracking(self):
        kl, b, mark = self.go_handover("resource")
        d = kl.wait_event("disconnected", since=mark, resource=RES)
        self.assertEqual((d["endpoint"], d["cause_endpoint"]), ("b.sock", "a.sock"))
        b.wait_event("list_and_watch", phase="closed")
        # kdpctl prints the capacity line after the disconnected one
        kl.wait_event("capacity", since=mark, resource=RES, allocatable=0)
        # the grpc-go plugin does not register again: allocatable stays 0
        self.assertEqual([c[:2] for c in self.caps(kl, resource=RES)], [(2, 2), (3, 3), (3, 0)])
        self.assertEqual(self.caps(kl, resource=RES)[-1][2:], ("stream_end", "a.sock"))
        b.send("set b3 Healthy")  # its stream is gone: nothing reaches the kubelet
        kl.assert_no_event("capacity", within=0.5, since=mark, allocatable=4)

    def test_bad_value(self):
        r = self.kdpctl("kubelet", "--endpoint-tracking", "both")
        self.assertEqual(r.returncode, 2, r)
        self.assertIn('--endpoint-tracking wants socket or resource, not "both"', r.stderr)
        r = self.kdpctl("list", "x.sock", "--endpoint-tracking", "socket")
        self.assertEqual(r.returncode, 2, r)
        self.assertIn("--endpoint-tracking is not an option of this command", r.stderr)


class Startup(KdpctlTest):
    def test_removes_only_sockets(self):
        stale = os.path.join(self.dp, "stale.sock")
        s = socket.socket(socket.AF_UNIX)
        s.bind(stale)
        s.close()
        keep = ["kubelet_internal_checkpoint", "notes.txt"]
        for name in keep:
            with open(os.path.join(self.dp, name), "w") as f:
                f.write("keep me\n")
        os.mkdir(os.path.join(self.dp, "subdir"))
        kl = self.kubelet(wait=False)
        ready = kl.wait_event("ready")
        self.assertEqual(ready["removed"], ["stale.sock"])
        self.assertEqual(ready["socket"], os.path.join(self.dp, "kubelet.sock"))
        self.assertEqual(sorted(os.listdir(self.dp)),
                         sorted(keep + ["kubelet.sock", "subdir"]))
        with open(os.path.join(self.dp, "kubelet_internal_checkpoint")) as f:
            self.assertEqual(f.read(), "keep me\n")
        kl.signal(signal.SIGHUP)
        kl.wait_event("restart", phase="done")
        self.assertEqual(sorted(os.listdir(self.dp)),
                         sorted(keep + ["kubelet.sock", "subdir"]))

    def test_creates_missing_dir(self):
        self.dp = os.path.join(self.dir, "a", "b")
        kl = self.kubelet()
        sock = os.path.join(self.dp, "kubelet.sock")
        self.assertEqual(kl.wait_event("ready", since=0)["socket"], sock)
        self.assertTrue(stat.S_ISSOCK(os.stat(sock).st_mode))
        self.assertEqual(kl.stop(), 0)

    def test_timeout_and_signals(self):
        kl = self.kubelet("--timeout", "500ms")
        self.assertEqual(kl.wait_exit(T), 0, kl.diagnostics())
        kl.wait_event("exit", reason="timeout")
        self.assertFalse(os.path.exists(os.path.join(self.dp, "kubelet.sock")))
        for sig, name in ((signal.SIGINT, "SIGINT"), (signal.SIGTERM, "SIGTERM")):
            kl = self.kubelet()
            kl.signal(sig)
            self.assertEqual(kl.wait_exit(T), 0, kl.diagnostics())
            kl.wait_event("exit", reason=name)
            self.assertFalse(os.path.exists(os.path.join(self.dp, "kubelet.sock")))

    def test_cannot_serve(self):
        with open(os.path.join(self.dir, "file"), "w"):
            pass
        r = self.kdpctl("kubelet", "--device-plugin-dir", os.path.join(self.dir, "file"))
        self.assertEqual(r.returncode, 1, r)
        self.assertRegex(r.stderr, r"kdpctl kubelet: cannot (create|serve) .*: Not a directory")


class Examples(KdpctlTest):
    def test_gopher_hotplug_and_restart(self):
        kl = self.kubelet()
        g = self.gopher("g1")
        reg = kl.wait_event("registered", resource="example.com/gopher")
        self.assertEqual(reg["endpoint"], "gopher.sock")
        ev = kl.wait_event("devices", resource="example.com/gopher", seq=1)
        self.assertEqual([d["id"] for d in ev["devices"]], ["g1"])
        with open(os.path.join(g.devices_dir, "g2"), "w") as f:
            f.write("hot-plugged\n")
        ev = kl.wait_event("devices", resource="example.com/gopher", seq=2)
        self.assertEqual(ev["changes"], [{"id": "g2", "change": "added", "health": "Healthy",
                                          "numa": []}])
        mark = kl.mark()
        kl.signal(signal.SIGHUP)
        back = kl.wait_event("came_back", since=mark, resource="example.com/gopher")
        self.assertLess(back["ms"], 2000)
        ev = kl.wait_event("devices", since=mark, resource="example.com/gopher", seq=1)
        self.assertEqual(ev["n"], 2)
        kdptest.log("FIGURE gopher came back in %.3f ms" % back["ms"])

    def test_gopher_human(self):
        kl = self.kubelet(json_out=False)
        g = self.gopher("g1")
        kl.wait_line(r"example.com/gopher: devices #1: 1 device: 1 healthy, 0 unhealthy")
        with open(os.path.join(g.devices_dir, "g2"), "w") as f:
            f.write("hot-plugged\n")
        kl.wait_line(r"example.com/gopher: devices #2: 2 devices: 2 healthy, 0 unhealthy")
        kl.wait_line(r"^\s+added\s+g2\s+Healthy$")
        kl.signal(signal.SIGHUP)
        # (gopher.sock may be gone already: the plugin removes its own socket
        # when its stream ends, racing with the emulator's cleanup.)
        kl.wait_line(r"kubelet: restarted: re-created .*kubelet.sock.*; "
                     r"waiting for example.com/gopher")
        kl.wait_line(r"example.com/gopher: came back in \d+\.\d ms")

    def test_superdisk_and_simple(self):
        kl = self.kubelet()
        self.superdisk("a.img")
        self.simple(2)
        # since=0: the two register in either order
        reg = kl.wait_event("registered", since=0, resource="example.com/superdisk")
        self.assertEqual(reg["options"], {"pre_start_required": True,
                                          "get_preferred_allocation_available": True})
        self.assertFalse(reg["options_differ"])
        reg = kl.wait_event("registered", since=0, resource="example.com/simple")
        self.assertEqual(reg["endpoint"], "simple.sock")
        ev = kl.wait_event("devices", since=0, resource="example.com/simple", seq=1)
        self.assertEqual([d["id"] for d in ev["devices"]], ["dev-0", "dev-1"])
        mark = kl.mark()
        kl.signal(signal.SIGHUP)
        summary = kl.wait_event("restart_summary", since=mark)
        self.assertEqual(sorted(b["resource"] for b in summary["back"]),
                         ["example.com/simple", "example.com/superdisk"])
        self.assertEqual(summary["missing"], [])

    def test_plugin_stops(self):
        kl = self.kubelet()
        g = self.gopher("g1", "g2")
        kl.wait_event("devices", resource="example.com/gopher", seq=1)
        self.assertEqual(g.stop(), 0)
        end = kl.wait_event("stream_end", resource="example.com/gopher")
        self.assertEqual(end["marked_unhealthy"], 2)
        self.assertFalse(os.path.exists(os.path.join(self.dp, "gopher.sock")))

    def test_missing_after_restart(self):
        """A plugin that does not come back is reported after 10 s."""
        kl = self.kubelet()
        p = self.goplugin()
        kl.wait_event("devices", resource=RES, seq=1)
        p.signal(signal.SIGKILL)
        kl.wait_event("stream_end", resource=RES)
        mark = kl.mark()
        kl.signal(signal.SIGHUP)
        self.assertEqual(kl.wait_event("restart", since=mark, phase="done")["expected"], [RES])
        summary = kl.wait_event("restart_summary", since=mark, timeout=20)
        self.assertEqual(summary["missing"], [RES])
        self.assertEqual(summary["back"], [])


class WatcherTest(KdpctlTest):
    """`kdpctl kubelet --kubelet-root ROOT`: the plugin-watcher side on
    ROOT/plugins_registry (self.reg)."""

    def wkubelet(self, json_out=True):
        kl = self.kubelet("--kubelet-root", self.root, json_out=json_out)
        self.assertTrue(os.path.isdir(self.reg))
        return kl


class WatcherGo(WatcherTest):
    """Against the grpc-go test plugin's watcher mode."""

    def test_registered_then_removed(self):
        kl = self.wkubelet()
        self.assertEqual(kl.wait_event("ready", since=0)["plugins_registry"], self.reg)
        p = self.gowatch("-devices", "a")
        sock = os.path.join(self.reg, "tp-reg.sock")
        info = kl.wait_event("watcher_info", socket=sock)
        self.assertEqual((info["type"], info["name"], info["endpoint"],
                          info["supported_versions"]), ("DevicePlugin", RES, "", ["v1beta1"]))
        reg = kl.wait_event("registered", resource=RES)
        self.assertEqual((reg["via"], reg["socket"], reg["endpoint"]), ("watcher", sock, sock))
        ev = kl.wait_event("devices", since=0, resource=RES, seq=1)
        self.assertEqual([d["id"] for d in ev["devices"]], ["a"])
        kl.wait_event("watcher_notified", since=0, socket=sock, registered=True)
        n = p.wait_event("notify", since=0)
        self.assertEqual((n["registered"], n["error"]), (True, ""))
        # The kubelet's order: GetInfo, the connect, then the notification.
        order = [e["event"] for e in p.events()
                 if e["event"] in ("get_info", "get_options", "list_and_watch", "notify")]
        self.assertEqual(order[:2], ["get_info", "get_options"])
        self.assertEqual(order.index("notify") > order.index("get_options"), True)
        p.send("unlink")
        dereg = kl.wait_event("deregistered", resource=RES)
        self.assertEqual((dereg["socket"], dereg["via"], dereg["disconnected"],
                          dereg["marked_unhealthy"]), (sock, "watcher", True, 1))
        p.wait_event("list_and_watch", phase="closed")

    def test_endpoint_elsewhere(self):
        kl = self.wkubelet()
        dps = os.path.join(self.dp, "ok.sock")
        self.gowatch("-dp-socket", dps)
        reg = kl.wait_event("registered", resource=RES)
        self.assertEqual((reg["via"], reg["endpoint"]), ("watcher", dps))
        kl.wait_event("devices", resource=RES, seq=1, endpoint=dps)

    def test_refusals_reach_the_plugin(self):
        kl = self.wkubelet()
        cases = [
            ("t1.sock", ["-info-type", "CSIPlugin"], "type",
             "RegisterPlugin error -- no handler registered for plugin type: CSIPlugin at "
             "socket %s" % os.path.join(self.reg, "t1.sock")),
            ("t2.sock", ["-info-versions", "v1alpha1,v1"], "validate",
             "RegisterPlugin error -- plugin validation failed with err: manager version, "
             "v1beta1, is not among plugin supported versions [v1alpha1 v1]"),
            ("t3.sock", ["-info-name", "bad"], "validate",
             'RegisterPlugin error -- plugin validation failed with err: invalid name of '
             'device plugin socket: the ResourceName "bad" is invalid'),
        ]
        for name, args, stage, reason in cases:
            p = self.gowatch(*args, reg_socket=name)
            sock = os.path.join(self.reg, name)
            ev = kl.wait_event("watcher_refused", since=0, socket=sock)
            self.assertEqual((ev["stage"], ev["reason"]), (stage, reason))
            n = p.wait_event("notify", since=0)
            self.assertEqual((n["registered"], n["error"]), (False, reason))
            # Retried with backoff (500 ms first): a second GetInfo.
            p.wait_event("get_info", since=0)
            p.wait_event("get_info", timeout=T)
        self.assertEqual([e for e in kl.events() if e["event"] == "registered"], [])

    def test_dial_failure_is_notified_not_retried(self):
        kl = self.wkubelet()
        missing = os.path.join(self.dp, "missing.sock")
        p = self.gowatch("-info-endpoint", missing)
        ev = kl.wait_event("watcher_refused", stage="register")
        self.assertTrue(ev["reason"].startswith(
            "RegisterPlugin error -- plugin registration failed with err: failed to dial "
            "device plugin: "), ev)
        self.assertIn("missing.sock", ev["reason"])
        self.assertEqual(p.wait_event("notify")["error"], ev["reason"])
        p.assert_no_event("get_info", within=1.2)

    def test_sighup_rewalks(self):
        kl = self.wkubelet()
        p = self.gowatch()
        kl.wait_event("devices", resource=RES, seq=1)
        mark = kl.mark()
        pmark = p.mark()
        kl.signal(signal.SIGHUP)
        done = kl.wait_event("restart", since=mark, phase="done")
        self.assertEqual(done["expected"], [RES])
        self.assertEqual(done["removed"], [])
        found = kl.wait_event("watcher_found", since=mark)
        self.assertEqual(found["source"], "walk")
        back = kl.wait_event("came_back", since=mark, resource=RES)
        self.assertLess(back["ms"], 5000)
        reg = kl.wait_event("registered", since=mark, resource=RES)
        self.assertEqual(reg["via"], "watcher")
        self.assertEqual(kl.wait_event("restart_summary", since=mark)["missing"], [])
        # plugins_registry left alone; the plugin saw a fresh GetInfo and a
        # second notification, over its first socket (never re-created).
        self.assertTrue(os.path.exists(os.path.join(self.reg, "tp-reg.sock")))
        p.wait_event("get_info", since=pmark)
        self.assertTrue(p.wait_event("notify", since=pmark)["registered"])
        self.assertEqual([e for e in p.events() if e["event"] == "serving"][1:], [])

    def test_ignored_names(self):
        os.makedirs(self.reg)
        with open(os.path.join(self.reg, "notes.sock"), "w") as f:
            f.write("not a socket\n")
        kl = self.wkubelet()
        p = self.gowatch(reg_socket=".hidden.sock")
        self.gowatch("-devices", "z", reg_socket="z.sock", resource="example.com/z")
        kl.wait_event("registered", resource="example.com/z")
        self.assertEqual([e["socket"] for e in kl.events() if e["event"] == "watcher_found"],
                         [os.path.join(self.reg, "z.sock")])
        p.assert_no_event("get_info", within=0.3)

    def test_human_output(self):
        kl = self.wkubelet(json_out=False)
        kl.wait_line(r"kubelet: listening on .*kubelet.sock; watching " + re.escape(self.reg),
                     since=0)
        p = self.gowatch("-devices", "a")
        kl.wait_line(r"watcher: GetInfo tp-reg.sock: type DevicePlugin, name example.com/dev, "
                     r'endpoint "" \(this socket\), versions \[v1beta1\]')
        kl.wait_line(r"example.com/dev: registered via watcher \(socket .*tp-reg.sock, "
                     r"endpoint .*tp-reg.sock, options: pre_start_required=false")
        kl.wait_line(r"example.com/dev: devices #1: 1 device: 1 healthy, 0 unhealthy")
        kl.signal(signal.SIGHUP)
        kl.wait_line(r"plugins_registry kept and walked again")
        kl.wait_line(r"example.com/dev: came back in \d+\.\d ms \(kubelet restarted -> "
                     r"GetInfo answered, via watcher\)")
        kl.wait_line(r"example.com/dev: devices #1: 1 device: 1 healthy, 0 unhealthy")
        p.send("unlink")
        kl.wait_line(r"example.com/dev: deregistered via watcher: .*tp-reg.sock removed; "
                     r"connection closed, its 1 device counted unhealthy")
        self.gowatch(reg_socket="b.sock", resource="bad")
        kl.wait_line(r'bad: refused via watcher \(socket .*b.sock\): RegisterPlugin error -- '
                     r'plugin validation failed with err: invalid name of device plugin socket: '
                     r'the ResourceName "bad" is invalid')

    def watcher_handover(self, tracking):
        """Two registrations of one resource through two watcher sockets;
        the older one's socket removed."""
        kl = self.kubelet("--kubelet-root", self.root, "--endpoint-tracking", tracking)
        a = self.gowatch("-devices", "a0", reg_socket="a-reg.sock")
        kl.wait_event("capacity", resource=RES, capacity=1, allocatable=1)
        mark = kl.mark()
        b = self.gowatch("-devices", "b0,b1", reg_socket="b-reg.sock")
        kl.wait_event("capacity", since=mark, resource=RES, capacity=2, allocatable=2)
        a.send("unlink")
        d = kl.wait_event("deregistered", since=mark,
                          socket=os.path.join(self.reg, "a-reg.sock"))
        self.assertTrue(d["disconnected"])
        return kl, a, b, mark, d

    def test_socket_tracking_deregisters_that_socket(self):
        kl, a, b, mark, d = self.watcher_handover("socket")
        self.assertEqual((d["endpoint"], d["marked_unhealthy"]),
                         (os.path.join(self.reg, "a-reg.sock"), 0))
        a.wait_event("list_and_watch", phase="closed")
        b.assert_no_event("list_and_watch", within=0.5, phase="closed")
        kl.assert_no_event("capacity", within=0.1, since=mark, allocatable=0)

    def test_resource_tracking_deregisters_the_newest(self):
        kl, a, b, mark, d = self.watcher_handover("resource")
        self.assertEqual((d["endpoint"], d["marked_unhealthy"]),
                         (os.path.join(self.reg, "b-reg.sock"), 2))
        b.wait_event("list_and_watch", phase="closed")
        ev = kl.wait_event("capacity", since=mark, resource=RES, allocatable=0)
        self.assertEqual((ev["capacity"], ev["cause"], ev["endpoint"]),
                         (2, "deregistered", os.path.join(self.reg, "a-reg.sock")))

    def test_no_watcher_without_root(self):
        kl = self.kubelet()
        self.assertNotIn("plugins_registry", kl.wait_event("ready", since=0))
        self.assertFalse(os.path.exists(self.reg))


class WatcherKdp(WatcherTest):
    """Against the library's own watcher mode (kdp_config.registration)."""

    def test_test_plugin_registers_restarts_and_comes_back(self):
        kl = self.wkubelet()
        self.kdp_watch_plugin("--devices", "a,b")
        sock = os.path.join(self.reg, "kt.sock")
        reg = kl.wait_event("registered", resource="example.com/x")
        self.assertEqual((reg["via"], reg["socket"], reg["endpoint"]), ("watcher", sock, sock))
        kl.wait_event("watcher_notified", socket=sock, registered=True)
        ev = kl.wait_event("devices", since=0, resource="example.com/x", seq=1)
        self.assertEqual([d["id"] for d in ev["devices"]], ["a", "b"])
        mark = kl.mark()
        kl.signal(signal.SIGHUP)
        back = kl.wait_event("came_back", since=mark, resource="example.com/x")
        self.assertLess(back["ms"], 5000)
        kl.wait_event("devices", since=mark, resource="example.com/x", seq=1)
        self.assertEqual(kl.wait_event("restart_summary", since=mark)["missing"], [])
        # Its registration socket removed: deregistered; the library
        # re-creates it and registers again.
        mark = kl.mark()
        os.unlink(sock)
        kl.wait_event("deregistered", since=mark, resource="example.com/x", socket=sock)
        kl.wait_event("registered", since=mark, resource="example.com/x", via="watcher",
                      timeout=20)

    def test_gopher_hotplug(self):
        kl = self.wkubelet()
        g = self.gopher_watch("g1")
        kl.wait_event("registered", resource="example.com/gopher", via="watcher")
        kl.wait_event("devices", resource="example.com/gopher", seq=1)
        with open(os.path.join(g.devices_dir, "g2"), "w") as f:
            f.write("hot-plugged\n")
        ev = kl.wait_event("devices", resource="example.com/gopher", seq=2)
        self.assertEqual([c["id"] for c in ev["changes"]], ["g2"])
        self.assertEqual(g.stop(), 0)
        ev = kl.wait_event("deregistered", resource="example.com/gopher")
        self.assertEqual(ev["via"], "watcher")



if __name__ == "__main__":
    unittest.main(verbosity=2)
