#!/usr/bin/python3
"""The kubelet emulator's DRA side (kdp-test-kubelet, tests/kubelet/dra.go)
against a grpc-go DRA driver (kdp-go-testdra): proves the emulator before
kdp's DRA driver is tested with it.

usage: KDP_BIN_DIR=<build>/bin /usr/bin/python3 test_dra_emulator.py [-v] [Test.name ...]
"""

import os
import sys
import time
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from kdptest import T, Proc, ProcTest, binary  # noqa: E402
from kdptest.kubelet import Kubelet  # noqa: E402

DRV = "gpu.example.com"
V1 = "v1.DRAPlugin"
V1BETA1 = "v1beta1.DRAPlugin"


class Driver(Proc):
    """kdp-go-testdra: registration socket REGISTRY/<reg>, service socket
    <socket> (default ROOT/plugins/DRV/dra.sock)."""

    def __init__(self, registry, args=(), reg=None, socket=None, driver=DRV):
        argv = [binary("kdp-go-testdra"), "-registry", registry, "-driver", driver]
        if reg:
            argv += ["-reg-socket", reg]
        if socket:
            argv += ["-socket", socket]
        argv += list(args)
        super().__init__(argv, name="testdra:" + (reg or driver))
        self.reg_socket = os.path.join(registry, reg or driver + "-reg.sock")
        self.socket = socket or os.path.join(os.path.dirname(registry), "plugins", driver, "dra.sock")


class Base(ProcTest):
    TEST_BOUND = 60.0

    def kubelet(self, **kw):
        dp = self.path("device-plugins")
        os.makedirs(dp, exist_ok=True)
        return self.start_proc(Kubelet(dp, registry=self.path("plugins_registry"), **kw))

    def driver(self, *args, reg=None, socket=None, driver=DRV):
        d = self.start_proc(Driver(self.path("plugins_registry"), args, reg, socket, driver))
        d.wait_event("serving", T, socket=d.reg_socket)
        return d

    def registered(self, kl, d, **fields):
        """Waits until kl registered d and d heard of it; returns the event."""
        ev = kl.wait_dra_registered(DRV, T, registration_socket=d.reg_socket, **fields)
        d.wait_event("notify", T, registered=True)
        return ev

    def assertClean(self, proc):
        rc = proc.stop()
        self.assertEqual(rc, 0, "%s exited %s%s" % (proc.name, rc, proc.diagnostics()))


class Registration(Base):
    def test_v1_first(self):
        kl = self.kubelet()
        d = self.driver()
        ev = self.registered(kl, d)
        self.assertEqual(ev["service"], V1)
        self.assertEqual(ev["endpoint"], d.socket)
        self.assertEqual(ev["supported_versions"], [V1, V1BETA1])
        self.assertTrue(ev["name_valid"], ev)
        self.assertTrue(ev["endpoint_absolute"], ev)
        kl.wait_event("dra_connection", T, driver=DRV, connected=True)
        r = kl.dra_prepare(DRV, ["ns/c1/u1"])
        self.assertTrue(r["ok"], r)
        self.assertEqual(r["method"], "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources")
        d.wait_event("prepare", T, service="v1")
        st = kl.dra_state()[DRV]
        self.assertEqual((st["service"], st["chosen"], st["usable"]), (V1, d.socket, True))
        self.assertClean(kl)

    def test_empty_endpoint_is_registration_socket(self):
        kl = self.kubelet()
        d = self.driver("-info-endpoint", "-")
        ev = self.registered(kl, d)
        self.assertEqual((ev["endpoint"], ev["endpoint_absolute"]), (d.reg_socket, True))
        # kdp-go-testdra serves only Registration there.
        r = kl.dra_prepare(DRV, ["ns/c1/u1"])
        self.assertEqual((r["ok"], r["code"]), (False, "Unimplemented"), r)

    def test_plugin_order_decides(self):
        kl = self.kubelet()
        d = self.driver("-versions", V1BETA1 + "," + V1)
        self.assertEqual(self.registered(kl, d)["service"], V1BETA1)
        r = kl.dra_prepare(DRV, ["ns/c1/u1"])
        self.assertEqual(r["method"], "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodePrepareResources")
        d.wait_event("prepare", T, service="v1beta1")

    def test_health_string_skipped(self):
        # "v1alpha1.DRAResourceHealth" names an optional service, not a
        # DRAPlugin version: the walk passes over it.
        kl = self.kubelet()
        d = self.driver("-versions", "v1alpha1.DRAResourceHealth," + V1 + "," + V1BETA1)
        self.assertEqual(self.registered(kl, d)["service"], V1)

    def test_older_kubelet_picks_v1beta1(self):
        kl = self.kubelet(dra_versions=[V1BETA1])
        d = self.driver()
        self.assertEqual(self.registered(kl, d)["service"], V1BETA1)
        for verb in (kl.dra_prepare, kl.dra_unprepare):
            r = verb(DRV, ["ns/c1/u1", "ns/c2/u2"])
            self.assertTrue(r["ok"], r)
            self.assertEqual(r["service"], V1BETA1)
        d.wait_event("prepare", T, service="v1beta1")
        d.wait_event("unprepare", T, service="v1beta1")
        self.assertEqual(d.events_since(0, "prepare", service="v1"), [])

    def test_no_common_version_refused(self):
        kl = self.kubelet()
        d = self.driver("-versions", "v2.DRAPlugin,v1alpha4.Node")
        n = d.wait_event("notify", T, registered=False)
        want = ('RegisterPlugin error -- plugin validation failed with err: invalid supported gRPC '
                'versions of DRA driver plugin %s at endpoint %s: none of services supported by the '
                'plugin (["v2.DRAPlugin" "v1alpha4.Node"]) are supported by the kubelet '
                '(["v1.DRAPlugin" "v1beta1.DRAPlugin"])' % (DRV, d.socket))
        self.assertEqual(n["error"], want)
        kl.wait_event("watcher_refused", T, stage="validate", type="DRAPlugin")
        # Refused at validation: retried with backoff (500 ms first).
        d.wait_event("notify", 5, registered=False)
        self.assertEqual(kl.dra_state(), {})
        r = kl.dra_prepare(DRV, ["ns/c/u"])
        self.assertEqual((r["ok"], r["code"], r["message"]),
                         (False, "NotRegistered", "DRA driver %s is not registered" % DRV))

    def test_empty_versions_refused(self):
        kl = self.kubelet()
        d = self.driver("-versions", "")
        n = d.wait_event("notify", T, registered=False)
        self.assertTrue(n["error"].endswith(
            "empty list of supported gRPC services (aka supported versions)"), n)
        kl.wait_event("watcher_refused", T, stage="validate")

    def test_no_dra_handler(self):
        self.kubelet(dra=False)
        d = self.driver()
        n = d.wait_event("notify", T, registered=False)
        self.assertEqual(n["error"], "RegisterPlugin error -- no handler registered for plugin type: "
                         "DRAPlugin at socket %s" % d.reg_socket)


class Instances(Base):
    def instance(self, uid, *args, endpoint=None):
        sock = self.path("plugins", DRV, "dra-%s.sock" % uid)
        extra = ["-info-endpoint", endpoint] if endpoint else []
        return self.driver(*(list(args) + extra), reg="%s-%s-reg.sock" % (DRV, uid), socket=sock)

    def test_newest_instance_called(self):
        kl = self.kubelet()
        a = self.instance("pod-a")
        self.registered(kl, a)
        kl.wait_event("dra_connection", T, endpoint=a.socket, connected=True)
        b = self.instance("pod-b")
        ev = self.registered(kl, b)
        self.assertEqual(ev["instances"], 2)
        kl.wait_event("dra_connection", T, endpoint=b.socket, connected=True)
        st = kl.dra_state()[DRV]
        self.assertEqual([i["endpoint"] for i in st["instances"]], [a.socket, b.socket])
        self.assertEqual(st["chosen"], b.socket)
        r = kl.dra_prepare(DRV, ["ns/c1/u1"])
        self.assertEqual(r["endpoint"], b.socket)
        b.wait_event("prepare", T)
        self.assertEqual(a.events_since(0, "prepare"), [])
        # The new pod's instance goes away: the old one takes the calls.
        self.assertClean(b)
        dereg = kl.wait_event("dra_deregistered", T, endpoint=b.socket)
        self.assertEqual((dereg["found"], dereg["instances"]), (True, 1))
        self.assertEqual(kl.dra_state()[DRV]["chosen"], a.socket)
        r = kl.dra_unprepare(DRV, ["ns/c1/u1"])
        self.assertEqual(r["endpoint"], a.socket)
        a.wait_event("unprepare", T)
        # One instance was connected throughout: no wipe was ever due.
        self.assertEqual(kl.events_since(0, "dra_wipe", driver=DRV), [])

    def test_hijack_refused(self):
        kl = self.kubelet()
        a = self.instance("pod-a")
        self.registered(kl, a)
        b = self.instance("pod-b", endpoint=a.socket)
        n = b.wait_event("notify", T, registered=False)
        self.assertEqual(n["error"], "RegisterPlugin error -- plugin registration failed with err: "
                         "endpoint %s already registered for DRA driver plugin %s" % (a.socket, DRV))
        kl.wait_event("watcher_refused", T, stage="register", socket=b.reg_socket)
        # Not retried (the socket is in the actual state already).
        b.assert_no_event("get_info", within=1.2)
        st = kl.dra_state()[DRV]
        self.assertEqual([i["registration_socket"] for i in st["instances"]], [a.reg_socket])
        # The kubelet deregisters by (driver, endpoint): the refused
        # instance's socket going away takes the instance it tried to hijack.
        b.send("unlink")
        ev = kl.wait_event("dra_deregistered", T, socket=b.reg_socket)
        self.assertEqual((ev["endpoint"], ev["found"], ev["instances"]), (a.socket, True, 0))
        st = kl.dra_state()[DRV]  # listed while its wipe is pending
        self.assertEqual((st["instances"], st["wipe_pending"]), ([], True))

    def test_connected_instance_preferred(self):
        kl = self.kubelet()
        a = self.instance("pod-a")
        self.registered(kl, a)
        kl.wait_event("dra_connection", T, endpoint=a.socket, connected=True)
        # The newer instance names an endpoint nobody serves: never connected.
        gone = self.path("plugins", DRV, "nobody.sock")
        b = self.instance("pod-b", endpoint=gone)
        self.registered(kl, b)
        st = kl.dra_state()[DRV]
        self.assertEqual([i["connected"] for i in st["instances"]], [True, False])
        self.assertEqual(st["chosen"], a.socket)
        self.assertEqual(kl.dra_prepare(DRV, ["ns/c1/u1"])["endpoint"], a.socket)
        # The connected one leaves: the newest is used, connected or not.
        self.assertClean(a)
        kl.wait_event("dra_deregistered", T, endpoint=a.socket)
        r = kl.dra_prepare(DRV, ["ns/c1/u1"])
        self.assertEqual((r["ok"], r["endpoint"], r["code"]), (False, gone, "Unavailable"), r)


class Calls(Base):
    def test_several_claims_one_call(self):
        kl = self.kubelet()
        d = self.driver("-devices", "dev0,dev1")
        self.registered(kl, d)
        claims = [("ns1", "c1", "u1"), ("ns1", "c2", "u2"), ("ns2", "c3", "u3")]
        r = kl.dra_prepare(DRV, claims)
        self.assertTrue(r["ok"], r)
        ev = d.wait_event("prepare", T)
        self.assertEqual(ev["claims"], ["u1", "u2", "u3"])
        self.assertEqual(len(d.events_since(0, "prepare")), 1)
        self.assertEqual([c["uid"] for c in r["claims"]], ["u1", "u2", "u3"])
        self.assertEqual((r["missing"], r["failed"], r["unexpected"]), ([], [], []))
        c3 = r["by_uid"]["u3"]
        self.assertEqual((c3["namespace"], c3["name"], c3["result"], c3["error"]),
                         ("ns2", "c3", "prepared", ""))
        self.assertEqual(c3["devices"], [{"request_names": ["req-0"], "pool": "node1", "device": "dev0",
                                          "cdi_device_ids": [DRV + "/dev=dev0"], "share_id": ""}])
        self.assertEqual(r["by_uid"]["u2"]["devices"][0]["device"], "dev1")
        r = kl.dra_unprepare(DRV, claims)
        self.assertTrue(r["ok"], r)
        self.assertEqual([c["result"] for c in r["claims"]], ["unprepared"] * 3)
        self.assertEqual(d.wait_event("unprepare", T)["claims"], ["u1", "u2", "u3"])

    def test_missing_and_failed_claims(self):
        kl = self.kubelet()
        d = self.driver("-omit-claim", "u2", "-fail-claim", "u3")
        self.registered(kl, d)
        for verb, good in ((kl.dra_prepare, "prepared"), (kl.dra_unprepare, "unprepared")):
            r = verb(DRV, ["ns/a/u1", "ns/b/u2", "ns/c/u3"])
            self.assertTrue(r["ok"], r)
            self.assertEqual([c["result"] for c in r["claims"]], [good, "missing", "error"])
            self.assertEqual((r["missing"], r["failed"]), (["u2"], ["u3"]))
            self.assertEqual(r["by_uid"]["u3"]["error"], "claim u3: injected failure (-fail-claim)")

    def test_call_timeout(self):
        kl = self.kubelet(dra_call_timeout=0.5)
        d = self.driver("-prepare-delay", "3s")
        self.registered(kl, d)
        t0 = time.monotonic()
        r = kl.dra_prepare(DRV, ["ns/a/u1"])
        self.assertLess(time.monotonic() - t0, 2.5)
        self.assertEqual((r["ok"], r["code"]), (False, "DeadlineExceeded"), r)

    def test_bad_commands(self):
        kl = self.kubelet()
        for line in ("dra-prepare", "dra-prepare %s" % DRV, "dra-prepare %s ns/name" % DRV,
                     "dra-unprepare %s ns//uid" % DRV, "dra-health"):
            r = kl.command(line)
            self.assertEqual((r["ok"], r["code"]), (False, "Usage"), (line, r))


class Health(Base):
    def test_health_streamed(self):
        kl = self.kubelet()
        d = self.driver("-devices", "dev0,dev1")
        self.registered(kl, d)
        ev = kl.wait_event("dra_health", T, driver=DRV)
        self.assertEqual([(x["pool"], x["device"], x["health"]) for x in ev["devices"]],
                         [("node1", "dev0", "Healthy"), ("node1", "dev1", "Healthy")])
        mark = kl.mark()
        d.send("health dev1 Unhealthy ECC errors over limit")
        ev = kl.wait_event("dra_health", T, since=mark, driver=DRV)
        self.assertEqual(ev["devices"][1]["health"], "Unhealthy")
        self.assertEqual(ev["devices"][1]["message"], "ECC errors over limit")
        self.assertEqual(ev["devices"][1]["health_check_timeout_seconds"], 30)
        h = kl.dra_health(DRV)
        self.assertTrue(h["received"])
        self.assertEqual([x["health"] for x in h["devices"]], ["Healthy", "Unhealthy"])
        self.assertEqual(h["endpoint"], d.socket)

    def test_unimplemented_reported_once(self):
        kl = self.kubelet(dra_health_retry=0.2)
        d = self.driver("-health=false")
        self.registered(kl, d)
        ev = kl.wait_event("dra_health_stream", T, driver=DRV)
        self.assertEqual((ev["phase"], ev["code"]), ("unimplemented", "Unimplemented"), ev)
        time.sleep(1.5)  # several retries
        self.assertEqual(len(kl.events_since(0, "dra_health_stream")), 1)
        self.assertFalse(kl.dra_health(DRV)["received"])
        self.assertTrue(kl.dra_prepare(DRV, ["ns/a/u1"])["ok"])

    def test_health_off(self):
        kl = self.kubelet(dra_health=False)
        d = self.driver()
        self.registered(kl, d)
        self.assertTrue(kl.dra_prepare(DRV, ["ns/a/u1"])["ok"])
        d.assert_no_event("health_open", within=0.5, since=0)


class Lifecycle(Base):
    def test_socket_removed_deregistered(self):
        kl = self.kubelet(dra_wipe_delay=0.5)
        d = self.driver()
        self.registered(kl, d)
        kl.wait_event("dra_connection", T, connected=True)
        mark = kl.mark()
        d.send("unlink")
        ev = kl.wait_event("dra_deregistered", T, driver=DRV)
        self.assertEqual((ev["found"], ev["instances"], ev["socket"]), (True, 0, d.reg_socket))
        kl.wait_event("dra_wipe_scheduled", T, driver=DRV)
        kl.wait_event("dra_wipe", T, driver=DRV, reason="unusable")
        self.assertEqual(kl.dra_state(), {})
        r = kl.dra_prepare(DRV, ["ns/a/u1"])
        self.assertEqual(r["code"], "NotRegistered")
        # Back: registered again, wipe no longer due.
        d.send("relisten")
        self.registered(kl, d)
        kl.wait_event("dra_connection", T, since=mark, connected=True)
        self.assertTrue(kl.dra_prepare(DRV, ["ns/a/u1"])["ok"])

    def test_driver_gone_wipe_canceled_by_return(self):
        kl = self.kubelet(dra_wipe_delay=30)
        d = self.driver()
        self.registered(kl, d)
        kl.wait_event("dra_connection", T, connected=True)
        mark = kl.mark()
        self.assertClean(d)
        kl.wait_event("dra_deregistered", T, since=mark, driver=DRV)
        kl.wait_event("dra_wipe_scheduled", T, since=mark, driver=DRV)
        self.assertTrue(kl.dra_state()[DRV]["wipe_pending"])
        d2 = self.driver()
        self.registered(kl, d2)
        kl.wait_event("dra_wipe_canceled", T, driver=DRV)
        self.assertFalse(kl.dra_state()[DRV]["wipe_pending"])

    def test_restart_walks_again(self):
        kl = self.kubelet()
        d = self.driver()
        first = self.registered(kl, d)
        mark, dmark = kl.mark(), d.mark()
        kl.ok("restart")
        kl.wait_event("dra_dropped", T, since=mark, driver=DRV, reason="restart")
        kl.wait_event("dra_wipe", T, since=mark, driver="", reason="startup")
        again = kl.wait_event("dra_registered", T, since=mark, driver=DRV)
        self.assertGreater(again["seq"], first["seq"])
        self.assertEqual(again["instances"], 1)
        d.wait_event("get_info", T, since=dmark)
        d.wait_event("notify", T, since=dmark, registered=True)
        self.assertTrue(os.path.exists(d.reg_socket))
        self.assertTrue(kl.dra_prepare(DRV, ["ns/a/u1"])["ok"])

    def test_found_at_start(self):
        d = self.driver()
        kl = self.kubelet()
        self.registered(kl, d)
        kl.wait_event("watcher_found", T, since=0, socket=d.reg_socket, source="walk")
        self.assertTrue(kl.dra_prepare(DRV, ["ns/a/u1"])["ok"])


if __name__ == "__main__":
    unittest.main()
