#!/usr/bin/python3
"""The kubelet emulator (kdp-test-kubelet) against a grpc-go device plugin
(kdp-go-testplugin): proves the emulator before kdp is tested with it.

usage: KDP_BIN_DIR=<build>/bin /usr/bin/python3 test_emulator.py [-v] [Test.name ...]
"""

import json
import os
import socket
import stat
import sys
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from kdptest import T, Proc, ProcTest, binary  # noqa: E402
from kdptest.kubelet import Kubelet  # noqa: E402

RES = "example.com/dev"


class Plugin(Proc):
    """kdp-go-testplugin serving DIR/socket."""

    def __init__(self, dir, socket="tp.sock", resource=RES, args=()):
        argv = [binary("kdp-go-testplugin"), "-dir", dir, "-socket", socket,
                "-resource", resource] + list(args)
        super().__init__(argv, name="plugin:" + socket)
        self.socket = os.path.join(dir, socket)
        self.endpoint = socket


class WPlugin(Proc):
    """kdp-go-testplugin in watcher mode: registration socket REGISTRY/reg."""

    def __init__(self, registry, reg="tp-reg.sock", resource=RES, args=()):
        argv = [binary("kdp-go-testplugin"), "-registry", registry, "-reg-socket", reg,
                "-resource", resource] + list(args)
        super().__init__(argv, name="wplugin:" + reg)
        self.socket = os.path.join(registry, reg)


class Base(ProcTest):
    TEST_BOUND = 60.0

    def kubelet(self, dir=None, **kw):
        return self.start_proc(Kubelet(dir or self.dir, **kw))

    def plugin(self, *args, socket="tp.sock", resource=RES, dir=None):
        p = self.start_proc(Plugin(dir or self.dir, socket, resource, args))
        p.wait_event("serving", T)
        return p

    def wkubelet(self, **kw):
        """A kubelet with the watcher side: DIR/device-plugins and
        DIR/plugins_registry."""
        dp = os.path.join(self.dir, "device-plugins")
        os.makedirs(dp, exist_ok=True)
        return self.kubelet(dp, registry=os.path.join(self.dir, "plugins_registry"), **kw)

    def wplugin(self, kl, *args, reg="tp-reg.sock", resource=RES):
        p = self.start_proc(WPlugin(kl.registry, reg, resource, args))
        p.wait_event("serving", T, socket=p.socket)
        return p

    def assertClean(self, proc):
        rc = proc.stop()
        self.assertEqual(rc, 0, "%s exited %s%s" % (proc.name, rc, proc.diagnostics()))


class Startup(Base):
    def test_removes_only_sockets(self):
        stale = os.path.join(self.dir, "stale.sock")
        s = socket.socket(socket.AF_UNIX)
        s.bind(stale)
        s.close()
        for name in ("kubelet_internal_checkpoint", "notes.txt"):
            with open(os.path.join(self.dir, name), "w") as f:
                f.write("keep")
        os.mkdir(os.path.join(self.dir, "subdir"))
        kl = self.kubelet()
        self.assertEqual(kl.ready["removed"], ["stale.sock"])
        self.assertEqual(sorted(os.listdir(self.dir)),
                         ["kubelet.sock", "kubelet_internal_checkpoint", "notes.txt", "subdir"])
        self.assertTrue(stat.S_ISSOCK(os.stat(kl.socket).st_mode))
        self.assertClean(kl)
        self.assertFalse(os.path.exists(kl.socket))

    def test_stdin_eof_and_quit_exit_0(self):
        kl = self.kubelet()
        kl.send("quit")
        kl.wait_event("exit", T, reason="quit")
        self.assertClean(kl)
        kl2 = self.kubelet()
        kl2.proc.stdin.close()
        kl2.wait_event("exit", T, reason="stdin closed")
        self.assertClean(kl2)


class Registration(Base):
    def test_modern_options_before_answer(self):
        kl = self.kubelet()
        pl = self.plugin("-prestart", "-preferred")
        reg = kl.wait_event("registered", T, resource=RES)
        self.assertEqual(reg["endpoint"], "tp.sock")
        self.assertEqual(reg["version"], "v1beta1")
        self.assertEqual(reg["options_source"], "rpc")
        both = {"pre_start_required": True, "get_preferred_allocation_available": True}
        self.assertEqual(reg["options"], both)
        self.assertEqual(reg["request_options"], both)
        # GetDevicePluginOptions ran before the plugin's Register returned.
        opts = pl.wait_event("get_options", T)
        done = pl.wait_event("registered", T)
        self.assertLess(opts["t_ns"], done["t_ns"])
        self.assertLessEqual(reg["register_ns"], opts["t_ns"])
        self.assertEqual(opts["authority"], "localhost")
        # since=0: ListAndWatch may open before the plugin's Register returns
        # (the kubelet starts it in a goroutine as it answers).
        opened = pl.wait_event("list_and_watch", T, since=0, phase="open")
        self.assertEqual(opened["authority"], "localhost")
        self.assertClean(kl)
        pl.wait_event("list_and_watch", T, phase="closed")

    def test_legacy_options_from_request(self):
        kl = self.kubelet(legacy=True, dial="legacy")
        pl = self.plugin("-prestart")
        reg = kl.wait_event("registered", T, resource=RES)
        self.assertEqual(reg["options_source"], "request")
        opts = {"pre_start_required": True, "get_preferred_allocation_available": False}
        self.assertEqual(reg["options"], opts)
        self.assertEqual(reg["request_options"], opts)
        opened = pl.wait_event("list_and_watch", T, phase="open")
        self.assertEqual(opened["authority"], pl.socket)  # -dial legacy: path as :authority
        pl.assert_no_event("get_options", within=0.5, since=0)
        # A fresh GetDevicePluginOptions on demand agrees with the request.
        r = kl.ok("options %s" % RES)
        self.assertEqual(r["response"], opts)
        pl.wait_event("get_options", T)

    def test_options_absent_from_request(self):
        kl = self.kubelet(legacy=True)
        self.plugin("-prestart", "-request-options=false")
        reg = kl.wait_event("registered", T)
        self.assertIsNone(reg["request_options"])
        self.assertEqual(reg["options"], {"pre_start_required": False,
                                          "get_preferred_allocation_available": False})
        kl.stop()
        kl2 = self.kubelet()
        # the plugin's socket was deleted by kl2's start: it serves again and registers
        reg = kl2.wait_event("registered", T)
        self.assertIsNone(reg["request_options"])
        self.assertEqual(reg["options_source"], "rpc")
        self.assertTrue(reg["options"]["pre_start_required"])

    def test_dial_failure(self):
        # The plugin registers an endpoint nobody serves: the dial times out
        # (-dial-timeout 1s here, 10 s by default). Modern: Register fails.
        kl = self.kubelet(args=["-dial-timeout", "1s"])
        pl = self.plugin("-endpoint", "nobody.sock")
        rej = kl.wait_event("rejected", T)
        self.assertEqual(rej["endpoint"], "nobody.sock")
        self.assertTrue(rej["error"].startswith("failed to dial device plugin:"), rej["error"])
        self.assertIn("failed to dial", pl.wait_event("register_failed", T)["error"])

    def test_dial_failure_legacy(self):
        # Legacy: Register succeeds at once, the dial fails later.
        kl = self.kubelet(legacy=True, args=["-dial-timeout", "1s"])
        pl = self.plugin("-endpoint", "nobody.sock")
        pl.wait_event("registered", T)
        ev = kl.wait_event("connect_failed", T)
        self.assertTrue(ev["error"].startswith("failed to dial device plugin:"), ev["error"])
        self.assertEqual(kl.command("options %s" % RES)["code"], "NotRegistered")

    def test_bad_version_rejected(self):
        kl = self.kubelet()
        pl = self.plugin("-version", "v1alpha")
        rej = kl.wait_event("rejected", T)
        self.assertIn('requested API version "v1alpha" is not supported', rej["error"])
        self.assertIn("v1beta1", rej["error"])
        f = pl.wait_event("register_failed", T)
        self.assertEqual(f["code"], "Unknown")
        self.assertIn("not supported", f["error"])
        kl.assert_no_event("registered", within=0.3, since=0)

    def test_resource_names(self):
        kl = self.kubelet()
        invalid = ["nodomain", "kubernetes.io/gpu", "foo.kubernetes.io/gpu",
                   "requests.example.com/x", "Example.com/x", "example.com/-x",
                   "example.com/x-", "example.com/", "/x", "example.com/a/b",
                   "example.com/" + "a" * 64, "exa_mple.com/x", "example.com/x y"]
        valid = ["example.com/x", "example.com/My_Dev.1", "a/b", "example.com/" + "a" * 63,
                 "sub.example.com/9"]
        for i, name in enumerate(invalid + valid):
            mark = kl.mark()
            pl = self.plugin(socket="n%d.sock" % i, resource=name)
            ev = kl.wait_event(lambda e: e["event"] in ("registered", "rejected"), T, since=mark)
            if name in valid:
                self.assertEqual(ev["event"], "registered", name)
                self.assertEqual(ev["resource"], name)
            else:
                self.assertEqual(ev["event"], "rejected", name)
                self.assertEqual(ev["error"], "the ResourceName %s is invalid" % json.dumps(name))
                f = pl.wait_event("register_failed", T)
                self.assertIn(json.dumps(name), f["error"])
            pl.stop()

    def test_replaced_modern(self):
        self._replaced(legacy=False)

    def test_replaced_legacy(self):
        self._replaced(legacy=True)

    def _replaced(self, legacy):
        kl = self.kubelet(legacy=legacy)
        a = self.plugin("-devices", "a0,a1", socket="a.sock")
        kl.wait_event("registered", T, endpoint="a.sock")
        kl.wait_event("devices", T, endpoint="a.sock")
        b = self.plugin("-devices", "b0", socket="b.sock")
        rep = kl.wait_event("replaced", T)
        self.assertEqual((rep["resource"], rep["old_endpoint"], rep["endpoint"]),
                         (RES, "a.sock", "b.sock"))
        kl.wait_event("registered", T, endpoint="b.sock")
        kl.wait_event("devices", T, endpoint="b.sock", current=True)
        r = kl.ok("allocate %s b0" % RES)
        self.assertEqual(r["endpoint"], "b.sock")
        self.assertEqual(kl.state()[RES]["allocatable"], 1)
        # The old plugin goes away: modern kubelets mark the whole resource
        # unhealthy (PluginDisconnected by name); <= 1.24 only if it was current.
        a.stop()
        end = kl.wait_event("stream_end", T, endpoint="a.sock")
        self.assertFalse(end["current"])
        self.assertEqual(end["reason"], "stream")
        self.assertEqual(end["marked_unhealthy"], not legacy)
        st = kl.state()[RES]
        self.assertEqual(st["allocatable"], 1 if legacy else 0)
        self.assertEqual(st["clients"], ["b.sock"])
        self.assertTrue(st["connected"])
        b.send("set b1 Healthy")
        ev = kl.wait_event("devices", T, endpoint="b.sock", n=2)
        self.assertEqual(ev["healthy"], 2)
        self.assertEqual(kl.state()[RES]["allocatable"], 2)


class Devices(Base):
    def test_devices_and_updates(self):
        kl = self.kubelet()
        pl = self.plugin("-devices", "a,b", "-unhealthy", "c", "-numa", "1")
        ev = kl.wait_event("devices", T, resource=RES)
        self.assertEqual(ev["seq"], 1)
        self.assertEqual((ev["n"], ev["healthy"], ev["unhealthy"]), (3, 2, 1))
        self.assertEqual(ev["devices"], [
            {"id": "a", "health": "Healthy", "numa": [1]},
            {"id": "b", "health": "Healthy", "numa": [1]},
            {"id": "c", "health": "Unhealthy", "numa": [1]}])
        self.assertGreater(ev["bytes"], 0)
        self.assertTrue(ev["current"])
        pl.send("set a Unhealthy")
        ev = kl.wait_event("devices", T, seq=2)
        self.assertEqual((ev["healthy"], ev["unhealthy"]), (1, 2))
        st = kl.state()[RES]
        self.assertEqual((st["capacity"], st["allocatable"], st["seq"]), (3, 1, 2))

    def test_plugin_exit_ends_stream(self):
        kl = self.kubelet()
        pl = self.plugin()
        kl.wait_event("devices", T)
        pl.stop()
        end = kl.wait_event("stream_end", T)
        self.assertEqual((end["reason"], end["current"], end["marked_unhealthy"]),
                         ("stream", True, True))
        st = kl.state()[RES]
        self.assertEqual((st["allocatable"], st["connected"]), (0, False))
        r = kl.command("allocate %s dev0" % RES)
        self.assertFalse(r["ok"])
        self.assertEqual(r["code"], "EndpointStopped")


    def test_grpc_default_receive_limit(self):
        # 40000 devices with 100-char IDs: about 4.6 MB, over grpc-go's 4 MiB
        # default receive limit, which the kubelet (and the emulator) keep.
        kl = self.kubelet()
        self.plugin("-devices", "", "-count", "40000", "-id-len", "100")
        kl.wait_event("registered", T)
        end = kl.wait_event("stream_end", T)
        self.assertEqual(end["code"], "ResourceExhausted")
        self.assertIn("larger than max", end["error"])
        kl.assert_no_event("devices", within=0.1, since=0)
        # 30000 of them (about 3.4 MB) pass.
        kl2_dir = os.path.join(self.dir, "small")
        os.mkdir(kl2_dir)
        kl2 = self.kubelet(dir=kl2_dir)
        self.plugin("-devices", "", "-count", "30000", "-id-len", "100", dir=kl2_dir)
        ev = kl2.wait_event("devices", T)
        self.assertEqual(ev["n"], 30000)
        self.assertGreater(ev["bytes"], 3 << 20)
        self.assertLess(ev["bytes"], 4 << 20)


class Commands(Base):
    def test_allocate_and_friends(self):
        kl = self.kubelet()
        self.plugin("-prestart", "-preferred", "-devices", "d0,d1,d2")
        kl.wait_event("devices", T)
        r = kl.ok("allocate %s d0,d1;d2" % RES)
        crs = r["response"]["container_responses"]
        self.assertEqual(len(crs), 2)
        self.assertEqual(crs[0]["envs"], {"TESTPLUGIN_DEVICES": "d0,d1"})
        self.assertEqual(crs[1]["envs"], {"TESTPLUGIN_DEVICES": "d2"})
        self.assertEqual(crs[0]["mounts"], [{"container_path": "/dev/testplugin",
                                             "host_path": "/dev/null", "read_only": True}])
        self.assertEqual(crs[0]["devices"], [{"container_path": "/dev/tp0",
                                              "host_path": "/dev/null", "permissions": "rw"}])
        self.assertEqual(crs[0]["annotations"], {"example.com/testplugin": "1"})
        self.assertEqual(crs[0]["cdi_devices"], [{"name": "example.com/dev=d0_d1"}])
        self.assertGreaterEqual(r["elapsed_us"], 0)

        r = kl.command("allocate %s nope" % RES)
        self.assertEqual((r["ok"], r["code"]), (False, "InvalidArgument"))
        self.assertIn("nope", r["message"])
        r = kl.command("allocate example.com/other d0")
        self.assertEqual((r["ok"], r["code"]), (False, "NotRegistered"))
        self.assertIn("example.com/other", r["message"])

        self.assertEqual(kl.ok("prestart %s d0,d1" % RES)["response"], {})
        r = kl.ok("preferred %s available=d0,d1,d2 must=d2 size=2" % RES)
        self.assertEqual(r["response"], {"container_responses": [{"deviceIDs": ["d2", "d0"]}]})
        r = kl.ok("options %s" % RES)
        self.assertEqual(r["response"], {"pre_start_required": True,
                                         "get_preferred_allocation_available": True})
        r = kl.command("bogus")
        self.assertEqual((r["ok"], r["code"]), (False, "Usage"))

    def test_concurrent_commands_echo_ids(self):
        kl = self.kubelet()
        self.plugin("-devices", "d0,d1")
        kl.wait_event("devices", T)
        sent = [kl.command_async("allocate %s d%d" % (RES, i % 2)) for i in range(8)]
        for i, (cid, mark) in enumerate(sent):
            r = kl.wait_reply(cid, mark, T)
            self.assertTrue(r["ok"], r)
            self.assertEqual(r["response"]["container_responses"][0]["envs"],
                             {"TESTPLUGIN_DEVICES": "d%d" % (i % 2)})


class Restart(Base):
    def test_restart(self):
        for name in ("kubelet_internal_checkpoint", "notes.txt"):
            with open(os.path.join(self.dir, name), "w") as f:
                f.write("keep")
        kl = self.kubelet()
        pl = self.plugin()
        kl.wait_event("devices", T)
        mark = kl.mark()
        r = kl.ok("restart")
        self.assertEqual(sorted(r["removed"]), ["kubelet.sock", "tp.sock"])
        evs = [e["event"] for e in kl.events_since(mark)
               if e["event"] in ("restart", "stream_end", "registered")]
        self.assertEqual(evs[:3], ["restart", "stream_end", "restart"])
        end = kl.events_since(mark, "stream_end")[0]
        self.assertEqual((end["reason"], end["current"]), ("restart", True))
        done = kl.wait_event("restart", T, since=mark, phase="done")
        # The plugin notices, serves again and registers again.
        reg = kl.wait_event("registered", T, since=mark)
        self.assertGreater(reg["register_ns"], done["t_ns"])
        ev = kl.wait_event("devices", T, since=mark)
        self.assertEqual(ev["seq"], 1)
        pl.wait_event("socket_gone", T)
        self.assertTrue(os.path.exists(os.path.join(self.dir, "kubelet_internal_checkpoint")))
        self.assertTrue(os.path.exists(os.path.join(self.dir, "notes.txt")))
        self.assertTrue(kl.ok("allocate %s dev0" % RES)["ok"])

    def test_stop_and_start_server(self):
        kl = self.kubelet()
        pl = self.plugin()
        kl.wait_event("devices", T)
        mark = kl.mark()
        kl.ok("stop-server")
        self.assertFalse(os.path.exists(kl.socket))
        self.assertTrue(os.path.exists(pl.socket))
        end = kl.wait_event("stream_end", T, since=mark)
        self.assertEqual(end["reason"], "stop-server")
        self.assertEqual(kl.command("allocate %s dev0" % RES)["code"], "NotRegistered")
        kl.assert_no_event("registered", within=0.5, since=mark)
        self.assertTrue(pl.alive())
        kl.ok("start-server")
        self.assertTrue(stat.S_ISSOCK(os.stat(kl.socket).st_mode))
        kl.wait_event("registered", T, since=mark)
        kl.wait_event("devices", T, since=mark)
        self.assertTrue(kl.ok("allocate %s dev1" % RES)["ok"])


class Watcher(Base):
    def test_accepted_same_socket(self):
        kl = self.wkubelet()
        self.assertEqual(kl.ready["plugins_registry"], kl.registry)
        pl = self.wplugin(kl, "-prestart")
        reg = kl.wait_event("registered", T, via="watcher")
        # empty endpoint: the registration socket serves DevicePlugin too
        self.assertEqual((reg["resource"], reg["endpoint"], reg["socket"]),
                         (RES, pl.socket, pl.socket))
        self.assertEqual(reg["registration_socket"], pl.socket)
        self.assertTrue(reg["options"]["pre_start_required"])
        self.assertEqual(reg["options_source"], "rpc")
        info = pl.wait_event("get_info", T, since=0)
        opts = pl.wait_event("get_options", T, since=0)
        n = pl.wait_event("notify", T, since=0)
        self.assertEqual((n["registered"], n["error"]), (True, ""))
        # GetInfo, then the connect, then NotifyRegistrationStatus(true)
        self.assertLess(info["t_ns"], opts["t_ns"])
        self.assertLess(opts["t_ns"], n["t_ns"])
        kl.wait_event("watcher_notified", T, socket=pl.socket, registered=True)
        kl.wait_event("devices", T, since=0, resource=RES)  # may come before the notify
        self.assertTrue(kl.ok("allocate %s dev0" % RES)["ok"])
        self.assertEqual(kl.ok("prestart %s dev0" % RES)["response"], {})
        self.assertEqual(kl.capacities(RES)[-1][1:], (2, 2))
        self.assertEqual(kl.state()[RES]["endpoint"], pl.socket)

    def test_accepted_separate_endpoint(self):
        kl = self.wkubelet()
        os.mkdir(os.path.join(self.dir, "plugins"))
        dp = os.path.join(self.dir, "plugins", "tp-dp.sock")
        pl = self.wplugin(kl, "-dp-socket", dp, "-devices", "x0,x1,x2")
        self.assertEqual(pl.wait_event("get_info", T, since=0)["endpoint"], dp)
        reg = kl.wait_event("registered", T, via="watcher")
        self.assertEqual((reg["endpoint"], reg["socket"], reg["registration_socket"]),
                         (dp, dp, pl.socket))
        n = pl.wait_event("notify", T, since=0)
        self.assertEqual((n["registered"], n["error"]), (True, ""))
        ev = kl.wait_event("devices", T, resource=RES)
        self.assertEqual(ev["n"], 3)
        r = kl.ok("allocate %s x1" % RES)
        self.assertEqual(r["endpoint"], dp)

    def test_walk_at_start_subdirs_and_ignored(self):
        # sockets already there at start are found by the walk, in
        # subdirectories too; dot-names and non-sockets are ignored.
        reg = os.path.join(self.dir, "plugins_registry")
        os.makedirs(os.path.join(reg, "sub"))
        with open(os.path.join(reg, "notes.sock"), "w") as f:
            f.write("not a socket")
        hidden = os.path.join(reg, ".hidden.sock")
        s = socket.socket(socket.AF_UNIX)
        s.bind(hidden)
        s.close()
        pl = self.start_proc(WPlugin(os.path.join(reg, "sub"), "a.sock", args=()))
        pl.wait_event("serving", T)
        kl = self.wkubelet()
        found = kl.wait_event("watcher_found", T, since=0)
        self.assertEqual((found["socket"], found["source"]), (pl.socket, "walk"))
        kl.wait_event("registered", T, via="watcher", registration_socket=pl.socket)
        pl.wait_event("notify", T, since=0, registered=True)
        kl.assert_no_event("watcher_found", within=0.3, since=0, socket=hidden)
        self.assertEqual(len(kl.events_since(0, "watcher_found")), 1)
        self.assertTrue(os.path.exists(hidden))  # never touched

    def test_refused_with_kubelet_reasons(self):
        kl = self.wkubelet()
        cases = [
            ("name.sock", ["-info-name", "nodomain"], "validate",
             'RegisterPlugin error -- plugin validation failed with err: invalid name of '
             'device plugin socket: the ResourceName "nodomain" is invalid'),
            ("vers.sock", ["-info-versions", "v1alpha1,v1"], "validate",
             "RegisterPlugin error -- plugin validation failed with err: manager version, "
             "v1beta1, is not among plugin supported versions [v1alpha1 v1]"),
            ("type.sock", ["-info-type", "CSIPlugin"], "type",
             "RegisterPlugin error -- no handler registered for plugin type: CSIPlugin at "
             "socket %s" % os.path.join(kl.registry, "type.sock")),
        ]
        plugins = [(self.wplugin(kl, *args, reg=reg), stage, reason)
                   for reg, args, stage, reason in cases]
        for pl, stage, reason in plugins:
            n = pl.wait_event("notify", T, since=0)
            self.assertEqual((n["registered"], n["error"]), (False, reason))
            ev = kl.wait_event("watcher_refused", T, since=0, socket=pl.socket)
            self.assertEqual((ev["stage"], ev["reason"]), (stage, reason))
            self.assertNotIn("notify_error", ev)
        # The kubelet keeps the socket in its desired state and retries
        # with backoff (500 ms first): a second GetInfo, the same answer.
        for pl, _, reason in plugins:
            first = pl.wait_event("get_info", T, since=0)
            again = pl.wait_event("get_info", T)
            self.assertGreaterEqual(again["t_ns"] - first["t_ns"], 400 * 1000 * 1000)
            self.assertEqual(pl.wait_event("notify", T)["error"], reason)
            pl.assert_no_event("get_options", within=0.01, since=0)
        kl.assert_no_event("registered", within=0.2, since=0)
        self.assertEqual(kl.state(), {})

    def test_socket_removed_deregisters(self):
        kl = self.wkubelet()
        pl = self.wplugin(kl)
        kl.wait_event("devices", T, resource=RES)
        mark = kl.mark()
        pl.send("unlink")
        pl.wait_event("unlinked", T, ok=True)
        kl.wait_event("watcher_gone", T, since=mark, socket=pl.socket)
        d = kl.wait_event("deregistered", T, since=mark)
        self.assertEqual((d["socket"], d["resource"], d["disconnected"], d["marked_unhealthy"]),
                         (pl.socket, RES, pl.socket, True))
        end = kl.wait_event("stream_end", T, since=mark)
        self.assertEqual((end["reason"], end["via"]), ("deregistered", "watcher"))
        pl.wait_event("list_and_watch", T, since=0, phase="closed")  # may precede "unlinked"
        st = kl.state()[RES]
        self.assertEqual((st["allocatable"], st["connected"]), (0, False))
        self.assertEqual(kl.capacities(RES, mark)[-1][1:], (2, 0))
        # a fresh socket: a fresh GetInfo, registered again
        mark = kl.mark()
        pmark = pl.mark()
        pl.send("relisten")
        kl.wait_event("registered", T, since=mark, via="watcher")
        pl.wait_event("get_info", T, since=pmark)
        pl.wait_event("notify", T, since=pmark, registered=True)
        kl.wait_event("devices", T, since=mark)
        self.assertEqual(kl.capacities(RES, mark)[-1][1:], (2, 2))

    def test_restart_rewalks_never_deletes(self):
        kl = self.wkubelet()
        pl = self.wplugin(kl)
        kl.wait_event("devices", T, resource=RES)
        ino = os.stat(pl.socket).st_ino
        mark, pmark = kl.mark(), pl.mark()
        r = kl.ok("restart")
        self.assertEqual(r["removed"], ["kubelet.sock"])
        done = kl.wait_event("restart", T, since=mark, phase="done")
        end = kl.events_since(mark, "stream_end")[0]
        self.assertEqual(end["reason"], "restart")
        self.assertEqual(kl.capacities(RES, mark)[0][1:], (0, 0))
        found = kl.wait_event("watcher_found", T, since=mark, socket=pl.socket)
        self.assertEqual(found["source"], "walk")
        reg = kl.wait_event("registered", T, since=mark, via="watcher")
        self.assertGreater(reg["register_ns"], done["t_ns"] - 10**9)
        info = pl.wait_event("get_info", T, since=pmark)
        self.assertGreater(info["t_ns"], done["t_ns"] - 10**9)
        pl.wait_event("notify", T, since=pmark, registered=True)
        kl.wait_event("devices", T, since=mark)
        self.assertEqual(os.stat(pl.socket).st_ino, ino)  # the plugin's socket untouched
        self.assertTrue(kl.ok("allocate %s dev1" % RES)["ok"])

    def test_kubelet_sock_and_watcher_at_once(self):
        kl = self.wkubelet()
        a = self.start_proc(Plugin(kl.dir, "a.sock", "example.com/a", ("-devices", "a0")))
        a.wait_event("serving", T)
        self.wplugin(kl, "-devices", "b0,b1", resource="example.com/b")
        ra = kl.wait_event("registered", T, since=0, resource="example.com/a")
        rb = kl.wait_event("registered", T, since=0, resource="example.com/b")
        self.assertEqual((ra["via"], rb["via"]), ("kubelet.sock", "watcher"))
        kl.wait_event("devices", T, since=0, resource="example.com/a")
        kl.wait_event("devices", T, since=0, resource="example.com/b")
        st = kl.state()
        self.assertEqual(st["example.com/a"]["allocatable"], 1)
        self.assertEqual(st["example.com/b"]["allocatable"], 2)
        self.assertTrue(kl.ok("allocate example.com/a a0")["ok"])
        self.assertTrue(kl.ok("allocate example.com/b b1")["ok"])


class Handover(Base):
    """Instance A registered, instance B (another socket) registers the same
    resource, A goes away: under -endpoint-tracking resource the node reports
    allocatable 0 (B is torn down too); under socket it never does."""

    def _handover(self, tracking, watcher):
        if watcher:
            kl = self.wkubelet(tracking=tracking)
            a = self.wplugin(kl, "-devices", "a0,a1", reg="a.sock")
        else:
            kl = self.kubelet(tracking=tracking)
            a = self.plugin("-devices", "a0,a1", socket="a.sock")
        self.assertEqual(kl.ready["endpoint_tracking"], tracking)
        ra = kl.wait_event("registered", T, since=0)
        kl.wait_event("devices", T, since=0, endpoint=ra["endpoint"])
        start = kl.mark()
        if watcher:
            b = self.wplugin(kl, "-devices", "b0,b1,b2", reg="b.sock")
        else:
            b = self.plugin("-devices", "b0,b1,b2", socket="b.sock")
        rb = kl.wait_event("registered", T, since=start)
        kl.wait_event("devices", T, since=start, endpoint=rb["endpoint"])
        self.assertEqual(kl.capacities(RES)[-1][1:], (3, 3))
        a.stop()
        end = kl.wait_event("stream_end", T, since=start, endpoint=ra["endpoint"])
        self.assertFalse(end["current"])
        if watcher:
            kl.wait_event("deregistered", T, since=start, socket=a.socket)
        caps = kl.capacities(RES, start)
        if tracking == "resource":
            bend = kl.wait_event("stream_end", T, since=start, endpoint=rb["endpoint"])
            # B is torn down by A's stream end (runClient: the client looked
            # up by name is B) or, in watcher mode, maybe first by the removal
            # of A's socket (DeRegisterPlugin by name: B again).
            if bend["reason"] == "disconnected":
                self.assertEqual(bend["cause_endpoint"], ra["endpoint"])
            else:
                self.assertTrue(watcher, bend)
                self.assertEqual(bend["reason"], "deregistered")
                d = kl.wait_event("deregistered", T, since=start, socket=a.socket)
                self.assertEqual(d["disconnected"], rb["socket"])
            b.wait_event("list_and_watch", T, phase="closed")
            caps = kl.capacities(RES, start)
            self.assertIn(0, [c[2] for c in caps], caps)
            self.assertEqual(caps[-1][1:], (3, 0))
            st = kl.state()[RES]
            self.assertEqual((st["allocatable"], st["connected"]), (0, False))
            self.assertEqual(kl.command("allocate %s b0" % RES)["code"], "EndpointStopped")
        else:
            kl.assert_no_event("stream_end", within=0.5, since=start, endpoint=rb["endpoint"])
            caps = kl.capacities(RES)  # the whole run: A, then B, then A gone
            self.assertEqual([c[1:] for c in caps], [(2, 2), (3, 3)])
            st = kl.state()[RES]
            self.assertEqual((st["allocatable"], st["connected"]), (3, True))
            self.assertTrue(kl.ok("allocate %s b0" % RES)["ok"])
            b.send("set b3 Healthy")
            kl.wait_event("devices", T, since=start, endpoint=rb["endpoint"], n=4)
            self.assertEqual(kl.capacities(RES)[-1][1:], (4, 4))

    def test_resource_kubelet_sock(self):
        self._handover("resource", watcher=False)

    def test_socket_kubelet_sock(self):
        self._handover("socket", watcher=False)

    def test_resource_watcher(self):
        self._handover("resource", watcher=True)

    def test_socket_watcher(self):
        self._handover("socket", watcher=True)


if __name__ == "__main__":
    unittest.main(verbosity=2)
