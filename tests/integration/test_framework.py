#!/usr/bin/python3
"""kdp's framework end to end: real plugin processes (kdp-test-plugin and the
examples) against the kubelet emulator (kdp-test-kubelet, grpc-go).

usage: KDP_BIN_DIR=<build>/bin /usr/bin/python3 test_framework.py [-v] [Test.name ...]

Assertions are about order and outcomes; measured times are printed
("FIGURE ..." lines, and a summary at the end), never asserted against a
threshold. Every wait is bounded (kdptest.T), every test too (PluginTest.TEST_BOUND).
"""

import json
import os
import subprocess
import signal
import sys
import time
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
import kdptest  # noqa: E402
from kdptest import T, binary, figure, percentile, wait_for  # noqa: E402
from kdptest.plugin import PluginTest, env_name_for, socket_for  # noqa: E402

RES = "kdp.test/dev"
BOTH = {"pre_start_required": True, "get_preferred_allocation_available": True}
NONE = {"pre_start_required": False, "get_preferred_allocation_available": False}

EXEC_TO_REGISTERED_MS = []


def devices_of(ev):
    """{id: (health, numa list)} of a devices event."""
    return {d["id"]: (d["health"], d["numa"]) for d in ev["devices"]}


def ids_of(ev):
    return sorted(d["id"] for d in ev["devices"])


def devices_where(resource, cond):
    """A wait_event predicate: a devices event of resource whose devices
    ({id: (health, numa)}) satisfy cond."""
    def pred(ev):
        return (ev.get("event") == "devices" and ev.get("resource") == resource
                and cond(devices_of(ev)))
    pred.__name__ = "devices(%s, %s)" % (resource, getattr(cond, "__name__", "cond"))
    return pred


def ms(ns):
    return ns / 1e6


def note_exec_to_registered(pl, reg):
    d = ms(reg["t_ns"] - pl.start_ns)
    EXEC_TO_REGISTERED_MS.append(d)
    return d


def read_lines(path):
    try:
        with open(path) as f:
            return [line.rstrip("\n") for line in f]
    except FileNotFoundError:
        return []


def write_file(path, text, tmp_dir):
    """Writes via a temporary file in tmp_dir and a rename: one inotify
    IN_MOVED_TO, no half-written state visible."""
    tmp = os.path.join(tmp_dir, ".tmp-" + os.path.basename(path))
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, path)


def tearDownModule():
    if EXEC_TO_REGISTERED_MS:
        figure("exec -> registered (ms, %d plugin starts)" % len(EXEC_TO_REGISTERED_MS),
               "p50 %.1f, max %.1f" % (percentile(EXEC_TO_REGISTERED_MS, 50),
                                       max(EXEC_TO_REGISTERED_MS)))
    kdptest.print_figures()


# ---------------------------------------------------------------------------

class Registration(PluginTest):
    def _check(self, legacy, with_ops, dial=None):
        kl = self.kubelet(legacy=legacy, dial=dial)
        args = ["--devices", "a,b"]
        if with_ops:
            args += ["--prestart", self.file("prestart.log"), "--preferred"]
        pl = self.start_test_plugin(*args)
        reg = kl.wait_event("registered", T, resource=RES)
        d = note_exec_to_registered(pl, reg)
        figure("exec -> registered, %s" % self.id().split(".")[-1], "%.1f ms" % d)
        want = BOTH if with_ops else NONE
        self.assertEqual(reg["endpoint"], "kdp-test-dev.sock")
        self.assertEqual(reg["version"], "v1beta1")
        self.assertEqual(reg["legacy"], legacy)
        self.assertEqual(reg["options_source"], "request" if legacy else "rpc")
        self.assertEqual(reg["options"], want)
        self.assertEqual(reg["request_options"], want)
        # A fresh GetDevicePluginOptions agrees with both.
        r = kl.ok("options %s" % RES)
        self.assertEqual(r["response"], want)
        # The stream flows and the plugin knows it is registered.
        ev = kl.wait_event("devices", T, resource=RES)
        self.assertEqual(ids_of(ev), ["a", "b"])
        pl.wait_log(r"kdp\.test/dev: registered with the kubelet", T)
        kl.assert_no_event("rejected", within=0.1, since=0)
        self.assertEqual(len(kl.events_since(0, "registered")), 1)

    def test_modern_with_prestart_and_preferred(self):
        self._check(legacy=False, with_ops=True)

    def test_modern_without_options(self):
        self._check(legacy=False, with_ops=False)

    def test_legacy_with_prestart_and_preferred(self):
        self._check(legacy=True, with_ops=True)

    def test_legacy_without_options(self):
        self._check(legacy=True, with_ops=False)

    def test_legacy_dialer_path_authority(self):
        # Older kubelets dial the bare path: :authority is the socket path.
        self._check(legacy=True, with_ops=True, dial="legacy")


class Devices(PluginTest):
    def test_event_content(self):
        kl = self.kubelet()
        pl = self.start_test_plugin("--devices", "a@0,b:unhealthy,c@1,d,e@-1,f:unhealthy@1")
        ev = kl.wait_event("devices", T, resource=RES)
        self.assertEqual(devices_of(ev), {
            "a": ("Healthy", [0]),
            "b": ("Unhealthy", []),
            "c": ("Healthy", [1]),
            "d": ("Healthy", []),
            "e": ("Healthy", []),  # sysfs' -1 "no node": never sent
            "f": ("Unhealthy", [1]),
        })
        self.assertEqual((ev["n"], ev["healthy"], ev["unhealthy"]), (6, 4, 2))
        self.assertEqual(ev["seq"], 1)
        self.assertTrue(ev["current"])
        st = kl.state()[RES]
        self.assertEqual((st["capacity"], st["allocatable"]), (6, 4))
        # Health changes through the thread-safe API, both ways.
        self.assertEqual(pl.command("health b Healthy"), {RES: 0})
        ev = kl.wait_event("devices", T, resource=RES)
        self.assertEqual(devices_of(ev)["b"], ("Healthy", []))
        self.assertEqual(pl.command("health a Unhealthy"), {RES: 0})
        ev = kl.wait_event("devices", T, resource=RES)
        self.assertEqual(devices_of(ev)["a"], ("Unhealthy", [0]))
        self.assertEqual(devices_of(ev)["b"], ("Healthy", []))
        # An unknown ID: -ENOENT, nothing sent.
        mark = kl.mark()
        self.assertEqual(pl.command("health zz Unhealthy"), {RES: -2})
        kl.assert_no_event("devices", within=0.5, since=mark)

    def test_hotplug_gopher(self):
        kl = self.kubelet()
        gdir = self.subdir("gophers")
        write_file(os.path.join(gdir, "g0"), "a gopher\n", self.subdir("files"))
        gopher = self.gopher(gdir)
        res = "example.com/gopher"
        kl.wait_event("registered", T, resource=res)
        kl.wait_event(devices_where(res, lambda d: d == {"g0": ("Healthy", [])}), T)
        # Plug in.
        t0 = time.monotonic()
        write_file(os.path.join(gdir, "g1"), "another\n", self.subdir("files"))
        kl.wait_event(devices_where(res, lambda d: sorted(d) == ["g0", "g1"]), T)
        figure("gopher: file created -> devices event", "%.1f ms" % ((time.monotonic() - t0) * 1e3))
        # Unplug.
        os.unlink(os.path.join(gdir, "g1"))
        kl.wait_event(devices_where(res, lambda d: sorted(d) == ["g0"]), T)
        # Health both ways.
        with open(os.path.join(gdir, "g0"), "w") as f:
            f.write("this gopher is unhealthy\n")
        kl.wait_event(devices_where(res, lambda d: d == {"g0": ("Unhealthy", [])}), T)
        with open(os.path.join(gdir, "g0"), "w") as f:
            f.write("fine again\n")
        kl.wait_event(devices_where(res, lambda d: d == {"g0": ("Healthy", [])}), T)
        # Allocate: GOPHER=ids.
        r = self.assertOk(kl.command("allocate %s g0" % res))
        self.assertEqual(r["container_responses"][0]["envs"], {"GOPHER": "g0"})
        # SIGTERM: a clean exit (the watcher thread stopped too).
        self.assertStopsCleanly(gopher)
        self.assertEqual(self.dir_entries(), ["kubelet.sock"])

    def test_nothing_sent_without_change(self):
        kl = self.kubelet()
        pl = self.start_test_plugin("--devices", "a,b@0,c:unhealthy")
        first = kl.wait_event("devices", T, resource=RES)
        # The same set in another order: nothing to send.
        mark = kl.mark()
        self.assertEqual(pl.command("set c:unhealthy,b@0,a"), {RES: 0})
        kl.assert_no_event("devices", within=1.0, since=mark)
        # A real change (c becomes healthy): exactly one event.
        mark = kl.mark()
        self.assertEqual(pl.command("set b@0,a,c"), {RES: 0})
        ev = kl.wait_event("devices", T, since=mark, resource=RES)
        self.assertEqual(devices_of(ev), {"a": ("Healthy", []), "b": ("Healthy", [0]),
                                          "c": ("Healthy", [])})
        self.assertEqual(ev["seq"], first["seq"] + 1)
        kl.assert_no_event("devices", within=0.5, since=kl.mark())
        self.assertEqual(len(kl.events_since(mark, "devices")), 1)
        # A bad device (an ID with '/') is refused and changes nothing.
        mark = kl.mark()
        self.assertEqual(pl.command("set a,b/x"), {RES: -22})
        kl.assert_no_event("devices", within=0.5, since=mark)
        self.assertOk(kl.command("allocate %s c" % RES))
        # A NUMA change alone is a change too.
        mark = kl.mark()
        self.assertEqual(pl.command("set a,b@1,c"), {RES: 0})
        ev = kl.wait_event("devices", T, since=mark, resource=RES)
        self.assertEqual(devices_of(ev)["b"], ("Healthy", [1]))


class SingleChanges(PluginTest):
    def test_put_remove_health(self):
        kl = self.kubelet()
        pl = self.start_test_plugin("--devices", "a,b@0", "--default-alloc",
                                    "--host-paths", self.subdir("dev"))
        first = kl.wait_event("devices", T, resource=RES)
        self.assertEqual(ids_of(first), ["a", "b"])
        # Added, with its NUMA node and health.
        mark = kl.mark()
        self.assertEqual(pl.command("put c:unhealthy@1"), {RES: 0})
        ev = kl.wait_event("devices", T, since=mark, resource=RES)
        self.assertEqual(devices_of(ev), {"a": ("Healthy", []), "b": ("Healthy", [0]),
                                          "c": ("Unhealthy", [1])})
        # Replaced: the same ID with other fields is one device, changed.
        mark = kl.mark()
        self.assertEqual(pl.command("put c@0"), {RES: 0})
        ev = kl.wait_event("devices", T, since=mark, resource=RES)
        self.assertEqual(devices_of(ev)["c"], ("Healthy", [0]))
        self.assertEqual(ev["n"], 3)
        # The same device again: nothing the kubelet sees, nothing sent.
        mark = kl.mark()
        self.assertEqual(pl.command("put c@0"), {RES: 0})
        kl.assert_no_event("devices", within=0.5, since=mark)
        # Removed: gone from the list, and from what Allocate accepts.
        mark = kl.mark()
        self.assertEqual(pl.command("remove a"), {RES: 0})
        ev = kl.wait_event("devices", T, since=mark, resource=RES)
        self.assertEqual(ids_of(ev), ["b", "c"])
        self.assertFailed(kl.command("allocate %s a" % RES), "InvalidArgument",
                          'unknown device ID "a"')
        self.assertEqual(pl.command("remove a"), {RES: -2})
        # A device put at run time is allocated with its own fields.
        r = self.assertOk(kl.command("allocate %s c" % RES))
        self.assertEqual(r["container_responses"][0]["envs"], {env_name_for(RES): "c"})
        # Health through the single-change path.
        mark = kl.mark()
        self.assertEqual(pl.command("health c Unhealthy"), {RES: 0})
        ev = kl.wait_event("devices", T, since=mark, resource=RES)
        self.assertEqual(devices_of(ev)["c"], ("Unhealthy", [0]))
        # Refused: a bad ID changes nothing and names the call.
        mark = kl.mark()
        self.assertEqual(pl.command("put d/x"), {RES: -22})
        kl.assert_no_event("devices", within=0.5, since=mark)
        pl.wait_log(r'kdp_plugin_set_device: device "d/x"', T)

    def test_burst_coalesces(self):
        kl = self.kubelet()
        pl = self.start_test_plugin("--devices", "a")
        kl.wait_event("devices", T, resource=RES)
        mark = kl.mark()
        n = 2000
        self.assertEqual(pl.command("burst %d" % n), {RES: 0})
        want = ["a"] + sorted("burst-%d" % i for i in range(n))
        kl.wait_event(devices_where(RES, lambda d: sorted(d) == want), T)
        kl.assert_no_event("devices", within=0.3, since=kl.mark())
        msgs = len(kl.events_since(mark, "devices"))
        # Each message is a whole list; how many the burst took depends on
        # how often the loop woke while it ran (never one per call here).
        figure("%d single puts in a row -> ListAndWatch messages" % n, "%d" % msgs)
        self.assertLess(msgs, n)


class Allocate(PluginTest):
    def _start(self, *args, devices="a,b,c:unhealthy,d"):
        self.hp = self.subdir("hp")
        kl = self.kubelet()
        pl = self.start_test_plugin("--devices", devices, "--host-paths", self.hp, *args)
        kl.wait_event("devices", T, resource=RES)
        return kl, pl

    def spec(self, dev_id):
        p = os.path.join(self.hp, dev_id)
        return {"container_path": p, "host_path": p, "permissions": "rw"}

    def test_unknown_and_unhealthy_ids(self):
        kl, _ = self._start()
        self.assertFailed(kl.command("allocate %s a,zz" % RES), "InvalidArgument", "zz")
        self.assertFailed(kl.command("allocate %s a,c" % RES), "InvalidArgument", '"c"')
        # ...and in a later container of the same request.
        self.assertFailed(kl.command("allocate %s a;b,zz9" % RES), "InvalidArgument", "zz9")
        self.assertOk(kl.command("allocate %s a" % RES))

    def test_response_of_allocate_op(self):
        kl, _ = self._start()
        r = self.assertOk(kl.command("allocate %s a,b" % RES))
        self.assertEqual(len(r["container_responses"]), 1)
        c = r["container_responses"][0]
        self.assertEqual(c["envs"], {"TEST_RESOURCE": RES, env_name_for(RES): "a,b"})
        self.assertEqual(env_name_for(RES), "KDP_DEVICES_KDP_TEST_DEV")
        self.assertEqual(c["devices"], [self.spec("a"), self.spec("b")])
        self.assertEqual(c["annotations"], {"kdp.test/allocated": "yes"})
        self.assertEqual(c["cdi_devices"], [{"name": "kdp.test/device=all"}])
        self.assertEqual(c["mounts"], [{"container_path": "/kdp-test", "host_path": "/tmp",
                                        "read_only": True}])

    def test_default_allocation(self):
        kl, _ = self._start("--default-alloc")
        r = self.assertOk(kl.command("allocate %s b,a" % RES))
        c = r["container_responses"][0]
        self.assertEqual(c["envs"], {"KDP_DEVICES_KDP_TEST_DEV": "b,a"})
        self.assertEqual(c["devices"], [self.spec("b"), self.spec("a")])
        self.assertEqual(c["mounts"], [])
        self.assertEqual(c["annotations"], {})
        self.assertEqual(c["cdi_devices"], [])

    def test_default_allocation_answered_inline(self):
        # No allocate op: kdp answers on its loop thread, so an Allocate is
        # served while the worker is busy in the author's (slow) list op.
        lf = os.path.join(self.subdir("files"), "list")
        with open(lf, "w") as f:
            f.write("a,b")
        kl = self.kubelet()
        pl = self.start_test_plugin("--list-file", lf, "--callback-timeout-ms", "20000",
                                    "--default-alloc")
        kl.wait_event(devices_where(RES, lambda d: sorted(d) == ["a", "b"]), T)
        with open(lf, "w") as f:
            f.write("sleep 4000\na,b,c")
        mark = pl.mark()
        self.assertEqual(pl.command("rescan"), {RES: 0})
        pl.wait_line("list sleeping", T, since=mark)  # the worker is in the list op now
        r = self.assertOk(kl.command("allocate %s b" % RES))
        self.assertEqual(r["container_responses"][0]["envs"], {env_name_for(RES): "b"})
        # answered before the list returned: no worker hop
        self.assertEqual([x for x in pl.lines(mark) if "list slept" in x], [])
        kl.wait_event(devices_where(RES, lambda d: sorted(d) == ["a", "b", "c"]), T)

    def test_several_containers(self):
        kl, _ = self._start("--default-alloc")
        r = self.assertOk(kl.command("allocate %s a;d,b;b" % RES))
        cs = r["container_responses"]
        self.assertEqual([c["envs"]["KDP_DEVICES_KDP_TEST_DEV"] for c in cs], ["a", "d,b", "b"])
        self.assertEqual([[x["host_path"] for x in c["devices"]] for c in cs],
                         [[self.spec("a")["host_path"]],
                          [self.spec("d")["host_path"], self.spec("b")["host_path"]],
                          [self.spec("b")["host_path"]]])
        # With the allocate op too.
        r = self.assertOk(kl.command("allocate %s d;a" % RES))
        self.assertEqual([c["envs"]["KDP_DEVICES_KDP_TEST_DEV"] for c in r["container_responses"]],
                         ["d", "a"])

    def test_callback_error_message(self):
        kl, _ = self._start("--fail-id", "b")
        self.assertFailed(kl.command("allocate %s a,b" % RES), "InvalidArgument",
                          "device b refuses to be allocated")
        # The message does not leak into the next call.
        r = self.assertOk(kl.command("allocate %s a" % RES))
        self.assertEqual(r["container_responses"][0]["envs"]["KDP_DEVICES_KDP_TEST_DEV"], "a")

    def test_slow_callback_deadline_while_stream_flows(self):
        kl = self.kubelet()
        pl = self.start_test_plugin("--devices", "slow,a,b", "--callback-timeout-ms", "500",
                              "--slow-ms", "5000")
        kl.wait_event("devices", T, resource=RES)
        t_send = time.time_ns()
        cid, mark = kl.command_async("allocate %s slow" % RES)
        # While the allocate hangs in the callback, the stream keeps flowing.
        self.assertEqual(pl.command("health a Unhealthy"), {RES: 0})
        dev = kl.wait_event(devices_where(RES, lambda d: d["a"][0] == "Unhealthy"), T, since=mark)
        reply = kl.wait_reply(cid, mark, T)
        self.assertLess(dev["t_ns"], reply["t_ns"],
                        "the devices event came after the allocate reply")
        self.assertFailed(reply, "DeadlineExceeded")
        figure("slow allocate: DeadlineExceeded after", "%.1f ms (callback timeout 500 ms)"
               % (reply["elapsed_us"] / 1e3))
        figure("slow allocate: health change reached the kubelet after",
               "%.1f ms" % ms(dev["t_ns"] - t_send))
        # A fresh worker serves the next call while the hung callback still sleeps.
        r = kl.command("allocate %s b" % RES, T)
        self.assertOk(r)
        self.assertLess(r["t_ns"], t_send + 5000 * 10**6,
                        "the next allocate was served only after the hung callback returned")
        figure("slow allocate: next allocate served in", "%.1f ms" % (r["elapsed_us"] / 1e3))
        self.assertEqual(r["response"]["container_responses"][0]["envs"]["TEST_RESOURCE"], RES)
        self.assertStopsCleanly(pl)


class PreStartAndPreferred(PluginTest):
    def _disks(self, names):
        ddir = self.subdir("disks")
        for n in names:
            with open(os.path.join(ddir, n), "wb") as f:
                f.write(b"\0" * 128)
        return ddir

    def test_superdisk_prestart_and_preferred(self):
        kl = self.kubelet()
        ddir = self._disks(["d0.img", "d1.img", "d2.img"])
        self.superdisk(ddir)
        res = "example.com/superdisk"
        reg = kl.wait_event("registered", T, resource=res)
        self.assertEqual(reg["options"], BOTH)
        kl.wait_event(devices_where(res, lambda d: sorted(d) == ["d0.img", "d1.img", "d2.img"]), T)
        self.assertOk(kl.command("prestart %s d1.img" % res))
        with open(os.path.join(ddir, "d1.img"), "rb") as f:
            head = f.read(64)
        self.assertTrue(head.startswith(b"SUPERDISK v1 formatted d1.img "), head)
        with open(os.path.join(ddir, "d0.img"), "rb") as f:
            self.assertEqual(f.read(), b"\0" * 128)  # untouched
        r = self.assertOk(kl.command("preferred %s available=d2.img,d0.img,d1.img must=d2.img "
                                     "size=2" % res))
        self.assertEqual(r["container_responses"][0]["deviceIDs"], ["d2.img", "d0.img"])
        r = self.assertOk(kl.command("allocate %s d0.img" % res))
        c = r["container_responses"][0]
        self.assertEqual(c["mounts"], [{"container_path": "/superdisk/d0.img",
                                        "host_path": os.path.join(ddir, "d0.img"),
                                        "read_only": False}])
        self.assertEqual(c["envs"], {"SUPERDISK_MOUNT": "/superdisk"})

    def test_test_plugin_prestart_and_preferred(self):
        kl = self.kubelet()
        log = self.file("prestart.log")
        self.start_test_plugin("--devices", "a,b,c,d", "--prestart", log, "--preferred")
        kl.wait_event("devices", T, resource=RES)
        self.assertOk(kl.command("prestart %s b,d" % RES))
        self.assertEqual(read_lines(log), ["prestart b,d"])
        r = self.assertOk(kl.command("preferred %s available=a,b,c,d size=2" % RES))
        self.assertEqual(r["container_responses"][0]["deviceIDs"], ["d", "c"])
        r = self.assertOk(kl.command("preferred %s available=a,b,c size=3" % RES))
        self.assertEqual(r["container_responses"][0]["deviceIDs"], ["c", "b", "a"])


class PreferredStrategy(PluginTest):
    """kdp_config.preferred: kdp answers GetPreferredAllocation itself."""

    def test_packed(self):
        kl = self.kubelet()
        self.start_test_plugin("--devices", "a0@0,a1@0,b0@1,b1@1,b2@1,z",
                               "--preferred-strategy", "packed")
        reg = kl.wait_event("registered", T, resource=RES)
        self.assertTrue(reg["options"]["get_preferred_allocation_available"], reg)
        kl.wait_event("devices", T, resource=RES, n=6)
        avail = "available=b2,a1,z,b0,a0,b1"
        for size, must, want in ((2, "", ["a0", "a1"]), (3, "", ["b0", "b1", "b2"]),
                                 (2, " must=b1", ["b1", "b0"]),
                                 (4, " must=b1", ["b1", "b0", "b2", "z"])):
            r = self.assertOk(kl.command("preferred %s %s%s size=%d" % (RES, avail, must, size)))
            self.assertEqual(r["container_responses"][0]["deviceIDs"], want, (size, must))

    def test_invalid_strategy_refused(self):
        pl = self.start_test_plugin("--devices", "a", "--preferred-strategy", "bogus")
        self.assertNotEqual(pl.wait_exit(T), 0)
        self.assertIn("invalid kdp_config.preferred 99", pl.log_text())


class Replicas(PluginTest):
    """kdp_config.replicas: each device served as N IDs "<id>-<k>"."""

    def _start(self, *args, devices="a@0,b:unhealthy@1"):
        self.hp = self.subdir("hp")
        self.alloc_log = self.file("alloc.log")
        kl = self.kubelet()
        pl = self.start_test_plugin("--devices", devices, "--host-paths", self.hp,
                                    "--alloc-log", self.alloc_log, *args)
        kl.wait_event("registered", T, resource=RES)
        return kl, pl

    def test_listed_and_health(self):
        kl, pl = self._start("--replicas", "3")
        ev = kl.wait_event("devices", T, resource=RES)
        self.assertEqual(devices_of(ev), {
            "a-0": ("Healthy", [0]), "a-1": ("Healthy", [0]), "a-2": ("Healthy", [0]),
            "b-0": ("Unhealthy", [1]), "b-1": ("Unhealthy", [1]), "b-2": ("Unhealthy", [1]),
        })
        st = kl.state()[RES]
        self.assertEqual((st["capacity"], st["allocatable"]), (6, 3))
        # One device's health (named by a replica ID) flips all its replicas
        # in one message; by its own ID too.
        mark = kl.mark()
        self.assertEqual(pl.command("health a-1 Unhealthy"), {RES: 0})
        ev = kl.wait_event("devices", T, since=mark, resource=RES)
        self.assertEqual({i: h for i, (h, _) in devices_of(ev).items() if i.startswith("a")},
                         {"a-0": "Unhealthy", "a-1": "Unhealthy", "a-2": "Unhealthy"})
        kl.assert_no_event("devices", within=0.5, since=kl.mark())
        self.assertEqual(len(kl.events_since(mark, "devices")), 1)
        mark = kl.mark()
        self.assertEqual(pl.command("health b Healthy"), {RES: 0})
        ev = kl.wait_event("devices", T, since=mark, resource=RES)
        self.assertEqual({h for i, (h, _) in devices_of(ev).items() if i.startswith("b")},
                         {"Healthy"})
        self.assertEqual(len(kl.events_since(mark, "devices")), 1)
        # A replica out of range is no ID of ours.
        self.assertEqual(pl.command("health a-3 Healthy"), {RES: -2})

    def test_allocate_resolves_devices(self):
        kl, _ = self._start("--replicas", "3")
        kl.wait_event("devices", T, resource=RES)
        r = self.assertOk(kl.command("allocate %s a-0,a-2" % RES))
        c = r["container_responses"][0]
        p = os.path.join(self.hp, "a")
        self.assertEqual(c["devices"], [{"container_path": p, "host_path": p,
                                         "permissions": "rw"}])  # once, not twice
        self.assertEqual(c["envs"][env_name_for(RES)], "a-0,a-2")
        self.assertEqual(read_lines(self.alloc_log), ["allocate a-0,a-2 -> a,a"])
        # What the kubelet can send wrong: no suffix, out of range, not
        # canonical, an unhealthy device's replica.
        for bad in ("a", "a-3", "a-01", "zz-0"):
            self.assertFailed(kl.command("allocate %s %s" % (RES, bad)), "InvalidArgument",
                              "unknown device ID", bad)
        self.assertFailed(kl.command("allocate %s b-1" % RES), "InvalidArgument", "Unhealthy")
        # Two containers share one device.
        r = self.assertOk(kl.command("allocate %s a-0;a-1" % RES))
        self.assertEqual(len(r["container_responses"]), 2)

    def test_one_per_container(self):
        kl, _ = self._start("--replicas", "2", "--one-per-container", "--default-alloc")
        kl.wait_event("devices", T, resource=RES)
        self.assertFailed(kl.command("allocate %s a-0,a-1" % RES), "InvalidArgument",
                          "a container asked for 2 replicas",
                          "allows one per container")
        r = self.assertOk(kl.command("allocate %s a-0;a-1" % RES))
        self.assertEqual([c["envs"][env_name_for(RES)] for c in r["container_responses"]],
                         ["a-0", "a-1"])

    AVAIL = "available=h0-2,g1-1,g0-0,h0-0,g1-0,g0-2,h0-1,g0-1,g1-2"

    def _preferred(self, strategy, cases):
        kl = self.kubelet()
        self.start_test_plugin("--devices", "g0@0,g1@0,h0@1", "--replicas", "3",
                               "--preferred-strategy", strategy)
        reg = kl.wait_event("registered", T, resource=RES)
        self.assertTrue(reg["options"]["get_preferred_allocation_available"], reg)
        kl.wait_event("devices", T, resource=RES, n=9)
        for size, must, want in cases:
            r = self.assertOk(kl.command("preferred %s %s%s size=%d"
                                         % (RES, self.AVAIL, must, size)))
            self.assertEqual(r["container_responses"][0]["deviceIDs"], want, (size, must))

    def test_spread(self):
        self._preferred("spread", ((3, "", ["g0-0", "g1-0", "h0-0"]),
                                   (4, "", ["g0-0", "g1-0", "h0-0", "g0-1"]),
                                   (3, " must=g0-1", ["g0-1", "g1-0", "h0-0"])))

    def test_packed(self):
        self._preferred("packed", ((2, "", ["h0-0", "h0-1"]),
                                   (4, "", ["g0-0", "g0-1", "g0-2", "g1-0"]),
                                   (3, " must=g1-2", ["g1-2", "g1-0", "g1-1"])))

    def test_bad_settings(self):
        pl = self.start_test_plugin("--devices", "a", "--replicas", "1025")
        self.assertNotEqual(pl.wait_exit(T), 0)
        pl.wait_log(r"invalid kdp_config\.replicas 1025", T)
        # An ID that leaves no room for its suffix is refused at set time.
        kl = self.kubelet()
        pl = self.start_test_plugin("--devices", "a", "--replicas", "1024")
        kl.wait_event("devices", T, resource=RES, n=1024)
        self.assertEqual(pl.command("many 1 251"), {RES: -22})
        pl.wait_log(r"is too long for 1024 replicas", T)
        self.assertEqual(pl.command("many 1 250"), {RES: 0})


class KubeletRestarts(PluginTest):
    N = 50

    def test_restart_50_times(self):
        kl = self.kubelet()
        life = self.file("lifecycle.log")
        pl = self.start_test_plugin("--devices", "a,b", "--lifecycle", life)
        kl.wait_event("registered", T, resource=RES)
        kl.wait_event("devices", T, resource=RES)
        lat = []
        t_all = time.monotonic()
        for i in range(self.N):
            mark = kl.mark()
            kl.ok("restart")
            done = kl.wait_event("restart", T, since=mark, phase="done")
            try:
                reg = kl.wait_event("registered", T, since=mark, resource=RES)
            except AssertionError as e:
                figure("kubelet restarts before the failure", "%d of %d re-registered" % (i, self.N))
                raise AssertionError(
                    "kubelet restart #%d: the plugin did not register again within %.0f s. "
                    "Its socket %s exists: %s; its last log line: %r. Emulator's events since "
                    "the restart: %s\n%s"
                    % (i + 1, T, pl.socket, os.path.exists(pl.socket),
                       (pl.log_lines()[-1:] or [""])[0],
                       [(x["event"], x.get("phase") or x.get("reason") or x.get("error", ""))
                        for x in kl.events_since(mark)], e)) from None
            lat.append(ms(reg["t_ns"] - done["t_ns"]))
            kl.wait_event("devices", T, since=mark, resource=RES)
        total = time.monotonic() - t_all
        figure("kubelet restart -> registered (ms, %d restarts)" % self.N,
               "p50 %.1f, max %.1f, min %.1f; %d restarts in %.2f s"
               % (percentile(lat, 50), max(lat), min(lat), self.N, total))
        r = self.assertOk(kl.command("allocate %s a" % RES))
        self.assertEqual(r["container_responses"][0]["envs"]["TEST_RESOURCE"], RES)
        regs = len(kl.events_since(0, "registered", resource=RES))
        life_lines = read_lines(life)
        refresh, destroy = life_lines.count("refresh"), life_lines.count("destroy")
        reasons = {}
        for line in pl.log_lines():
            if "restarting: " in line:
                why = line.split("restarting: ", 1)[1]
                reasons[why] = reasons.get(why, 0) + 1
        figure("kubelet restarts: registrations / refresh / destroy",
               "%d / %d / %d for %d restarts (+1 start); restart reasons %s"
               % (regs, refresh, destroy, self.N, reasons))
        self.assertGreaterEqual(refresh, self.N)
        self.assertGreaterEqual(destroy, self.N)
        self.assertEqual(life_lines[0], "refresh")
        self.assertStopsCleanly(pl)
        life_lines = read_lines(life)
        self.assertEqual(life_lines[-1], "destroy")

    def test_kubelet_absent_at_start(self):
        pl = self.start_test_plugin("--devices", "a,b")
        pl.wait_log(r"waiting for the kubelet", T)
        time.sleep(0.3)
        self.assertTrue(pl.alive(), "the plugin exited while waiting%s" % pl.diagnostics())
        t0 = time.time_ns()
        kl = self.kubelet()  # deletes the stale sockets, the plugin's too
        self.assertIn("kdp-test-dev.sock", kl.ready["removed"])
        reg = kl.wait_event("registered", T, resource=RES)
        figure("kubelet started after the plugin: kubelet exec -> registered",
               "%.1f ms" % ms(reg["t_ns"] - t0))
        kl.wait_event("devices", T, resource=RES)
        r = self.assertOk(kl.command("allocate %s a,b" % RES))
        self.assertEqual(r["container_responses"][0]["envs"]["KDP_DEVICES_KDP_TEST_DEV"], "a,b")
        self.assertTrue(os.path.exists(pl.socket))

    def test_kubelet_down_then_back(self):
        kl = self.kubelet()
        pl = self.start_test_plugin("--devices", "a,b")
        kl.wait_event("registered", T, resource=RES)
        kl.wait_event("devices", T, resource=RES)
        lmark = pl.log_mark()
        kl.ok("stop-server")  # connections dropped, kubelet.sock removed
        pl.wait_log(r"waiting for the kubelet", T, since=lmark)
        # A change while no kubelet listens reaches the next one.
        self.assertEqual(pl.command("health b Unhealthy"), {RES: 0})
        mark = kl.mark()
        t0 = time.time_ns()
        kl.ok("start-server")
        reg = kl.wait_event("registered", T, since=mark, resource=RES)
        figure("kubelet back (start-server) -> registered", "%.1f ms" % ms(reg["t_ns"] - t0))
        ev = kl.wait_event("devices", T, since=mark, resource=RES)
        self.assertEqual(devices_of(ev), {"a": ("Healthy", []), "b": ("Unhealthy", [])})
        self.assertOk(kl.command("allocate %s a" % RES))
        self.assertTrue(pl.alive())

    def test_socket_deleted_as_soon_as_recreated(self):
        # What a real kubelet restart does: the old kubelet's exit ends the
        # stream (the plugin restarts and re-creates its socket), then the
        # new kubelet deletes every socket in the dir -- possibly the
        # plugin's brand-new one. The plugin must notice whenever it happens.
        kl = self.kubelet(args=["-dial-timeout", "1s"])
        pl = self.start_test_plugin("--devices", "a")
        kl.wait_event("registered", T, resource=RES)
        kl.wait_event("devices", T, resource=RES)
        st = os.lstat(pl.socket)
        old = (st.st_ino, st.st_ctime_ns)
        lmark = pl.log_mark()
        kl.ok("stop-server")  # the stream ends; kubelet.sock goes away
        deadline = time.monotonic() + T
        while True:  # delete the plugin's new socket the moment it exists
            try:
                st = os.lstat(pl.socket)
                if (st.st_ino, st.st_ctime_ns) != old:
                    os.unlink(pl.socket)
                    break
            except FileNotFoundError:
                pass
            self.assertLess(time.monotonic(), deadline, "the plugin never re-created its socket")
        pl.wait_log(r"waiting for the kubelet", T, since=lmark)
        mark = kl.mark()
        t0 = time.time_ns()
        kl.ok("start-server")
        try:
            reg = kl.wait_event("registered", T, since=mark, resource=RES)
        except AssertionError as e:
            rejected = kl.events_since(mark, "rejected")
            raise AssertionError(
                "the plugin's socket was deleted right after the plugin re-created it (on the "
                "stream's end) and the plugin never noticed: socket exists now: %s; %d "
                "Register attempts rejected by the kubelet, the last: %r; the plugin's log "
                "since the stop:\n%s\n%s"
                % (os.path.exists(pl.socket), len(rejected),
                   rejected[-1]["error"] if rejected else None,
                   "\n".join(pl.log_lines(lmark)[-8:]), e)) from None
        figure("socket deleted as soon as re-created: start-server -> registered",
               "%.1f ms" % ms(reg["t_ns"] - t0))
        self.assertOk(kl.command("allocate %s a" % RES))

    def test_own_socket_deleted(self):
        kl = self.kubelet()
        pl = self.start_test_plugin("--devices", "a,b")
        kl.wait_event("registered", T, resource=RES)
        kl.wait_event("devices", T, resource=RES)
        mark, lmark = kl.mark(), pl.log_mark()
        t0 = time.time_ns()
        os.unlink(pl.socket)
        reg = kl.wait_event("registered", T, since=mark, resource=RES)
        figure("own socket deleted -> registered again", "%.1f ms" % ms(reg["t_ns"] - t0))
        pl.wait_log(r"restarting: .*socket was deleted", T, since=lmark)
        kl.wait_event("devices", T, since=mark, resource=RES)
        r = self.assertOk(kl.command("allocate %s b" % RES))
        self.assertEqual(r["container_responses"][0]["envs"]["KDP_DEVICES_KDP_TEST_DEV"], "b")
        self.assertTrue(os.path.exists(pl.socket))


class Shutdown(PluginTest):
    def test_sigterm_superdisk(self):
        kl = self.kubelet()
        ddir = self.subdir("disks")
        open(os.path.join(ddir, "x.img"), "w").close()
        pl = self.superdisk(ddir)
        kl.wait_event("registered", T, resource="example.com/superdisk")
        kl.wait_event("devices", T, resource="example.com/superdisk")
        self.assertTrue(os.path.exists(pl.socket))
        self.assertTrue(os.path.exists(pl.lock))
        mark = kl.mark()
        self.assertStopsCleanly(pl)
        self.assertFalse(os.path.exists(pl.socket), "socket left behind")
        self.assertFalse(os.path.exists(pl.lock), "lock file left behind")
        self.assertIn("superdisk: destroy:", pl.log_text())
        kl.wait_event("stream_end", T, since=mark, resource="example.com/superdisk")

    def test_sigterm_test_plugin(self):
        kl = self.kubelet()
        life = self.file("lifecycle.log")
        pl = self.start_test_plugin("--devices", "a", "--lifecycle", life)
        kl.wait_event("devices", T, resource=RES)
        mark = kl.mark()
        self.assertStopsCleanly(pl)
        self.assertEqual(read_lines(life), ["refresh", "destroy"])
        self.assertEqual(self.dir_entries(), ["kubelet.sock"])
        end = kl.wait_event("stream_end", T, since=mark, resource=RES)
        self.assertEqual(end["reason"], "stream")

    def test_sigint(self):
        kl = self.kubelet()
        pl = self.start_test_plugin("--devices", "a")
        kl.wait_event("devices", T, resource=RES)
        mark = kl.mark()
        pl.proc.send_signal(signal.SIGINT)
        rc = pl.wait_exit(T)
        self.assertEqual(rc, 0, pl.diagnostics())
        self.assertEqual(self.dir_entries(), ["kubelet.sock"])
        kl.wait_event("stream_end", T, since=mark, resource=RES)

    def test_stop_through_api(self):
        kl = self.kubelet()
        life = self.file("lifecycle.log")
        pl = self.start_test_plugin("--devices", "a", "--lifecycle", life)
        kl.wait_event("devices", T, resource=RES)
        mark = kl.mark()
        self.assertEqual(pl.command("stop"), {RES: 0})
        rc = pl.wait_exit(T)
        self.assertEqual(rc, 0, pl.diagnostics())
        self.assertFalse(os.path.exists(pl.socket), "socket left behind")
        self.assertFalse(os.path.exists(pl.lock), "lock file left behind")
        self.assertEqual(read_lines(life), ["refresh", "destroy"])
        kl.wait_event("stream_end", T, since=mark, resource=RES)

    def test_second_instance_refused(self):
        kl = self.kubelet()
        first = self.start_test_plugin("--devices", "a,b", name="first")
        kl.wait_event("registered", T, resource=RES)
        kl.wait_event("devices", T, resource=RES)
        mark = kl.mark()
        second = self.start_test_plugin("--devices", "x,y", name="second")
        rc = second.wait_exit(T)
        self.assertNotEqual(rc, 0, second.diagnostics())
        self.assertIn("another instance", second.log_text())
        # The first keeps its socket, its registration and its stream.
        self.assertTrue(os.path.exists(first.socket))
        self.assertTrue(os.path.exists(first.lock))
        r = self.assertOk(kl.command("allocate %s a" % RES))
        self.assertEqual(r["container_responses"][0]["envs"]["KDP_DEVICES_KDP_TEST_DEV"], "a")
        kl.assert_no_event("stream_end", within=0.5, since=mark)
        self.assertEqual(kl.events_since(mark, "registered"), [])
        self.assertEqual(kl.events_since(mark, "devices"), [])
        self.assertTrue(first.alive())
        self.assertStopsCleanly(first)


class Config(PluginTest):
    def test_two_resources_one_process(self):
        kl = self.kubelet()
        pl = self.start_test_plugin("--devices", "a,b", resources=("a.test/x", "b.test/y"))
        ra = kl.wait_event("registered", T, resource="a.test/x")
        rb = kl.wait_event("registered", T, since=0, resource="b.test/y")
        self.assertEqual((ra["endpoint"], rb["endpoint"]), ("a-test-x.sock", "b-test-y.sock"))
        for res in ("a.test/x", "b.test/y"):
            ev = kl.wait_event("devices", T, since=0, resource=res)
            self.assertEqual(ids_of(ev), ["a", "b"])
            r = self.assertOk(kl.command("allocate %s b" % res))
            self.assertEqual(r["container_responses"][0]["envs"],
                             {"TEST_RESOURCE": res, env_name_for(res): "b"})
        # A change reaches both.
        mark = kl.mark()
        self.assertEqual(pl.command("health a Unhealthy"), {"a.test/x": 0, "b.test/y": 0})
        for res in ("a.test/x", "b.test/y"):
            kl.wait_event(devices_where(res, lambda d: d["a"][0] == "Unhealthy"), T, since=mark)
        self.assertStopsCleanly(pl)
        self.assertEqual(self.dir_entries(), ["kubelet.sock"])

    def test_invalid_resource_names_refused(self):
        kl = self.kubelet()
        for name in ("gpu", "kubernetes.io/foo"):
            with self.subTest(name=name):
                mark = kl.mark()
                pl = self.start_test_plugin("--devices", "a", resources=(name,), name="plugin:" + name)
                rc = pl.wait_exit(T)
                self.assertNotEqual(rc, 0, pl.diagnostics())
                line = pl.wait_log(r"invalid resource name", T)
                self.assertIn(name, line)
                figure("invalid resource name %r" % name, line.split("] ", 1)[-1])
                kl.assert_no_event(lambda e: e.get("event") in ("registered", "rejected"),
                                   within=0.3, since=mark)
                self.assertEqual(self.dir_entries(), ["kubelet.sock"])


class SimpleMode(PluginTest):
    def test_example_simple(self):
        kl = self.kubelet()
        pl = self.simple(3)
        res = "example.com/simple"
        reg = kl.wait_event("registered", T, resource=res)
        note_exec_to_registered(pl, reg)
        self.assertEqual(reg["endpoint"], "simple.sock")
        self.assertEqual(reg["options"], NONE)
        ev = kl.wait_event("devices", T, resource=res)
        self.assertEqual(devices_of(ev), {"dev-%d" % i: ("Healthy", []) for i in range(3)})
        r = self.assertOk(kl.command("allocate %s dev-2,dev-0" % res))
        self.assertEqual(r["container_responses"][0]["envs"],
                         {"KDP_DEVICES_EXAMPLE_COM_SIMPLE": "dev-2,dev-0"})
        self.assertStopsCleanly(pl)
        self.assertFalse(os.path.exists(pl.socket))

    def test_list_file_rescan(self):
        kl = self.kubelet()
        lst = self.file("list.txt")
        with open(lst, "w") as f:
            f.write("a,b\n")
        pl = self.start_test_plugin("--list-file", lst)
        ev = kl.wait_event("devices", T, resource=RES)
        self.assertEqual(devices_of(ev), {"a": ("Healthy", []), "b": ("Healthy", [])})
        with open(lst, "w") as f:
            f.write("a,b:unhealthy,c@0\n")
        mark = kl.mark()
        self.assertEqual(pl.command("rescan"), {RES: 0})
        ev = kl.wait_event("devices", T, since=mark, resource=RES)
        self.assertEqual(devices_of(ev), {"a": ("Healthy", []), "b": ("Unhealthy", []),
                                          "c": ("Healthy", [0])})
        # The list op fails: the previous table stays, nothing is sent.
        os.unlink(lst)
        mark, lmark = kl.mark(), pl.log_mark()
        self.assertEqual(pl.command("rescan"), {RES: 0})
        pl.wait_log(r"keeping the previous device list", T, since=lmark)
        kl.assert_no_event("devices", within=0.5, since=mark)
        self.assertOk(kl.command("allocate %s c" % RES))
        # Unchanged rescans send nothing either.
        with open(lst, "w") as f:
            f.write("c@0,b:unhealthy,a\n")
        mark = kl.mark()
        self.assertEqual(pl.command("rescan"), {RES: 0})
        kl.assert_no_event("devices", within=0.5, since=mark)

    def test_list_file_rescan_interval(self):
        # kdp_config.rescan_interval_ms: the list op runs again by itself.
        kl = self.kubelet()
        lst = self.file("list.txt")
        with open(lst, "w") as f:
            f.write("a\n")
        pl = self.start_test_plugin("--list-file", lst, "--rescan-ms", "100")
        ev = kl.wait_event("devices", T, resource=RES)
        self.assertEqual(devices_of(ev), {"a": ("Healthy", [])})
        mark = kl.mark()
        with open(lst, "w") as f:
            f.write("a,b\n")  # no rescan command: only the interval can notice
        ev = kl.wait_event("devices", T, since=mark, resource=RES)
        self.assertEqual(devices_of(ev), {"a": ("Healthy", []), "b": ("Healthy", [])})
        self.assertStopsCleanly(pl)


class Embedding(PluginTest):
    def test_embedded_in_own_poll_loop(self):
        # kdp_ctx_get_fd + kdp_ctx_dispatch in the application's poll() loop,
        # with the application's own SIGTERM handler calling kdp_ctx_stop.
        kl = self.kubelet()
        pl = self.start_test_plugin("--devices", "a,b", "--embed")
        pl.wait_log(r"embedded loop on fd", T)
        kl.wait_event("registered", T, resource=RES)
        kl.wait_event("devices", T, resource=RES)
        r = self.assertOk(kl.command("allocate %s b" % RES))
        self.assertEqual(r["container_responses"][0]["envs"]["TEST_RESOURCE"], RES)
        mark = kl.mark()
        self.assertEqual(pl.command("health a Unhealthy"), {RES: 0})
        kl.wait_event("devices", T, since=mark, resource=RES)
        mark = kl.mark()
        kl.ok("restart")
        kl.wait_event("registered", T, since=mark, resource=RES)
        self.assertStopsCleanly(pl)
        self.assertFalse(os.path.exists(pl.socket))


class WatcherRegistration(PluginTest):
    """Registration through the kubelet's plugin watcher
    (kdp_config.registration = KDP_REGISTRATION_WATCHER, --registration
    watcher) against the emulator's watcher side: the plugin's socket in
    <root>/plugins_registry/, GetInfo, NotifyRegistrationStatus, no
    kubelet.sock Register."""

    RES2 = "kdp.test/other"

    def setUp(self):
        super().setUp()
        self.root = self.subdir("root")
        self.reg = os.path.join(self.root, "plugins_registry")
        os.makedirs(self.reg, exist_ok=True)

    def watcher_plugin(self, *args, resources=(RES,)):
        argv = ["--device-plugin-dir", self.dir, "--kubelet-root", self.root]
        for r in resources:
            argv += ["--resource", r]
        argv += list(args)
        return self.plugin("kdp-test-plugin", argv, socket_for(resources[0]), resources,
                           name="test-plugin", dir=self.reg)

    def status(self, pl, res=RES):
        mark = pl.mark()
        pl.send("status")
        line = pl.wait_line(r"^status %s " % res, T, since=mark)
        return json.loads(line.split(" ", 2)[2])

    def wait_registered_state(self, pl, want=4):
        deadline = time.monotonic() + T
        while time.monotonic() < deadline:
            if self.status(pl)["state"] == want:
                return
            time.sleep(0.05)
        self.fail("the plugin never reached state %d%s" % (want, pl.diagnostics()))

    def test_registered_through_the_watcher(self):
        kl = self.kubelet(registry=self.reg)
        pl = self.watcher_plugin("--registration", "watcher", "--devices", "a,b@0")
        ev = kl.wait_event("registered", T, resource=RES)
        self.assertEqual(ev["via"], "watcher")
        self.assertEqual(ev["registration_socket"], os.path.join(self.reg, socket_for(RES)))
        self.assertEqual(ev["endpoint"], ev["registration_socket"])  # this same socket
        info = kl.wait_event("watcher_info", T, since=0)
        self.assertEqual((info["type"], info["name"], info["supported_versions"]),
                         ("DevicePlugin", RES, ["v1beta1"]))
        kl.wait_event(devices_where(RES, lambda d: d == {"a": ("Healthy", []),
                                                         "b": ("Healthy", [0])}), T, since=0)
        kl.wait_event("watcher_notified", T, since=0, resource=RES, registered=True)
        pl.wait_log(r"registered with the kubelet \(plugin watcher", T)
        self.wait_registered_state(pl)
        self.assertOk(kl.command("allocate %s a" % RES))
        # nothing of ours in the device-plugin directory: no kubelet.sock Register
        self.assertEqual(self.dir_entries(), ["kubelet.sock"])
        self.assertEqual(kl.events_since(0, "registered", via="kubelet.sock"), [])
        self.assertStopsCleanly(pl)
        kl.wait_event("deregistered", T, resource=RES)
        self.assertFalse(os.path.exists(os.path.join(self.reg, socket_for(RES))))

    def test_refusal_logged_with_the_kubelets_reason_and_retried(self):
        # a kubelet whose device manager wants another version than ours
        kl = self.kubelet(registry=self.reg, args=("-manager-version", "v1"))
        pl = self.watcher_plugin("--registration", "watcher", "--devices", "a")
        first = kl.wait_event("watcher_refused", T, stage="validate")
        line = pl.wait_log(r"the kubelet refused the registration: ", T)
        self.assertIn(first["reason"], line)
        self.assertIn("manager version, v1, is not among plugin supported versions [v1beta1]", line)
        # retried: the socket re-created, the kubelet asks again (and refuses again)
        pl.wait_log(r"restarting: re-creating the registration socket", T)
        kl.wait_event("watcher_refused", T, stage="validate")  # the next one
        self.assertNotEqual(self.status(pl)["state"], 4)
        self.assertEqual(kl.events_since(0, "registered"), [])

    def test_socket_deleted_is_recreated(self):
        kl = self.kubelet(registry=self.reg)
        pl = self.watcher_plugin("--registration", "watcher", "--devices", "a")
        kl.wait_event("watcher_notified", T, resource=RES, registered=True)
        mark = kl.mark()
        os.unlink(os.path.join(self.reg, socket_for(RES)))
        kl.wait_event("deregistered", T, since=mark, resource=RES)
        ev = kl.wait_event("registered", T, since=mark, resource=RES)
        self.assertEqual(ev["via"], "watcher")
        kl.wait_event("watcher_notified", T, since=mark, resource=RES, registered=True)
        kl.wait_event(devices_where(RES, lambda d: sorted(d) == ["a"]), T, since=mark)
        self.assertTrue(os.path.exists(os.path.join(self.reg, socket_for(RES))))

    def test_kubelet_restart(self):
        kl = self.kubelet(registry=self.reg)
        pl = self.watcher_plugin("--registration", "watcher", "--devices", "a,b")
        kl.wait_event("watcher_notified", T, resource=RES, registered=True)
        for i in range(3):
            mark = kl.mark()
            r = kl.ok("restart")
            self.assertNotIn(socket_for(RES), r.get("removed", []), r)  # plugins_registry alone
            kl.wait_event("registered", T, since=mark, resource=RES, via="watcher")
            kl.wait_event("watcher_notified", T, since=mark, resource=RES, registered=True)
            kl.wait_event(devices_where(RES, lambda d: sorted(d) == ["a", "b"]), T, since=mark)
        self.wait_registered_state(pl)
        self.assertOk(kl.command("allocate %s b" % RES))
        # the socket stayed: the kubelets' walks found it, no re-creation
        # (which would make the kubelet deregister and register it again)
        self.assertEqual(pl.count_log(r"restarting"), 0, pl.log_text())
        self.assertEqual(kl.events_since(0, "watcher_gone"), [])

    def test_both_ways_in_one_process(self):
        kl = self.kubelet(registry=self.reg)
        pl = self.watcher_plugin("--devices", "a", "--watcher-resource", self.RES2,
                                 resources=(RES, self.RES2))
        one = kl.wait_event("registered", T, since=0, resource=RES)
        two = kl.wait_event("registered", T, since=0, resource=self.RES2)
        self.assertEqual((one["via"], two["via"]), ("kubelet.sock", "watcher"))
        self.assertEqual(os.path.dirname(two["registration_socket"]), self.reg)
        self.assertEqual(self.dir_entries(), sorted(["kubelet.sock", socket_for(RES),
                                                     socket_for(RES) + ".lock"]))
        self.assertOk(kl.command("allocate %s a" % RES))
        self.assertOk(kl.command("allocate %s a" % self.RES2))
        self.assertStopsCleanly(pl)

    def test_generic_and_gopher_take_the_mode(self):
        kl = self.kubelet(registry=self.reg)
        cfg = self.file("generic.yaml")
        with open(cfg, "w") as f:
            f.write("resources:\n  - name: example.com/null\n    devices:\n"
                    "      - path: /dev/null\n")
        gen = self.plugin("kdp-generic", ["--config", cfg, "--kubelet-root", self.root,
                                          "--device-plugin-dir", self.dir,
                                          "--registration", "watcher"],
                          "kdp-example-com-null.sock", ["example.com/null"], name="kdp-generic",
                          dir=self.reg)
        gdir = self.subdir("gophers")
        with open(os.path.join(gdir, "g0"), "w") as f:
            f.write("gopher\n")
        gopher = self.plugin("kdp-example-gopher",
                             ["--device-plugin-dir", self.dir, "--kubelet-root", self.root,
                              "--devices-dir", gdir, "--registration", "watcher"],
                             "gopher.sock", ["example.com/gopher"], name="gopher", dir=self.reg)
        for res in ("example.com/null", "example.com/gopher"):
            self.assertEqual(kl.wait_event("registered", T, since=0, resource=res)["via"],
                             "watcher")
        kl.wait_event(devices_where("example.com/gopher", lambda d: sorted(d) == ["g0"]), T,
                      since=0)
        kl.wait_event(devices_where("example.com/null", lambda d: len(d) == 1), T, since=0)
        self.assertEqual(sorted(e for e in os.listdir(self.reg) if e.endswith(".sock")),
                         ["gopher.sock", "kdp-example-com-null.sock"])
        self.assertStopsCleanly(gen)
        self.assertStopsCleanly(gopher)
        bad = subprocess.run([binary("kdp-example-gopher"), "--registration", "sometimes"],
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, timeout=T, text=True)
        self.assertEqual(bad.returncode, 2)
        self.assertIn("--registration: kubelet, watcher or auto", bad.stderr)

    def test_auto_takes_kubelet_sock_when_it_exists(self):
        kl = self.kubelet(registry=self.reg)
        pl = self.watcher_plugin("--registration", "auto", "--devices", "a")
        self.assertEqual(kl.wait_event("registered", T, resource=RES)["via"], "kubelet.sock")
        pl.wait_log(r"registration auto: kubelet.sock \(it exists", T)

    def test_auto_takes_the_watcher_without_kubelet_sock(self):
        # no kubelet.sock in the device-plugin dir: the emulator plays the watcher side only on
        # another directory tree (its own -dir elsewhere)
        other = self.subdir("kubelet-elsewhere")
        kl = self.kubelet(dir=other, registry=self.reg)
        pl = self.watcher_plugin("--registration", "auto", "--devices", "a")
        pl.wait_log(r"registration auto: plugin watcher \(there is no kubelet.sock", T)
        self.assertEqual(kl.wait_event("registered", T, resource=RES)["via"], "watcher")

    def test_bad_mode_and_dot_socket_refused(self):
        bad = subprocess.run([binary("kdp-test-plugin"), "--device-plugin-dir", self.dir,
                              "--kubelet-root", self.root, "--registration", "watcher",
                              "--socket", ".hidden.sock"], stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=T, text=True)
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("the kubelet skips names that start with '.'", bad.stderr)
        env = dict(os.environ, KDP_REGISTRATION="sometimes")
        bad = subprocess.run([binary("kdp-test-plugin"), "--device-plugin-dir", self.dir],
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, timeout=T, text=True, env=env)
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn('invalid $KDP_REGISTRATION "sometimes"', bad.stderr)


HANDOVER = {}


class Handover(PluginTest):
    """A DaemonSet rolling update with maxSurge 1: the old and the new
    instance of one plugin at once, each on its own socket
    (kdp_config.instance, $KDP_INSTANCE), against the emulator's two
    kubelet generations (-endpoint-tracking socket: PR #135437; resource:
    the kubelets before it). The capacity the kubelet reports is sampled at
    every change ("capacity" events)."""

    def instance(self, inst, gen=None, extra=(), devices="a,b"):
        env = dict(os.environ, KDP_INSTANCE=inst)
        env.pop("KDP_GENERATION", None)
        if gen is not None:
            env["KDP_GENERATION"] = str(gen)
        lf = os.path.join(self.subdir("files"), "lifecycle-" + inst)
        argv = ["--device-plugin-dir", self.dir, "--resource", RES, "--lifecycle", lf]
        if devices:
            argv += ["--devices", devices]
        argv += list(extra)
        sock = "kdp-test-dev-%s.sock" % inst
        p = self.plugin("kdp-test-plugin", argv, sock, [RES], name="plugin-" + inst, env=env)
        return p, lf

    def handover(self, tracking):
        kl = self.kubelet(tracking=tracking)
        old, old_lf = self.instance("old")
        kl.wait_event("registered", T, resource=RES, endpoint="kdp-test-dev-old.sock")
        kl.wait_event(devices_where(RES, lambda d: sorted(d) == ["a", "b"]), T)
        mark = kl.mark()
        self.samples = self.sampler(kl)
        t0 = time.monotonic()
        new, new_lf = self.instance("new")
        kl.wait_event("registered", T, since=mark, resource=RES, endpoint="kdp-test-dev-new.sock")
        old.wait_log(r"superseded by instance new \(generation 0, socket kdp-test-dev-new.sock\)",
                     T)
        self.assertEqual(old.wait_exit(T), 0, old.diagnostics())
        exit_ms = (time.monotonic() - t0) * 1e3
        # the new one's socket untouched (a kubelet tracking by resource
        # drops the new instance when the old one's stream ends, and the new
        # one restarts, its socket re-created: checked once it is back), the
        # old one's removed, destroy called
        if tracking == "socket":
            self.assertTrue(os.path.exists(new.socket))
        self.assertFalse(os.path.exists(old.socket))
        self.assertIn("destroy", read_lines(old_lf))
        return kl, new, mark, exit_ms

    def settle(self, kl, mark):
        """The capacity events from the first time allocatable was 2 on (every
        change the kubelet made, exact), once allocatable is back at 2."""
        deadline = time.monotonic() + T
        while time.monotonic() < deadline:
            st = kl.state().get(RES, {})
            if st.get("allocatable") == 2:
                break
            time.sleep(0.02)
        caps = kl.capacities(RES, since=0)
        first = next(i for i, c in enumerate(caps) if c[2] == 2)
        return caps[first:]

    def sampler(self, kl):
        """Polls the kubelet's state every 2 ms in a thread: stop() returns
        [(t, capacity, allocatable)]."""
        import threading
        out, stop = [], threading.Event()

        def run():
            while not stop.is_set():
                st = kl.state().get(RES, {})
                out.append((time.monotonic(), st.get("capacity"), st.get("allocatable")))
                time.sleep(0.002)
        th = threading.Thread(target=run, daemon=True)
        th.start()

        def done():
            time.sleep(0.2)  # and a while after
            stop.set()
            th.join(T)
            return out
        return done

    def test_per_socket_kubelet_never_loses_capacity(self):
        kl, new, mark, exit_ms = self.handover("socket")
        caps = self.settle(kl, mark)
        polled = self.samples()
        self.assertEqual([a for _, _, a in caps if a == 0], [], caps)
        self.assertEqual([s for s in polled if s[2] != 2], [], "allocatable below 2 while polled")
        self.assertEqual(kl.state()[RES]["allocatable"], 2)
        self.assertOk(kl.command("allocate %s a" % RES))
        # no re-registration storm: the new instance registered once
        self.assertEqual(len(kl.events_since(mark, "registered", resource=RES)), 1)
        figure("handover, per-socket kubelet: new instance started -> old instance exited",
               "%.0f ms" % exit_ms)
        figure("handover, per-socket kubelet: allocatable polled every 2 ms during it",
               "%d samples, lowest %d; %d changes seen by the kubelet, lowest %d" % (
                   len(polled), min(s[2] for s in polled), len(caps),
                   min(a for _, _, a in caps)))
        HANDOVER["socket"] = (exit_ms, len(polled), min(s[2] for s in polled))
        self.assertStopsCleanly(new)

    def test_per_resource_kubelet_gap_then_back(self):
        kl, new, mark, exit_ms = self.handover("resource")
        # that kubelet drops the new instance when the old one's stream ends
        # (which it may see after the old process has exited: wait for it);
        # the new one registers again at once
        kl.wait_event("capacity", T, since=mark, resource=RES, allocatable=0)
        caps = self.settle(kl, mark)
        polled = self.samples()
        self.assertEqual(kl.state()[RES]["allocatable"], 2, caps)
        self.assertTrue(os.path.exists(new.socket))
        zero = [t for t, _, a in caps if a == 0]
        back = [t for t, _, a in caps if a == 2 and zero and t > zero[0]]
        self.assertTrue(zero and back, caps)
        gap_ms = (back[0] - zero[0]) / 1e6
        new.wait_log(r"restarting", T)
        self.assertOk(kl.command("allocate %s a" % RES))
        figure("handover, per-resource kubelet: new instance started -> old instance exited",
               "%.0f ms" % exit_ms)
        figure("handover, per-resource kubelet: allocatable at 0 for", "%.1f ms (%d polled "
               "samples at 0 of %d)" % (gap_ms, sum(1 for s in polled if s[2] == 0), len(polled)))
        HANDOVER["resource"] = (exit_ms, len(polled), gap_ms)
        self.assertStopsCleanly(new)

    def test_crash_of_the_new_instance_leaves_the_old_serving(self):
        kl = self.kubelet(tracking="socket")
        old, _ = self.instance("old")
        kl.wait_event("registered", T, resource=RES, endpoint="kdp-test-dev-old.sock")
        lf = os.path.join(self.subdir("files"), "slow-list")
        with open(lf, "w") as f:
            f.write("sleep 20000\na,b")
        new, _ = self.instance("new", devices=None, extra=("--list-file", lf,
                                                           "--callback-timeout-ms", "30000"))
        new.wait_line("list sleeping", T)  # started, not registered yet
        new.kill()
        new.wait_exit(T)
        self.assertOk(kl.command("allocate %s a" % RES))
        self.assertTrue(old.alive())
        self.assertEqual(old.count_log("superseded"), 0)
        self.assertEqual(kl.state()[RES]["allocatable"], 2)
        self.assertStopsCleanly(old)

    def test_older_generation_never_takes_over(self):
        # the new pod (generation 2) serves; the old pod's container restarts
        # (generation 1) during the update: it stops at once, the new stays
        kl = self.kubelet(tracking="socket")
        new, _ = self.instance("new", gen=2)
        kl.wait_event("registered", T, resource=RES, endpoint="kdp-test-dev-new.sock")
        # the new instance writes its marker once the kubelet took its
        # Register: wait for it (else the old one, started in between, finds
        # none and registers: a race of the test, seen under ASan)
        marker = os.path.join(self.dir, ".kdp-test-dev.newest")

        def marked():
            try:
                with open(marker) as f:
                    return "instance new" in f.read()
            except OSError:
                return False
        wait_for(marked, T, "the new instance's handover marker")
        mark = kl.mark()
        old, _ = self.instance("old", gen=1)
        old.wait_log(r"superseded by instance new \(generation 2", T)
        self.assertEqual(old.wait_exit(T), 0)
        self.assertTrue(new.alive())
        self.assertEqual(new.count_log("superseded"), 0)
        caps = self.settle(kl, mark)
        self.assertEqual([a for _, _, a in caps if a == 0], [], caps)
        self.assertOk(kl.command("allocate %s b" % RES))

    def test_gopher_hands_over(self):
        # the example, unchanged: the instance comes from the environment
        kl = self.kubelet(tracking="socket")
        gdir = self.subdir("gophers")
        for g in ("g0", "g1"):
            with open(os.path.join(gdir, g), "w") as f:
                f.write("gopher\n")

        def gopher(inst):
            env = dict(os.environ, KDP_INSTANCE=inst, KDP_GENERATION="3")
            return self.plugin("kdp-example-gopher", ["--device-plugin-dir", self.dir,
                                                      "--devices-dir", gdir],
                               "gopher-%s.sock" % inst, ["example.com/gopher"],
                               name="gopher-" + inst, env=env)
        old = gopher("a1")
        kl.wait_event("registered", T, resource="example.com/gopher", endpoint="gopher-a1.sock")
        mark = kl.mark()
        new = gopher("b2")
        kl.wait_event("registered", T, since=mark, endpoint="gopher-b2.sock")
        self.assertEqual(old.wait_exit(T), 0)
        old.wait_log(r"superseded by instance b2 \(generation 3, socket gopher-b2.sock\)", T)
        self.assertEqual(kl.state()["example.com/gopher"]["allocatable"], 2)
        self.assertEqual([c for c in kl.capacities("example.com/gopher", since=mark)
                          if c[2] == 0], [])
        r = self.assertOk(kl.command("allocate example.com/gopher g1"))
        self.assertEqual(r["container_responses"][0]["envs"], {"GOPHER": "g1"})
        self.assertEqual(self.dir_entries(), sorted(["kubelet.sock", "gopher-b2.sock",
                                                     "gopher-b2.sock.lock", ".gopher.newest"]))
        self.assertStopsCleanly(new)

    def test_same_instance_still_refused(self):
        kl = self.kubelet()
        first, _ = self.instance("x")
        kl.wait_event("registered", T, resource=RES)
        second, _ = self.instance("x")
        self.assertNotEqual(second.wait_exit(T), 0)
        self.assertIn("another instance", second.log_text())
        self.assertTrue(first.alive())

    def test_bad_instance_refused(self):
        for inst, why in (("a/b", "may hold only"), (".x", "must not start with"),
                          ("y" * 65, "1 to 64")):
            env = dict(os.environ, KDP_INSTANCE=inst)
            r = subprocess.run([binary("kdp-test-plugin"), "--device-plugin-dir", self.dir],
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, timeout=T, text=True, env=env)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("invalid $KDP_INSTANCE", r.stderr)
            self.assertIn(why, r.stderr)


class KubeletRoot(PluginTest):
    """The kubelet's root directory (kdp_config.kubelet_root, --kubelet-root,
    $KDP_KUBELET_ROOT): checked, taken by the library and both tools, and, as
    for the kubelet, not a move of the device-plugin directory."""

    RES = "example.com/simple"

    def env(self, **set_vars):
        env = {k: v for k, v in os.environ.items()
               if k not in ("KDP_KUBELET_ROOT", "KDP_DEVICE_PLUGIN_DIR")}
        env.update(set_vars)
        return env

    def simple(self, dp, env, args=()):
        return self.plugin("kdp-example-simple", ["--count", "2", "--resource", self.RES] +
                           list(args), "simple.sock", [self.RES], dir=dp, env=env)

    def kdpctl(self, *args, env=None):
        return subprocess.run([binary("kdpctl")] + list(args), env=env or self.env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=T, text=True)

    def test_a_root_leaves_the_device_plugin_dir_alone(self):
        root = self.subdir("root")
        kl = self.kubelet()
        pl = self.simple(self.dir, self.env(KDP_DEVICE_PLUGIN_DIR=self.dir),
                         ["--kubelet-root", root])
        kl.wait_event("registered", T, resource=self.RES)
        kl.wait_event("devices", T, resource=self.RES, n=2)
        self.assertOk(kl.command("allocate %s dev-0" % self.RES))
        self.assertEqual(os.listdir(root), [], "nothing is made below the kubelet root")
        self.assertTrue(pl.alive(), pl.diagnostics())

    def test_relative_root_refused_with_its_name(self):
        pl = self.start_test_plugin("--kubelet-root", "var/lib/kubelet")  # kdp_config's
        self.assertNotEqual(pl.wait_exit(T), 0)
        self.assertRegex(pl.log_text(), r'kdp_config\.kubelet_root: "var/lib/kubelet" is not an '
                         r"absolute path")
        pl = self.simple(self.dir, self.env(), ["--kubelet-root", "lib/kubelet"])  # the env's
        self.assertNotEqual(pl.wait_exit(T), 0)
        self.assertRegex(pl.log_text(), r'\$KDP_KUBELET_ROOT: "lib/kubelet" is not an absolute')
        r = self.kdpctl("--kubelet-root", "lib/kubelet", "list", "x.sock")
        self.assertEqual(r.returncode, 2, r)
        self.assertIn('--kubelet-root wants an absolute path, not "lib/kubelet"', r.stderr)
        r = self.kdpctl("list", "x.sock", env=self.env(KDP_KUBELET_ROOT="lib/kubelet"))
        self.assertEqual(r.returncode, 2, r)
        self.assertIn("$KDP_KUBELET_ROOT must be an absolute path", r.stderr)

    def test_kdpctl_and_generic_take_a_root(self):
        root = self.subdir("root")
        kl = self.kubelet()
        cfg = self.file("generic.yaml")
        with open(cfg, "w") as f:
            f.write("resources:\n  - name: example.com/null\n    devices:\n"
                    "      - path: /dev/null\n")
        pl = self.plugin("kdp-generic", ["--config", cfg, "--kubelet-root", root,
                                         "--device-plugin-dir", self.dir],
                         "kdp-example-com-null.sock", ["example.com/null"], name="kdp-generic",
                         env=self.env())
        kl.wait_event("registered", T, resource="example.com/null")
        kl.wait_event("devices", T, resource="example.com/null", n=1)
        r = self.kdpctl("--kubelet-root", root, "list", "kdp-example-com-null.sock",
                        env=self.env(KDP_DEVICE_PLUGIN_DIR=self.dir))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"\bnull\b")
        self.assertTrue(pl.alive(), pl.diagnostics())


if __name__ == "__main__":
    unittest.main(verbosity=2)
