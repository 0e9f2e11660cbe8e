#!/usr/bin/python3
"""kdp's DRA driver (src/dra) end to end: kdp-example-gopher-dra (the gopher
example's DRA mode) between the kubelet emulator's DRA side
(kdp-test-kubelet) and the API-server emulator (kdp-test-apiserver).

usage: KDP_BIN_DIR=<build>/bin /usr/bin/python3 test_dra.py [-v] [Test.name ...]
"""

import base64
import calendar
import glob
import json
import os
import re
import shutil
import ssl
import sys
import time
import unittest
import urllib.request

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from kdptest import T, Proc, ProcTest, binary, peak_kib  # noqa: E402
from kdptest.apiserver import ApiServer  # noqa: E402
from kdptest.kubelet import Kubelet  # noqa: E402
from kdptest.metrics import get, parse, value  # noqa: E402
from kdptest.proc import wait_for  # noqa: E402

DRV = "gopher.example.com"
NODE = "node-a"
V1 = "v1.DRAPlugin"
V1BETA1 = "v1beta1.DRAPlugin"
HEALTH = "v1alpha1.DRAResourceHealth"
HEALTH_V1 = "v1.DRAResourceHealth"
SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Driver(Proc):
    """kdp-example-gopher-dra with its gophers in DIR/gophers."""

    def __init__(self, test, args=(), env=None):
        argv = [binary("kdp-example-gopher-dra"), "--devices-dir", test.path("gophers"),
                "--kubelet-root", test.path("root"), "--dra", DRV, "--node", NODE,
                "--cdi-dir", test.path("cdi")] + list(args)
        full_env = {k: v for k, v in os.environ.items()
                    if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "NODE_NAME", "POD_UID")}
        full_env.update(env or {})
        super().__init__(argv, name="gopher-dra", env=full_env)


class Base(ProcTest):
    TEST_BOUND = 90.0

    def setUp(self):
        super().setUp()
        for d in ("root/device-plugins", "root/plugins_registry", "gophers", "cdi"):
            os.makedirs(self.path(d), exist_ok=True)
        for i in range(2):
            self.gopher("gopher-%d" % i)

    def gopher(self, name, content=""):
        with open(self.path("gophers", name), "w") as f:
            f.write(content)

    def api(self, **kw):
        return self.start_proc(ApiServer(self.path("api"), nodes=[NODE], **kw))

    def kubelet(self, **kw):
        return self.start_proc(Kubelet(self.path("root", "device-plugins"),
                                       registry=self.path("root", "plugins_registry"), **kw))

    def driver(self, api, args=(), env=None):
        return self.start_proc(Driver(self, ["--kubeconfig", api.kubeconfig_token] + list(args),
                                      env))

    def wait_slices(self, api, n_devices, timeout=T):
        deadline = time.time() + timeout
        while True:
            devs = [d for s in api.slices() if s["spec"]["driver"] == DRV
                    for d in s["spec"].get("devices") or []]
            if len(devs) == n_devices:
                return devs
            if time.time() > deadline:
                raise AssertionError("slices hold %d devices, not %d: %s"
                                     % (len(devs), n_devices, api.slices()))
            time.sleep(0.05)

    def up(self, **kl_kw):
        """API server, kubelet and driver; the driver registered and its
        two gophers published."""
        api = self.api()
        kl = self.kubelet(**kl_kw)
        drv = self.driver(api)
        ev = kl.wait_dra_registered(DRV, T)
        self.wait_slices(api, 2)
        return api, kl, drv, ev

    def checkpoint(self, state=None):
        """The records kept: {"claims": {UID: record}}, from the files of
        <state dir>/claims (each {"version": 3, "checksum", "claim"})."""
        claims = {}
        state = state or self.path("root", "plugins", DRV)
        for p in glob.glob(os.path.join(state, "claims", "*.json")):
            with open(p) as f:
                doc = json.load(f)
            self.assertEqual(doc["version"], 3)
            claims[doc["claim"]["uid"]] = doc["claim"]
        return {"claims": claims}

    def cdi_files(self):
        return sorted(os.path.basename(p) for p in glob.glob(self.path("cdi", "*.json")))


class Registration(Base):
    def test_v1_chosen_and_the_versions(self):
        api, kl, drv, ev = self.up()
        self.assertEqual(ev["service"], V1)
        self.assertEqual(ev["supported_versions"], [V1, V1BETA1, HEALTH_V1, HEALTH])
        self.assertEqual(ev["endpoint"], self.path("root", "plugins", DRV, "dra.sock"))
        self.assertTrue(ev["endpoint_absolute"])
        self.assertEqual(ev["registration_socket"],
                         self.path("root", "plugins_registry", DRV + "-reg.sock"))
        # DRA only: no device-plugin socket
        self.assertEqual(os.listdir(self.path("root", "device-plugins")), ["kubelet.sock"])
        drv.wait_log("registered with the kubelet", T)

    def test_v1beta1_kubelet(self):
        api, kl, drv, ev = self.up(dra_versions=[V1BETA1])
        self.assertEqual(ev["service"], V1BETA1)
        uid = api.create_claim("default", "c1", DRV, NODE, "gpu", ["gopher-0"])
        r = kl.dra_prepare(DRV, ["default/c1/" + uid])
        self.assertTrue(r["ok"], r)
        self.assertIn(".v1beta1.", r["method"])
        c = r["by_uid"][uid]
        self.assertEqual(c["result"], "prepared", c)
        self.assertEqual(c["devices"][0]["share_id"], "")

    def test_health_versions(self):
        """The health stream is served as v1 and v1alpha1: a 1.37 kubelet
        takes v1 (its preference), one with v1alpha1 only takes that, a
        1.34-1.36 kubelet (no negotiation) v1alpha1; served as v1 only, a
        kubelet with v1alpha1 only opens no stream."""
        api = self.api()
        cases = ((["v1", "v1alpha1"], [], "v1"), (["v1alpha1"], [], "v1alpha1"),
                 (None, [], "v1alpha1"), (["v1alpha1"], ["--no-health-v1alpha1"], None),
                 (["v1"], ["--no-health-v1alpha1"], "v1"))
        for kubelet_versions, args, want in cases:
            with self.subTest(kubelet=kubelet_versions, driver=args):
                kl = self.kubelet(dra_health_versions=kubelet_versions)
                drv = self.start_proc(TestDriver(self, api, args))
                kl.wait_dra_registered(DRV, T)
                if want:
                    e = kl.wait_event("dra_health", T, since=0, driver=DRV)
                    self.assertEqual(e["version"], want)
                    self.assertEqual(e["n"], 4)
                else:
                    e = kl.wait_event("dra_health_stream", T, since=0, driver=DRV)
                    self.assertEqual(e["phase"], "none", e)
                self.assertEqual(drv.stop(), 0)
                kl.stop()

    def test_kubelet_restart_registers_again(self):
        api, kl, drv, ev = self.up()
        mark = kl.mark()
        kl.ok("restart")
        kl.wait_event("dra_registered", T, since=mark, driver=DRV)

    def test_refused_then_asked_again(self):
        api = self.api()
        kl = self.kubelet(dra_versions=["v2.DRAPlugin"])
        drv = self.driver(api)
        drv.wait_log("the kubelet refused the registration: .*none of services supported", T)
        drv.wait_log("re-creating the registration socket after the kubelet's refusal", T)
        st = kl.dra_state()
        self.assertFalse(st.get(DRV, {}).get("usable", False), st)

    def test_instance_sockets(self):
        api = self.api()
        kl = self.kubelet()
        drv = self.driver(api, env={"POD_UID": "1234-abcd"})
        ev = kl.wait_dra_registered(DRV, T)
        self.assertEqual(ev["registration_socket"],
                         self.path("root", "plugins_registry", DRV + "-1234-abcd-reg.sock"))
        self.assertEqual(ev["endpoint"], self.path("root", "plugins", DRV, "dra-1234-abcd.sock"))
        # another instance's sockets are left alone at start and stop
        other = self.path("root", "plugins_registry", DRV + "-other-reg.sock")
        open(other, "w").close()
        self.assertEqual(drv.stop(), 0)
        self.assertTrue(os.path.exists(other))

    def test_second_process_refused_not_stealing(self):
        """Two processes with no instance name: the second does not take
        the first's sockets over."""
        api, kl, drv, ev = self.up()
        ino = os.stat(ev["endpoint"]).st_ino, os.stat(ev["registration_socket"]).st_ino
        other = self.driver(api)
        other.wait_log("another process serves", T)
        self.assertEqual((os.stat(ev["endpoint"]).st_ino,
                          os.stat(ev["registration_socket"]).st_ino), ino)
        uid = api.create_claim("default", "c1", DRV, NODE, "gpu", ["gopher-0"])
        r = kl.dra_prepare(DRV, ["default/c1/" + uid])
        self.assertEqual(r["by_uid"][uid]["result"], "prepared", r)
        drv.wait_log("prepared claim default/c1", T)  # the first one serves

    def test_sockets_removed_at_stop(self):
        api, kl, drv, ev = self.up()
        self.assertEqual(drv.stop(), 0)
        self.assertFalse(os.path.exists(ev["registration_socket"]))
        self.assertFalse(os.path.exists(ev["endpoint"]))


class Slices(Base):
    def test_published_and_republished(self):
        api = self.api()
        t0 = time.time()
        drv = self.driver(api)
        devs = self.wait_slices(api, 2)
        print("start to slices published: %.0f ms" % ((time.time() - t0) * 1000))
        by_name = {d["name"]: d for d in devs}
        self.assertEqual(sorted(by_name), ["gopher-0", "gopher-1"])
        g1 = by_name["gopher-1"]
        self.assertEqual(g1["attributes"]["model"], {"string": "gopher"})
        self.assertEqual(g1["attributes"]["index"], {"int": 1})
        self.assertEqual(g1["capacity"]["memory"], {"value": "1Gi"})
        s = api.slices()[0]
        self.assertEqual(s["spec"]["nodeName"], NODE)
        self.assertEqual(s["spec"]["pool"]["name"], NODE)
        drv.wait_log("slices published", T)
        self.gopher("gopher-7")
        devs = self.wait_slices(api, 3)
        self.assertIn("gopher-7", [d["name"] for d in devs])
        os.unlink(self.path("gophers", "gopher-0"))
        devs = self.wait_slices(api, 2)
        self.assertNotIn("gopher-0", [d["name"] for d in devs])


    def slice_names(self, api):
        return sorted(s["metadata"]["name"] for s in api.slices() if s["spec"]["driver"] == DRV)

    def wait_new_slice(self, api, old, timeout):
        """The pool published again in a slice not among old: its name."""
        deadline = time.time() + timeout
        while True:
            slices = [s for s in api.slices() if s["spec"]["driver"] == DRV]
            names = [s["metadata"]["name"] for s in slices]
            if (len(slices) == 1 and names[0] not in old
                    and len(slices[0]["spec"].get("devices") or []) == 2):
                return names[0]
            if time.time() > deadline:
                raise AssertionError("the pool was not published again in %.0f s: slices %s "
                                     "(deleted: %s)" % (timeout, names, sorted(old)))
            time.sleep(0.02)

    def test_no_deletion_lost(self):
        """A slice deleted right after kdp re-created it (before and after
        kdp heard back about the create), then again with a kubelet restart:
        re-created every time, long before the periodic list (10 minutes)."""
        rounds = int(os.environ.get("KDP_DRA_LOST_DELETION_ROUNDS", "50"))
        api, kl, drv, ev = self.up()
        gone = set(self.slice_names(api))
        for i in range(rounds):
            # someone deletes the slice; the one kdp makes instead is
            # deleted again at once (before its create is answered, or
            # a few ms after)
            delay = "0s" if i % 2 == 0 else "%dms" % (1 + i % 7)
            api.ok("delete-after-create 1 " + delay)
            mark = api.mark()
            for name in self.slice_names(api):
                api.ok("delete " + name)
            api.wait_event("deleted_after_create", T, since=mark)
            gone |= set(e["name"] for e in api.events_since(mark, "deleted_after_create"))
            name = self.wait_new_slice(api, gone, 5.0)
            gone.add(name)
            # a kubelet restart wipes the node's slices as kdp registers again
            kl.ok("restart")
            api.ok("delete-after-create 1 0s")
            mark = api.mark()
            api.ok("delete " + name)
            api.wait_event("deleted_after_create", T, since=mark)
            gone |= set(e["name"] for e in api.events_since(mark, "deleted_after_create"))
            gone.add(self.wait_new_slice(api, gone, 5.0))
        self.assertEqual(drv.count_log("cannot publish"), 0, drv.log_text())


class Prepare(Base):
    def test_several_claims_in_one_call(self):
        api, kl, drv, ev = self.up()
        u1 = api.create_claim("default", "c1", DRV, NODE, "gpu", ["gopher-0"],
                              config={"mode": "fast"})
        u2 = api.create_claim("default", "c2", DRV, NODE, "gpu", ["gopher-1"])
        r = kl.dra_prepare(DRV, ["default/c1/" + u1, "default/c2/" + u2])
        self.assertTrue(r["ok"], r)
        for uid, dev in ((u1, "gopher-0"), (u2, "gopher-1")):
            c = r["by_uid"][uid]
            self.assertEqual(c["result"], "prepared", c)
            d = c["devices"][0]
            self.assertEqual((d["pool"], d["device"], d["request_names"]), (NODE, dev, ["gpu"]))
            self.assertEqual(d["cdi_device_ids"], ["k8s.%s/claim=%s-%s" % (DRV, uid, dev)])
        self.assertEqual(self.cdi_files(), sorted("k8s.%s-claim_%s.json" % (DRV, u)
                                                  for u in (u1, u2)))
        with open(self.path("cdi", "k8s.%s-claim_%s.json" % (DRV, u1))) as f:
            spec = json.load(f)
        self.assertEqual(spec["kind"], "k8s.%s/claim" % DRV)
        self.assertEqual(spec["devices"][0]["containerEdits"]["env"], ["GOPHER_0=gopher-0"])
        ck = self.checkpoint()
        self.assertEqual(sorted(ck["claims"]), sorted([u1, u2]))
        # a file per claim (version 3: checkpoint() checks it); each config
        # once per claim, as JSON; a device names it by index
        self.assertEqual(ck["claims"][u1]["configs"], [{"mode": "fast"}])
        self.assertEqual(ck["claims"][u1]["devices"][0]["configs"], [0])
        with open("/proc/sys/kernel/random/boot_id") as f:
            self.assertEqual(ck["claims"][u1]["boot_id"], f.read().strip())
        # again: the same answer, from the checkpoint
        r2 = kl.dra_prepare(DRV, ["default/c1/" + u1])
        self.assertEqual(r2["by_uid"][u1]["devices"], r["by_uid"][u1]["devices"])
        r = kl.dra_unprepare(DRV, ["default/c1/" + u1, "default/c2/" + u2])
        self.assertTrue(r["ok"], r)
        self.assertEqual({c["result"] for c in r["claims"]}, {"unprepared"})
        self.assertEqual(self.cdi_files(), [])
        self.assertEqual(self.checkpoint()["claims"], {})

    def test_double_use_refused(self):
        """A device prepared for one claim is refused to another, the error
        naming both; admin access, and shares with distinct share IDs, are
        not double use."""
        api, kl, drv, ev = self.up()
        u1 = api.create_claim("default", "c1", DRV, NODE, "gpu", ["gopher-0"])
        u2 = api.create_claim("default", "c2", DRV, NODE, "gpu", ["gopher-0"])
        r = kl.dra_prepare(DRV, ["default/c1/" + u1])
        self.assertEqual(r["by_uid"][u1]["result"], "prepared", r)
        r = kl.dra_prepare(DRV, ["default/c2/" + u2])
        c = r["by_uid"][u2]
        self.assertEqual(c["result"], "error", r)
        self.assertIn("device gopher-0 is prepared for claim default/c1 (%s)" % u1, c["error"])
        self.assertIn("claim default/c2 (%s) cannot have it too" % u2, c["error"])
        u3 = api.create_claim("default", "mon", DRV, NODE, "gpu", ["gopher-0"], admin_access=True)
        r = kl.dra_prepare(DRV, ["default/mon/" + u3])
        self.assertEqual(r["by_uid"][u3]["result"], "prepared", r)
        s1 = api.create_claim("default", "s1", DRV, NODE, "gpu", ["gopher-1"],
                              share_id="11111111-1111-4111-8111-111111111111")
        s2 = api.create_claim("default", "s2", DRV, NODE, "gpu", ["gopher-1"],
                              share_id="22222222-2222-4222-8222-222222222222")
        r = kl.dra_prepare(DRV, ["default/s1/" + s1, "default/s2/" + s2])
        self.assertEqual([r["by_uid"][u]["result"] for u in (s1, s2)], ["prepared"] * 2, r)
        self.assertEqual(r["by_uid"][s2]["devices"][0]["share_id"],
                         "22222222-2222-4222-8222-222222222222")
        # once c1 is unprepared, c2 may have the device
        self.assertEqual(kl.dra_unprepare(DRV, ["default/c1/" + u1])["claims"][0]["result"],
                         "unprepared")
        r = kl.dra_prepare(DRV, ["default/c2/" + u2])
        self.assertEqual(r["by_uid"][u2]["result"], "prepared", r)

    def test_concurrent_calls_on_one_claim(self):
        api, kl, drv, ev = self.up()
        uid = api.create_claim("default", "c1", DRV, NODE, "gpu", ["gopher-0"])
        mark = api.mark()
        calls = [kl.command_async("dra-prepare %s default/c1/%s" % (DRV, uid)) for _ in range(3)]
        replies = [kl.wait_reply(cid, m) for cid, m in calls]
        for r in replies:
            self.assertTrue(r["ok"], r)
            self.assertEqual(r["claims"][0]["result"], "prepared", r)
            self.assertEqual(r["claims"][0]["devices"], replies[0]["claims"][0]["devices"])
        # one after the other: the claim read once, then from the checkpoint
        api.sync()
        gets = api.requests(mark, verb="get", resource="resourceclaims")
        self.assertEqual(len(gets), 1, gets)
        self.assertEqual(list(self.checkpoint()["claims"]), [uid])

    def test_other_node_or_driver_refused(self):
        api, kl, drv, ev = self.up()
        u1 = api.create_claim("default", "other-driver", "other.example.com", NODE, "gpu",
                              ["gopher-0"])
        u2 = api.create_claim("default", "other-node", DRV, "node-b", "gpu", ["gopher-0"])
        u3 = api.create_claim("default", "unknown-dev", DRV, NODE, "gpu", ["gopher-9"])
        r = kl.dra_prepare(DRV, ["default/other-driver/" + u1, "default/other-node/" + u2,
                                 "default/unknown-dev/" + u3, "default/gone/no-such-uid"])
        self.assertTrue(r["ok"], r)
        for uid in (u1, u2, u3, "no-such-uid"):
            self.assertEqual(r["by_uid"][uid]["result"], "error", r["by_uid"][uid])
        self.assertIn("another driver or node", r["by_uid"][u1]["error"])
        self.assertIn("another driver or node", r["by_uid"][u2]["error"])
        self.assertIn("gopher-9", r["by_uid"][u3]["error"])
        self.assertEqual(self.cdi_files(), [])

    def test_uid_that_is_not_one_refused(self):
        # A UID names the claim's CDI spec file and its record: one that is
        # not a Kubernetes UID never gets that far, for prepare and unprepare.
        api, kl, drv, ev = self.up()
        bad = ["default/c1/.hidden", "default/c2/bad%uid", "default/c3/" + "u" * 129]
        for r in (kl.dra_prepare(DRV, bad), kl.dra_unprepare(DRV, bad)):
            self.assertTrue(r["ok"], r)
            for claim in bad:
                uid = claim.split("/", 2)[2]
                self.assertEqual(r["by_uid"][uid]["result"], "error", r["by_uid"][uid])
                self.assertIn("not a Kubernetes UID", r["by_uid"][uid]["error"])
        drv.wait_log("not a Kubernetes UID: claim default/c1 refused", T)
        self.assertEqual(self.cdi_files(), [])

    def test_unhealthy_device_refused_and_health_streamed(self):
        api, kl, drv, ev = self.up()
        self.gopher("gopher-1", "unhealthy")
        deadline = time.time() + T
        while True:
            h = {d["device"]: d["health"] for d in kl.dra_health(DRV)["devices"]}
            if h.get("gopher-1") == "Unhealthy":
                break
            self.assertLess(time.time(), deadline, h)
            time.sleep(0.05)
        self.assertEqual(h["gopher-0"], "Healthy")
        uid = api.create_claim("default", "c1", DRV, NODE, "gpu", ["gopher-1"])
        r = kl.dra_prepare(DRV, ["default/c1/" + uid])
        self.assertIn("unhealthy", r["by_uid"][uid]["error"])

    def test_health_resent_while_watched(self):
        """The full list again every 10 s while the kubelet watches (its
        health timeout is 30 s: a device not heard of goes Unknown), each
        device with health_check_timeout_seconds 30; so the kubelet never
        sees a steady device go stale. Scaled down by 5 for the test: resends
        every 2 s ($KDP_DRA_HEALTH_RESEND_MS, for tests), the kubelet's
        timeout modelled as 3 s."""
        api = self.api()
        kl = self.kubelet(dra_health_timeout=3)
        self.driver(api, env={"KDP_DRA_HEALTH_RESEND_MS": "2000"})
        kl.wait_dra_registered(DRV, T)
        self.wait_slices(api, 2)
        time.sleep(0.5)  # the start's messages
        m = kl.mark()
        first = kl.wait_event("dra_health", 5, since=m, driver=DRV)
        t1 = time.monotonic()
        m = kl.mark()
        second = kl.wait_event("dra_health", 5, since=m, driver=DRV)
        gap = time.monotonic() - t1
        self.assertGreater(gap, 1.6)
        self.assertLess(gap, 2.6)
        for e in (first, second):
            self.assertEqual(sorted(d["device"] for d in e["devices"]), ["gopher-0", "gopher-1"])
            self.assertEqual({d["health_check_timeout_seconds"] for d in e["devices"]}, {30})
        time.sleep(max(0.0, 3.3 - (time.monotonic() - t1)))  # past 3 s since the first
        h = kl.dra_health(DRV)
        self.assertFalse(h.get("stale"), h)
        self.assertEqual({d["health"] for d in h["devices"]}, {"Healthy"}, h)

    def test_api_server_down_then_back(self):
        api, kl, drv, ev = self.up()
        uid = api.create_claim("default", "c1", DRV, NODE, "gpu", ["gopher-0"])
        api.ok("down")
        r = kl.dra_prepare(DRV, ["default/c1/" + uid])
        self.assertTrue(r["ok"], r)  # the call answers; the claim has the error
        self.assertEqual(r["by_uid"][uid]["result"], "error", r)
        time.sleep(1.5)  # several tries to publish, each failing alike
        # said once, whatever libcurl's wording of each try ("after 0 ms", "after 1 ms")
        self.assertEqual(drv.log_text().count("cannot publish the slices"), 1, drv.log_text())
        api.ok("up")
        deadline = time.time() + T
        while True:  # the kubelet asks again
            r = kl.dra_prepare(DRV, ["default/c1/" + uid])
            if r["by_uid"][uid]["result"] == "prepared":
                break
            self.assertLess(time.time(), deadline, r)
            time.sleep(0.2)

    def test_claim_deleted_before_unprepare(self):
        api, kl, drv, ev = self.up()
        uid = api.create_claim("default", "c1", DRV, NODE, "gpu", ["gopher-0"])
        self.assertEqual(kl.dra_prepare(DRV, ["default/c1/" + uid])["by_uid"][uid]["result"],
                         "prepared")
        api.ok("delete-claim default c1")
        r = kl.dra_unprepare(DRV, ["default/c1/" + uid])
        self.assertEqual(r["by_uid"][uid]["result"], "unprepared", r)
        self.assertEqual(self.cdi_files(), [])

    def test_driver_restarted_between_prepare_and_unprepare(self):
        api, kl, drv, ev = self.up()
        uid = api.create_claim("default", "c1", DRV, NODE, "gpu", ["gopher-0"])
        r1 = kl.dra_prepare(DRV, ["default/c1/" + uid])
        self.assertEqual(r1["by_uid"][uid]["result"], "prepared")
        self.assertEqual(drv.stop(), 0)
        mark = kl.mark()
        drv = self.driver(api)
        kl.wait_event("dra_registered", T, since=mark, driver=DRV)
        api.ok("delete-claim default c1")
        r2 = kl.dra_prepare(DRV, ["default/c1/" + uid])  # from the checkpoint
        self.assertEqual(r2["by_uid"][uid]["devices"], r1["by_uid"][uid]["devices"])
        r = kl.dra_unprepare(DRV, ["default/c1/" + uid])
        self.assertEqual(r["by_uid"][uid]["result"], "unprepared", r)
        self.assertEqual(self.cdi_files(), [])

    def test_two_instances_share_the_checkpoint(self):
        """A rolling update: two instances, one state directory; each
        prepares a claim, and neither loses the other's record."""
        api = self.api()
        kl = self.kubelet()
        a = self.driver(api, env={"POD_UID": "aaaa"})
        kl.wait_dra_registered(DRV, T, endpoint=self.path("root", "plugins", DRV, "dra-aaaa.sock"))
        self.wait_slices(api, 2)
        b = self.driver(api, env={"POD_UID": "bbbb"})
        kl.wait_dra_registered(DRV, T, endpoint=self.path("root", "plugins", DRV, "dra-bbbb.sock"))
        # the kubelet sends to the newest *connected* instance: b once its
        # connection is up (registered is not enough: a race)
        kl.wait_event("dra_connection", T, since=0, connected=True,
                      endpoint=self.path("root", "plugins", DRV, "dra-bbbb.sock"))
        u1 = api.create_claim("default", "c1", DRV, NODE, "gpu", ["gopher-0"])
        u2 = api.create_claim("default", "c2", DRV, NODE, "gpu", ["gopher-1"])
        r = kl.dra_prepare(DRV, ["default/c1/" + u1])  # the newest: b
        self.assertEqual(r["by_uid"][u1]["result"], "prepared", r)
        b.wait_log("prepared claim default/c1", T)
        self.assertEqual(b.stop(), 0)
        r = kl.dra_prepare(DRV, ["default/c2/" + u2])  # a, which never saw c1
        self.assertEqual(r["by_uid"][u2]["result"], "prepared", r)
        a.wait_log("prepared claim default/c2", T)
        self.assertEqual(sorted(self.checkpoint()["claims"]), sorted([u1, u2]))
        r = kl.dra_unprepare(DRV, ["default/c1/" + u1])  # b's record, from the file
        self.assertEqual(r["by_uid"][u1]["result"], "unprepared", r)
        self.assertEqual(list(self.checkpoint()["claims"]), [u2])
        self.assertEqual(self.cdi_files(), ["k8s.%s-claim_%s.json" % (DRV, u2)])

    def test_cdi_directory_wiped(self):
        api, kl, drv, ev = self.up()
        uid = api.create_claim("default", "c1", DRV, NODE, "gpu", ["gopher-0"])
        kl.dra_prepare(DRV, ["default/c1/" + uid])
        shutil.rmtree(self.path("cdi"))
        r = kl.dra_prepare(DRV, ["default/c1/" + uid])
        self.assertEqual(r["by_uid"][uid]["result"], "prepared", r)
        self.assertEqual(self.cdi_files(), ["k8s.%s-claim_%s.json" % (DRV, uid)])
        drv.wait_log("written again", T)

    def test_corrupt_checkpoint_kept_aside(self):
        """An old kdp's checkpoint.json that does not parse, and a claim's
        own file that does not: each kept aside under a name of its own."""
        state = self.path("root", "plugins", DRV)
        os.makedirs(os.path.join(state, "claims"))
        with open(os.path.join(state, "checkpoint.json"), "w") as f:
            f.write('{"version": 1, "checksum": "fnv1a64:0", "claims": {}}')
        with open(os.path.join(state, "claims", "u1.json"), "w") as f:
            f.write('{"version": 3, "checksum": "fnv1a64:0", "claim": {}}')
        api, kl, drv, ev = self.up()
        drv.wait_log("is corrupt", T)
        self.assertEqual(len(glob.glob(os.path.join(state, "checkpoint.json.corrupt-*"))), 1)
        self.assertEqual(len(glob.glob(os.path.join(state, "claims", "u1.json.corrupt-*"))), 1)


class TestDriver(Proc):
    """kdp-test-dra-driver (tests/dra/test_driver.c): devices dev-0..dev-3
    with host node /dev/null; a slow prepare, a failing unprepare."""

    def __init__(self, test, api, args=(), env=None):
        argv = [binary("kdp-test-dra-driver"), "--kubelet-root", test.path("root"),
                "--kubeconfig", api.kubeconfig_token, "--driver", DRV, "--node", NODE,
                "--cdi-dir", test.path("cdi")] + list(args)
        full_env = dict(os.environ)
        full_env.update(env or {})
        super().__init__(argv, name="test-dra-driver", env=full_env)


class Knobs(Base):
    def test_deadline_answers_every_claim(self):
        api = self.api()
        kl = self.kubelet(dra_call_timeout=2)
        drv = self.start_proc(TestDriver(self, api, ["--prepare-delay-ms", "1500"]))
        kl.wait_dra_registered(DRV, T)
        self.wait_slices(api, 4)
        uids = [api.create_claim("default", "c%d" % i, DRV, NODE, "gpu", ["dev-%d" % i])
                for i in range(3)]
        t0 = time.time()
        r = kl.dra_prepare(DRV, ["default/c%d/%s" % (i, u) for i, u in enumerate(uids)])
        took = time.time() - t0
        self.assertTrue(r["ok"], r)  # answered, not DEADLINE_EXCEEDED
        self.assertEqual(r["missing"], [], r)
        self.assertLess(took, 2.0)
        results = [r["by_uid"][u]["result"] for u in uids]
        self.assertIn("error", results, r)  # one callback at a time: not all three in 2 s
        for u in uids:
            if r["by_uid"][u]["result"] == "error":
                self.assertIn("deadline", r["by_uid"][u]["error"])
        deadline = time.time() + 10
        while drv.count_log("prepared claim default/c") < 3:  # they went on
            self.assertLess(time.time(), deadline, drv.log_text())
            time.sleep(0.05)
        r = kl.dra_prepare(DRV, ["default/c%d/%s" % (i, u) for i, u in enumerate(uids)])
        self.assertEqual([r["by_uid"][u]["result"] for u in uids], ["prepared"] * 3, r)
        d = r["by_uid"][uids[0]]["devices"][0]
        self.assertEqual(d["cdi_device_ids"], ["k8s.%s/claim=%s-dev-0" % (DRV, uids[0])])
        with open(self.path("cdi", "k8s.%s-claim_%s.json" % (DRV, uids[0]))) as f:
            spec = json.load(f)  # the default node: the device's host_path
        self.assertEqual(spec["devices"][0]["containerEdits"]["deviceNodes"][0]["path"],
                         "/dev/null")

    def test_failed_unprepare_keeps_the_record(self):
        api = self.api()
        kl = self.kubelet()
        flag = self.path("fail-unprepare")
        self.start_proc(TestDriver(self, api, ["--fail-unprepare-file", flag]))
        kl.wait_dra_registered(DRV, T)
        self.wait_slices(api, 4)
        uid = api.create_claim("default", "c1", DRV, NODE, "gpu", ["dev-1"])
        self.assertEqual(kl.dra_prepare(DRV, ["default/c1/" + uid])["by_uid"][uid]["result"],
                         "prepared")
        open(flag, "w").close()
        r = kl.dra_unprepare(DRV, ["default/c1/" + uid])
        self.assertEqual(r["by_uid"][uid]["result"], "error", r)
        self.assertIn("refused by the test", r["by_uid"][uid]["error"])
        self.assertEqual(list(self.checkpoint()["claims"]), [uid])
        self.assertEqual(len(self.cdi_files()), 1)
        os.unlink(flag)
        r = kl.dra_unprepare(DRV, ["default/c1/" + uid])
        self.assertEqual(r["by_uid"][uid]["result"], "unprepared", r)
        self.assertEqual(self.checkpoint()["claims"], {})
        self.assertEqual(self.cdi_files(), [])

    def test_overrun_prepare_keeps_its_claim_busy(self):
        """A prepare past the callback deadline goes on: until it returns,
        other ops on its claim fail fast, so an unprepare in between cannot
        leave the late record behind."""
        api = self.api()
        kl = self.kubelet()
        drv = self.start_proc(TestDriver(self, api, ["--prepare-delay-ms", "2500",
                                                     "--callback-timeout-ms", "1000"]))
        kl.wait_dra_registered(DRV, T)
        self.wait_slices(api, 4)
        uid = api.create_claim("default", "c1", DRV, NODE, "gpu", ["dev-0"])
        ref = ["default/c1/" + uid]
        r = kl.dra_prepare(DRV, ref)
        self.assertEqual(r["by_uid"][uid]["result"], "error", r)
        self.assertIn("overran its deadline", r["by_uid"][uid]["error"])
        for call in (kl.dra_unprepare, kl.dra_prepare):  # the callback still runs
            r = call(DRV, ref)
            self.assertEqual(r["by_uid"][uid]["result"], "error", r)
            self.assertIn("still running", r["by_uid"][uid]["error"])
        drv.wait_log("overran its deadline returned", T)
        self.assertEqual(list(self.checkpoint()["claims"]), [uid])  # it did prepare
        r = kl.dra_unprepare(DRV, ref)
        self.assertEqual(r["by_uid"][uid]["result"], "unprepared", r)
        self.assertEqual(self.checkpoint()["claims"], {})
        self.assertEqual(self.cdi_files(), [])
        self.assertEqual(drv.count_log("prepare callback that overran"), 1)

    def test_overrun_describe_tried_again(self):
        api = self.api()
        slow = self.path("slow-describe")
        open(slow, "w").close()
        drv = self.start_proc(TestDriver(self, api, ["--slow-describe-file", slow,
                                                     "--callback-timeout-ms", "500"]))
        drv.wait_log("describing the devices again", T)
        time.sleep(1)  # every describe began: the table stays as it is
        self.assertEqual(self.wait_slices(api, 0), [])
        os.unlink(slow)
        self.wait_slices(api, 4)  # a retry, with no change to the table

    def test_prepare_rolled_back_when_its_cdi_spec_fails(self):
        api = self.api()
        kl = self.kubelet()
        drv = self.start_proc(TestDriver(self, api))
        kl.wait_dra_registered(DRV, T)
        self.wait_slices(api, 4)
        shutil.rmtree(self.path("cdi"))
        open(self.path("cdi"), "w").close()  # the spec cannot be written
        uid = api.create_claim("default", "c1", DRV, NODE, "gpu", ["dev-0"])
        r = kl.dra_prepare(DRV, ["default/c1/" + uid])
        self.assertEqual(r["by_uid"][uid]["result"], "error", r)
        self.assertIn("CDI spec", r["by_uid"][uid]["error"])
        drv.wait_log("test-dra-driver: unprepare " + uid, T)
        drv.wait_log("prepare rolled back", T)
        self.assertEqual(self.checkpoint()["claims"], {})

    def test_slow_prepares_side_by_side(self):
        """Six claims in one call, a prepare of 2 s each, one at a time, the
        default 10 s callback bound: all prepared (each callback's bound
        counts its own 2 s, not its wait behind the others), and an
        Allocate to the same plugin's device-plugin side, sent meanwhile,
        is answered before the prepares are."""
        api = self.api()
        kl = self.kubelet()
        self.start_proc(TestDriver(self, api, [
            "--devices", "6", "--prepare-delay-ms", "2000", "--callback-timeout-ms", "0",
            "--device-plugin-too", "--device-plugin-dir", self.path("root", "device-plugins")]))
        kl.wait_dra_registered(DRV, T)
        kl.wait_event("registered", T, since=0, resource="example.com/testdra")
        self.wait_slices(api, 6)
        uids = [api.create_claim("default", "c%d" % i, DRV, NODE, "gpu", ["dev-%d" % i])
                for i in range(6)]
        mark = kl.mark()
        pid, pmark = kl.command_async("dra-prepare %s %s" % (
            DRV, " ".join("default/c%d/%s" % (i, u) for i, u in enumerate(uids))))
        time.sleep(1.0)  # the first prepare runs
        aid, amark = kl.command_async("allocate example.com/testdra dev-5")
        a = kl.wait_reply(aid, amark)
        self.assertTrue(a["ok"], a)
        p = kl.wait_reply(pid, pmark, timeout=40)
        replies = [e for e in kl.events_since(mark, "reply") if e.get("id") in (pid, aid)]
        self.assertEqual([e["id"] for e in replies], [aid, pid])  # Allocate first
        self.assertTrue(p["ok"], p)
        by = {c["uid"]: c for c in p["claims"]}
        self.assertEqual([by[u]["result"] for u in uids], ["prepared"] * 6, p)

    def test_concurrent_claims(self):
        """concurrent_claims 3: three prepares at once, never more."""
        api = self.api()
        kl = self.kubelet()
        drv = self.start_proc(TestDriver(self, api, [
            "--devices", "6", "--prepare-delay-ms", "1000", "--concurrent-claims", "3"]))
        kl.wait_dra_registered(DRV, T)
        self.wait_slices(api, 6)
        uids = [api.create_claim("default", "c%d" % i, DRV, NODE, "gpu", ["dev-%d" % i])
                for i in range(6)]
        r = kl.dra_prepare(DRV, ["default/c%d/%s" % (i, u) for i, u in enumerate(uids)])
        self.assertEqual([r["by_uid"][u]["result"] for u in uids], ["prepared"] * 6, r)
        running = [int(m) for m in re.findall(r"prepare \S+ \((\d+) running\)", drv.log_text())]
        self.assertEqual(len(running), 6, drv.log_text())
        self.assertEqual(max(running), 3, running)

    def test_reboot_prepares_again(self):
        """A claim prepared in an earlier boot (another boot ID) is prepared
        again when the kubelet asks, its CDI spec written again; one of this
        boot is answered from the checkpoint."""
        boot = self.path("boot_id")
        with open(boot, "w") as f:
            f.write("11111111-1111-4111-8111-111111111111\n")
        api = self.api()
        kl = self.kubelet()
        env = {"KDP_BOOT_ID_FILE": boot}
        drv = self.start_proc(TestDriver(self, api, env=env))
        kl.wait_dra_registered(DRV, T)
        self.wait_slices(api, 4)
        uid = api.create_claim("default", "c1", DRV, NODE, "gpu", ["dev-0"])
        claim = ["default/c1/" + uid]
        self.assertEqual(kl.dra_prepare(DRV, claim)["by_uid"][uid]["result"], "prepared")
        self.assertEqual(kl.dra_prepare(DRV, claim)["by_uid"][uid]["result"], "prepared")
        self.assertEqual(drv.count_log("prepare " + uid), 1)  # the second from the checkpoint
        self.assertEqual(drv.stop(), 0)
        # the node reboots: a new boot ID, /var/run/cdi (a tmpfs) empty
        with open(boot, "w") as f:
            f.write("22222222-2222-4222-8222-222222222222\n")
        for p in glob.glob(self.path("cdi", "*.json")):
            os.unlink(p)
        mark = kl.mark()
        drv = self.start_proc(TestDriver(self, api, env=env))
        kl.wait_event("dra_registered", T, since=mark, driver=DRV)
        r = kl.dra_prepare(DRV, claim)
        self.assertEqual(r["by_uid"][uid]["result"], "prepared", r)
        self.assertEqual(drv.count_log("prepare " + uid), 1)  # called again
        drv.wait_log("prepared in an earlier boot", T)
        self.assertEqual(self.cdi_files(), ["k8s.%s-claim_%s.json" % (DRV, uid)])
        self.assertEqual(self.checkpoint()["claims"][uid]["boot_id"],
                         "22222222-2222-4222-8222-222222222222")
        self.assertEqual(kl.dra_unprepare(DRV, claim)["claims"][0]["result"], "unprepared")
        self.assertEqual(drv.count_log("unprepare " + uid), 1)

    def test_device_plugin_side_missing(self):
        """A driver of both APIs whose device-plugin directory is missing
        registers as a DRA driver and prepares all the same; when the
        directory comes, the device-plugin side registers too, and its
        restarts leave the DRA side alone."""
        api = self.api()
        dp_dir = self.path("root", "dp-later")
        kl = self.kubelet()
        drv = self.start_proc(TestDriver(self, api, [
            "--device-plugin-too", "--device-plugin-dir", dp_dir]))
        kl.wait_dra_registered(DRV, T)
        self.wait_slices(api, 4)
        uid = api.create_claim("default", "c1", DRV, NODE, "gpu", ["dev-0"])
        r = kl.dra_prepare(DRV, ["default/c1/" + uid])
        self.assertEqual(r["by_uid"][uid]["result"], "prepared", r)
        drv.wait_log("the device-plugin directory %s does not exist" % re.escape(dp_dir), T)
        # the directory comes (a kubelet of its own there): the device-plugin side registers
        dp_kl = self.start_proc(Kubelet(dp_dir))
        dp_kl.wait_event("registered", T, since=0, resource="example.com/testdra")
        # a restart of the device-plugin side's kubelet: the DRA sockets stay
        mark = kl.mark()
        dp_mark = dp_kl.mark()
        dp_kl.ok("restart")
        dp_kl.wait_event("registered", T, since=dp_mark, resource="example.com/testdra")
        r = kl.dra_prepare(DRV, ["default/c1/" + uid])
        self.assertEqual(r["by_uid"][uid]["result"], "prepared", r)
        self.assertEqual(kl.events_since(mark, "dra_registered"), [])
        self.assertEqual(drv.count_log(r"serving \S*/plugins/%s/dra\.sock" % DRV), 1,
                         drv.log_text())

    def slice_device(self, api, name):
        for s in api.slices():
            for d in s["spec"].get("devices") or []:
                if s["spec"]["driver"] == DRV and d["name"] == name:
                    return d
        return None

    def wait_device(self, api, name, pred, what, timeout=T):
        deadline = time.time() + timeout
        while True:
            d = self.slice_device(api, name)
            if d is not None and pred(d):
                return d
            if time.time() > deadline:
                raise AssertionError("device %s: not %s in %.0f s: %s" % (name, what, timeout, d))
            time.sleep(0.05)

    def test_unhealthy_device_tainted(self):
        """A device whose health check fails is tainted in its slice (after
        the hysteresis: 2 failures), the health stream and the device-plugin
        side agreeing; the taint goes once it is healthy again (2 successes);
        NoExecute when asked."""
        fail = self.path("fail-dev-0")
        api = self.api()
        kl = self.kubelet()
        drv = self.start_proc(TestDriver(self, api, [
            "--probe-fail-file", fail, "--device-plugin-too", "--device-plugin-dir",
            self.path("root", "device-plugins")]))
        kl.wait_dra_registered(DRV, T)
        self.wait_slices(api, 4)
        self.assertNotIn("taints", self.slice_device(api, "dev-0"))
        mark = kl.mark()
        t0 = time.time()
        open(fail, "w").close()
        d = self.wait_device(api, "dev-0", lambda d: d.get("taints"), "tainted")
        taint = d["taints"][0]
        self.assertEqual(taint["key"], DRV + "/unhealthy")
        self.assertEqual(taint["value"], "health-check-failed")
        self.assertEqual(taint["effect"], "NoSchedule")
        added = calendar.timegm(time.strptime(taint["timeAdded"], "%Y-%m-%dT%H:%M:%SZ"))
        self.assertLessEqual(abs(added - t0), 5)
        self.assertNotIn("taints", self.slice_device(api, "dev-1"))
        # the health stream and the device-plugin side say the same
        def sick(event, key):
            return lambda e: e.get("event") == event and any(
                x[key] == "dev-0" and x["health"] == "Unhealthy" for x in e.get("devices") or [])
        e = kl.wait_event(sick("dra_health", "device"), T, since=mark)
        kl.wait_event(sick("devices", "id"), T, since=mark, resource="example.com/testdra")
        # with the probe's reason as the message, made valid UTF-8 (grpc-go
        # refuses a message that is not)
        by = {x["device"]: x for x in e["devices"]}
        self.assertEqual(by["dev-0"]["message"], "the test's probe fails at 95\ufffdC")
        self.assertEqual((by["dev-1"]["health"], by["dev-1"]["message"]), ("Healthy", ""))
        # a claim is refused meanwhile, as before
        uid = api.create_claim("default", "c1", DRV, NODE, "gpu", ["dev-0"])
        r = kl.dra_prepare(DRV, ["default/c1/" + uid])
        self.assertIn("unhealthy", r["by_uid"][uid]["error"])
        os.unlink(fail)
        self.wait_device(api, "dev-0", lambda d: not d.get("taints"), "untainted")
        drv.wait_log("device dev-0 .*Healthy", T)
        self.assertEqual(drv.stop(), 0)
        # NoExecute when the author asks
        drv = self.start_proc(TestDriver(self, api, [
            "--probe-fail-file", fail, "--unhealthy-taint", "noexecute"]))
        open(fail, "w").close()
        d = self.wait_device(api, "dev-0", lambda d: d.get("taints"), "tainted")
        self.assertEqual(d["taints"][0]["effect"], "NoExecute")

    def test_author_taints(self):
        """The author's own taints (kdp_plugin_set_dra_taints, here from the
        list callback) reach the slice beside kdp's taint of an Unhealthy
        device, keep their timeAdded while unchanged, go when removed; bad
        ones are refused naming the field; a tainted device is still
        prepared (the scheduler decides who tolerates it)."""
        taints = self.path("taints", "list")
        fail = self.path("fail-dev-0")
        os.makedirs(os.path.dirname(taints))
        api = self.api()
        kl = self.kubelet()
        drv = self.start_proc(TestDriver(self, api, [
            "--taints-file", taints, "--probe-fail-file", fail]))
        kl.wait_dra_registered(DRV, T)
        self.wait_slices(api, 4)

        def write(text):
            tmp = self.path("taints.tmp")
            with open(tmp, "w") as f:
                f.write(text)
            os.rename(tmp, taints)  # moved in: the watch rescans

        mark = drv.log_mark()
        write("dev-1 example.com/maintenance firmware-update noschedule\n"
              "dev-1 example.com/inventory - informational\n"
              "dev-0 example.com/maintenance cooling noexecute\n")
        drv.wait_log(r"taints dev-1: 0$", T, since=mark)
        d1 = self.wait_device(api, "dev-1", lambda d: len(d.get("taints") or []) == 2, "tainted")
        got = sorted((t["key"], t.get("value"), t["effect"]) for t in d1["taints"])
        self.assertEqual(got, [("example.com/inventory", None, "None"),
                               ("example.com/maintenance", "firmware-update", "NoSchedule")])
        added = {t["key"]: t["timeAdded"] for t in d1["taints"]}
        # kdp's own taint of an Unhealthy device beside the author's
        open(fail, "w").close()
        d0 = self.wait_device(api, "dev-0", lambda d: len(d.get("taints") or []) == 2, "both")
        self.assertEqual(sorted(t["key"] for t in d0["taints"]),
                         ["example.com/maintenance", DRV + "/unhealthy"])
        os.unlink(fail)
        self.wait_device(api, "dev-0", lambda d: len(d.get("taints") or []) == 1, "healed")
        # prepare does not refuse a device with the author's taints
        uid = api.create_claim("default", "c1", DRV, NODE, "gpu", ["dev-1"])
        r = kl.dra_prepare(DRV, ["default/c1/" + uid])
        self.assertEqual(r["by_uid"][uid]["result"], "prepared", r)
        # unchanged taints keep their timeAdded; a changed one is new; gone ones go
        time.sleep(1.1)
        write("dev-1 example.com/maintenance firmware-update noschedule\n"
              "dev-1 example.com/inventory v2 informational\n")
        d1 = self.wait_device(api, "dev-1", lambda d: any(
            t.get("value") == "v2" for t in d.get("taints") or []), "changed")
        now = {t["key"]: t["timeAdded"] for t in d1["taints"]}
        self.assertEqual(now["example.com/maintenance"], added["example.com/maintenance"])
        self.assertGreater(now["example.com/inventory"], added["example.com/inventory"])
        self.wait_device(api, "dev-0", lambda d: not d.get("taints"), "untainted")
        # refused, naming the field; the slices keep what was set before
        bad = (("dev-2 Bad_Key! v noschedule", "taints\\[0\\].key"),
               ("dev-2 %s/unhealthy v noschedule" % DRV, "taints\\[0\\].key is kdp's own"),
               ("dev-2 example.com/k -bad- noschedule", "taints\\[0\\].value"),
               ("dev-2 example.com/k v none", "taints\\[0\\].effect"),
               ("dev-2 example.com/k v 7", "taints\\[0\\].effect"),
               ("dev-2 example.com/k v noschedule\ndev-2 example.com/k w noschedule",
                "taints\\[1\\] has the key and effect of taints\\[0\\]"),
               ("\n".join("dev-2 example.com/k%d v noschedule" % i for i in range(9)),
                "9 taints: at most 8"))
        for text, why in bad:
            with self.subTest(taints=text):
                mark = drv.log_mark()
                write(text + "\n")
                drv.wait_log(r"taints dev-2: -22$", T, since=mark)
                drv.wait_log("kdp_plugin_set_dra_taints: device dev-2: " + why, T, since=mark)
        self.assertNotIn("taints", self.slice_device(api, "dev-2"))
        self.assertIsNone(drv.sanitizer_report())

    def claim_devices(self, api, name, n, timeout=T):
        """The claim's status.devices once it has n entries."""
        deadline = time.time() + timeout
        while True:
            c = [x for x in api.claims() if x["metadata"]["name"] == name][0]
            devs = c.get("status", {}).get("devices") or []
            if len(devs) == n:
                return devs
            if time.time() > deadline:
                raise AssertionError("claim %s: status.devices has %d entries, not %d: %s"
                                     % (name, len(devs), n, c.get("status")))
            time.sleep(0.05)

    def test_claim_status(self):
        """The prepare op's device statuses reach the claim's status.devices
        through /status (retried while RBAC refuses), are written again when
        a restarted driver is asked to prepare again, and go at unprepare;
        one the API would refuse is refused at the call, naming the field."""
        api = self.api()
        kl = self.kubelet()
        drv = self.start_proc(TestDriver(self, api, ["--status", "good"]))
        kl.wait_dra_registered(DRV, T)
        self.wait_slices(api, 4)
        api.ok("forbid update resourceclaims/status")
        uid = api.create_claim("default", "c1", DRV, NODE, "gpu", ["dev-0", "dev-1"])
        claim = ["default/c1/" + uid]
        self.assertEqual(kl.dra_prepare(DRV, claim)["by_uid"][uid]["result"], "prepared")
        drv.wait_log("claim default/c1: cannot write its status yet: .*forbidden", T)
        api.ok("allow update resourceclaims/status")
        devs = self.claim_devices(api, "c1", 2)
        by = {d["device"]: d for d in devs}
        d0 = by["dev-0"]
        self.assertEqual((d0["driver"], d0["pool"]), (DRV, NODE))
        cond = d0["conditions"][0]
        self.assertEqual((cond["type"], cond["status"], cond["reason"], cond["message"]),
                         ("Ready", "True", "Prepared", "device dev-0 ready"))
        self.assertRegex(cond["lastTransitionTime"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        self.assertEqual(d0["data"], {"claim": uid, "index": 0})
        self.assertEqual(by["dev-1"]["networkData"],
                         {"interfaceName": "net1", "ips": ["10.0.0.2/24"],
                          "hardwareAddress": "02:00:00:00:00:01"})
        # wiped behind the driver's back, then the driver restarts: the
        # kubelet's prepare again (from the checkpoint) writes it again
        c = [x for x in api.claims() if x["metadata"]["name"] == "c1"][0]
        del c["status"]["devices"]
        code, body = api.http("PUT", "/apis/resource.k8s.io/v1/namespaces/default/"
                              "resourceclaims/c1/status", c)
        self.assertEqual(code, 200, body)
        self.assertEqual(drv.stop(), 0)
        mark = kl.mark()
        drv = self.start_proc(TestDriver(self, api, ["--status", "good"]))
        kl.wait_event("dra_registered", T, since=mark, driver=DRV)
        self.assertEqual(kl.dra_prepare(DRV, claim)["by_uid"][uid]["result"], "prepared")
        self.assertEqual(drv.count_log("prepare " + uid), 0)  # from the checkpoint
        self.claim_devices(api, "c1", 2)
        # unprepare: this driver's entries go
        self.assertEqual(kl.dra_unprepare(DRV, claim)["by_uid"][uid]["result"], "unprepared")
        self.claim_devices(api, "c1", 0)
        self.assertEqual(drv.stop(), 0)
        # a status changed after the prepare, from a callback (the list
        # op), recorded and written; refused for claims and devices that
        # are not prepared
        upd = self.path("upd", "statuses")
        os.makedirs(os.path.dirname(upd))
        drv = self.start_proc(TestDriver(self, api, ["--status", "good",
                                                     "--status-update-file", upd]))
        kl.wait_dra_registered(DRV, T)
        uid3 = api.create_claim("default", "c3", DRV, NODE, "gpu", ["dev-3"])
        self.assertEqual(kl.dra_prepare(DRV, ["default/c3/" + uid3])["by_uid"][uid3]["result"],
                         "prepared")
        self.assertEqual(self.claim_devices(api, "c3", 1)[0]["conditions"][0]["reason"], "Prepared")
        tmp = self.path("upd.tmp")
        with open(tmp, "w") as f:
            f.write("%s dev-3 Overheated\n%s dev-2 Nope\nno-such-uid dev-3 Nope\n" % (uid3, uid3))
        mark = drv.log_mark()
        os.rename(tmp, upd)
        drv.wait_log(r"status update dev-3: 0$", T, since=mark)
        drv.wait_log(r"status update dev-2: -2$", T, since=mark)
        drv.wait_log("kdp_plugin_set_dra_device_status: no device dev-2 in claim " + uid3, T)
        drv.wait_log("kdp_plugin_set_dra_device_status: no prepared claim no-such-uid", T)

        def reason():
            return self.claim_devices(api, "c3", 1)[0]["conditions"][0]
        deadline = time.time() + T
        while reason()["reason"] != "Overheated" and time.time() < deadline:
            time.sleep(0.05)
        self.assertEqual((reason()["status"], reason()["reason"]), ("False", "Overheated"))
        self.assertEqual(drv.stop(), 0)
        ck = self.checkpoint()
        self.assertIn("Overheated", ck["claims"][uid3]["devices"][0]["status"])
        # refused at the call, naming the field; the claim is prepared anyway
        drv = self.start_proc(TestDriver(self, api, ["--status", "bad"]))
        kl.wait_dra_registered(DRV, T)
        uid2 = api.create_claim("default", "c2", DRV, NODE, "gpu", ["dev-2"])
        r = kl.dra_prepare(DRV, ["default/c2/" + uid2])
        self.assertEqual(r["by_uid"][uid2]["result"], "prepared", r)
        drv.wait_log(r"status dev-2: -22$", T)
        drv.wait_log("kdp_dra_prepared_set_status: device 0: conditions\\[0\\].reason must be "
                     "CamelCase", T)
        self.assertEqual(self.claim_devices(api, "c2", 0), [])

    def test_large_claims_bounded(self):
        """Claims as large as the API allows a user to make them (32 opaque
        configs of 10 KiB, 8 results: 332 KB) cost what they hold: each
        config kept once, each claim a file of its own of about its size,
        the driver's peak memory bounded while preparing 7 of them and
        while loading them after a restart (before: 5.25 MB a record, 143 MB
        and 141 MB, over the DaemonSet's 128 MiB)."""
        api = self.api()
        kl = self.kubelet()
        drv = self.start_proc(TestDriver(self, api, ["--devices", "56"]))
        kl.wait_dra_registered(DRV, T)
        self.wait_slices(api, 56)
        cfgs = " ".join("--config-b64 %s" % base64.b64encode(json.dumps(
            {"blob%d" % i: "x" * (10 * 1024 - 16)}).encode()).decode() for i in range(32))
        uids = []
        for k in range(7):
            devs = ",".join("dev-%d" % (8 * k + i) for i in range(8))
            r = api.ok("create-claim default big%d --driver %s --pool %s --request gpu %s "
                       "--device %s" % (k, DRV, NODE, cfgs, devs))
            uids.append(r["uid"])
        r = kl.dra_prepare(DRV, ["default/big%d/%s" % (k, u) for k, u in enumerate(uids)])
        self.assertEqual([r["by_uid"][u]["result"] for u in uids], ["prepared"] * 7, r)
        files = glob.glob(self.path("root", "plugins", DRV, "claims", "*.json"))
        sizes = sorted(os.path.getsize(p) for p in files)
        self.assertEqual(len(sizes), 7)
        peak = peak_kib(drv.proc.pid)
        sys.stderr.write("figure: a 32 x 10 KiB claim's file: %d bytes; driver peak %d KiB "
                         "after preparing 7\n" % (sizes[-1], peak))
        self.assertLess(sizes[-1], 400 * 1024)  # about the claim's size: configs once
        self.assertEqual(drv.stop(), 0)
        drv = self.start_proc(TestDriver(self, api, ["--devices", "56"]))
        kl.wait_dra_registered(DRV, T)
        drv.wait_log("7 prepared claims", T)
        peak2 = peak_kib(drv.proc.pid)
        sys.stderr.write("figure: driver peak %d KiB after loading them\n" % peak2)
        if os.environ.get("KDP_SANITIZED") != "1":
            self.assertLess(peak, 48 * 1024)
            self.assertLess(peak2, 32 * 1024)
        r = kl.dra_unprepare(DRV, ["default/big%d/%s" % (k, u) for k, u in enumerate(uids)])
        self.assertEqual([r["by_uid"][u]["result"] for u in uids], ["unprepared"] * 7, r)

    def test_rbac_covers_calls(self):
        """Every call the driver makes (slices published, a claim read,
        prepared with a status, unprepared, the driver restarted) is granted
        by deploy/dra/rbac.yaml, and the ClusterRole grants nothing the
        driver does not call (the one synthetic rule aside: the node-aware
        `associated-node:update` on resourceclaims/driver that a 1.36+ API
        server also checks when status.devices changes)."""
        import yaml
        with open(os.path.join(SRC, "deploy", "dra", "rbac.yaml")) as f:
            docs = [d for d in yaml.safe_load_all(f) if d]
        role = [d for d in docs if d["kind"] == "ClusterRole"][0]
        granted = {(v, res) for r in role["rules"] for res in r["resources"] for v in r["verbs"]}
        api = self.api()
        kl = self.kubelet()
        drv = self.start_proc(TestDriver(self, api, ["--devices", "130", "--status", "good"]))
        kl.wait_dra_registered(DRV, T)
        self.wait_slices(api, 130)  # two slices
        uid = api.create_claim("default", "c1", DRV, NODE, "gpu", ["dev-0"])
        claim = ["default/c1/" + uid]
        self.assertEqual(kl.dra_prepare(DRV, claim)["by_uid"][uid]["result"], "prepared")
        self.claim_devices(api, "c1", 1)
        self.assertEqual(kl.dra_unprepare(DRV, claim)["by_uid"][uid]["result"], "unprepared")
        self.claim_devices(api, "c1", 0)
        gen = api.slices()[0]["spec"]["pool"]["generation"]
        self.assertEqual(drv.stop(), 0)
        drv = self.start_proc(TestDriver(self, api, ["--devices", "2", "--status", "good"]))
        # one slice rewritten at the next generation, the other deleted (in
        # either order: the device count alone can reach 2 before the update)
        deadline = time.time() + T
        while True:
            mine = [s for s in api.slices() if s["spec"]["driver"] == DRV]
            if (len(mine) == 1 and mine[0]["spec"]["pool"]["generation"] > gen
                    and len(mine[0]["spec"].get("devices") or []) == 2):
                break
            self.assertLess(time.time(), deadline, "not republished: %s" % mine)
            time.sleep(0.05)
        api.sync()
        used = {(r["verb"], r["resource"]) for r in api.requests()
                if r.get("resource") and r["code"] < 500}
        self.assertTrue(used, "no request seen")
        self.assertEqual(sorted(used - granted), [], "calls the manifest does not grant")
        synthetic = {("associated-node:update", "resourceclaims/driver")}
        self.assertEqual(sorted(granted - used - synthetic), [],
                         "granted but never called: remove them from deploy/dra/rbac.yaml")
        self.assertTrue(synthetic <= granted)

    def test_redescribe(self):
        """kdp_plugin_redescribe_dra (here from the list callback): the
        device is described again and republished at a new generation, the
        others untouched; a failing describe keeps the last description; an
        unknown ID is -ENOENT."""
        fw = self.path("fw", "version")
        os.makedirs(os.path.dirname(fw))
        with open(fw, "w") as f:
            f.write("v1\n")
        api = self.api()
        drv = self.start_proc(TestDriver(self, api, ["--describe-file", fw]))
        self.wait_slices(api, 4)

        def firmware(name):
            d = self.slice_device(api, name)
            return d["attributes"]["firmware"]["string"]
        self.assertEqual((firmware("dev-0"), firmware("dev-1")), ("v1", "v1"))
        gen = api.slices()[0]["spec"]["pool"]["generation"]

        def write(text):
            tmp = self.path("fw.tmp")
            with open(tmp, "w") as f:
                f.write(text)
            os.rename(tmp, fw)  # moved in: the watch rescans, the list asks
        mark = drv.log_mark()
        write("v2\n")
        drv.wait_log(r"redescribe dev-1: 0$", T, since=mark)
        drv.wait_log(r"redescribe nope: -2$", T, since=mark)
        self.wait_device(api, "dev-1", lambda d: d["attributes"]["firmware"]["string"] == "v2",
                         "v2")
        self.assertEqual(firmware("dev-0"), "v1")  # only dev-1 was asked for
        self.assertGreater(api.slices()[0]["spec"]["pool"]["generation"], gen)
        mark = drv.log_mark()
        write("fail\n")
        drv.wait_log("device dev-1: described again without success: the slices keep its "
                     "last description", T, since=mark)
        self.assertEqual(firmware("dev-1"), "v2")

    def test_health_unknown_while_down(self):
        """While the health subsystem is down (the probe answers DOWN), the
        health stream says Unknown with the reason for every device, the
        device-plugin side and the slices hold them Unhealthy (the default
        policy); when it answers again, each device comes back Healthy."""
        fail = self.path("probe-state")
        api = self.api()
        kl = self.kubelet()
        drv = self.start_proc(TestDriver(self, api, [
            "--probe-fail-file", fail, "--device-plugin-too", "--device-plugin-dir",
            self.path("root", "device-plugins")]))
        kl.wait_dra_registered(DRV, T)
        self.wait_slices(api, 4)

        def all_are(health, message=None):
            return lambda e: e.get("event") == "dra_health" and len(e["devices"]) == 4 and all(
                x["health"] == health and (message is None or x["message"] == message)
                for x in e["devices"])
        kl.wait_event(all_are("Healthy", ""), T, since=0)
        mark = kl.mark()
        with open(fail, "w") as f:
            f.write("down\n")
        kl.wait_event(all_are("Unknown", "the test's health library is down"), T, since=mark)
        kl.wait_event(lambda e: e.get("event") == "devices" and len(e["devices"]) == 4 and all(
            x["health"] == "Unhealthy" for x in e["devices"]), T, since=mark,
            resource="example.com/testdra")
        self.wait_device(api, "dev-3", lambda d: d.get("taints"), "tainted")
        drv.wait_log("the health subsystem is down", T)
        mark = kl.mark()
        os.unlink(fail)
        kl.wait_event(all_are("Healthy", ""), T, since=mark)
        self.wait_device(api, "dev-3", lambda d: not d.get("taints"), "untainted")

    def test_300_devices_in_3_slices(self):
        api = self.api()
        self.start_proc(TestDriver(self, api, ["--devices", "300"]))
        devs = self.wait_slices(api, 300)
        self.assertEqual(len(set(d["name"] for d in devs)), 300)
        slices = [s for s in api.slices() if s["spec"]["driver"] == DRV]
        self.assertEqual(sorted(len(s["spec"]["devices"]) for s in slices), [44, 128, 128])
        self.assertEqual({s["spec"]["pool"]["resourceSliceCount"] for s in slices}, {3})

    def test_binding_conditions(self):
        """kdp_dra_device_set_binding_conditions from the describe op: the
        slices kdpctl dra apiserver stores carry bindingConditions,
        bindingFailureConditions and bindsToNode (v1), and it shows them;
        a refused set is logged with its field and rule; 300 such devices
        still fit 3 slices (binding conditions do not lower the 128)."""
        api = Proc([binary("kdpctl"), "dra", "apiserver", "--dir", self.path("kapi"), "--node",
                    NODE, "--json"], "dra-apiserver", stdin=True)
        api.stop_last = True
        self.start_proc(api)
        ready = api.wait_event("ready", since=0)
        api.kubeconfig_token = ready["kubeconfig"]
        bind = ["--binding-conditions", "example.com/attached,Ready",
                "--binding-failure-conditions", "example.com/failed", "--binds-to-node"]
        self.start_proc(TestDriver(self, api, ["--devices", "300"] + bind))
        ev = api.wait_event(lambda e: e.get("event") == "slice" and e["type"] == "ADDED" and any(
            d["name"] == "dev-0" for d in e["devices"]), timeout=T)
        self.assertEqual({d["binding"] for d in ev["devices"]},
                         {"binding: example.com/attached,Ready / fail: example.com/failed, "
                          "bindsToNode"})
        ctx = ssl.create_default_context(cafile=os.path.join(self.path("kapi"), "ca.crt"))
        with open(os.path.join(self.path("kapi"), "token")) as f:
            tok = f.read().strip()
        url = ready["url"] + "/apis/resource.k8s.io/v1/resourceslices"

        def devices():
            req = urllib.request.Request(url, headers={"Authorization": "Bearer " + tok})
            with urllib.request.urlopen(req, context=ctx, timeout=T) as r:
                items = json.load(r)["items"]
            return items, [d for s in items for d in s["spec"].get("devices") or []]
        items, devs = wait_for(lambda: (lambda it: it if len(it[1]) == 300 else None)(devices()),
                               T, "300 devices in the slices")
        self.assertEqual(sorted(len(s["spec"]["devices"]) for s in items), [44, 128, 128])
        for d in devs:
            self.assertEqual(d["bindingConditions"], ["example.com/attached", "Ready"], d)
            self.assertEqual(d["bindingFailureConditions"], ["example.com/failed"], d)
            self.assertIs(d["bindsToNode"], True, d)

    def test_binding_conditions_v1beta1_and_refused(self):
        """The same through a v1beta1 API server (BasicDevice fields, under
        "basic" on the wire, stored as v1 by the emulator); a bad set is
        refused by the call, naming the field and the rule."""
        api = self.api(versions=["v1beta1"])
        drv = self.start_proc(TestDriver(self, api, [
            "--binding-conditions", "Attached", "--binding-failure-conditions", "Failed"]))
        self.wait_slices(api, 4)
        d = self.slice_device(api, "dev-0")
        self.assertEqual((d["bindingConditions"], d["bindingFailureConditions"]),
                         (["Attached"], ["Failed"]))
        self.assertNotIn("bindsToNode", d)
        drv.stop()
        bad = self.start_proc(TestDriver(self, api, [
            "--binding-conditions", "Attached", "--binding-failure-conditions", "Attached"]))
        bad.wait_log(r"device dev-0: bindingFailureConditions\[0\]: Invalid value: \"Attached\": "
                     r"bindingFailureConditions must not overlap with bindingConditions", T)
        bad.wait_log(r"binding conditions dev-0: -22$", T)

    def test_device_plugin_too(self):
        api = self.api()
        kl = self.kubelet()
        self.driver(api, ["--device-plugin-too", "--device-plugin-dir",
                          self.path("root", "device-plugins")])
        kl.wait_dra_registered(DRV, T)
        kl.wait_event("registered", T, since=0, resource="example.com/gopher")
        self.wait_slices(api, 2)


class Config(Base):
    def test_no_api_server_configuration(self):
        d = self.start_proc(Driver(self))
        self.assertNotEqual(d.wait_exit(T), 0)
        self.assertIn("KUBECONFIG", d.log_text())
        # one line, the advice said once (a user found it twice)
        self.assertEqual(d.log_text().count("no API server configuration"), 1)
        self.assertEqual(d.log_text().count("service account"), 1)

    def test_cdi_mode(self):
        """kdp_dra_config.cdi_mode: the claims' CDI specs 0600 whatever the
        umask; a mode with more than read and write bits refused, naming
        the field."""
        api = self.api()
        kl = self.kubelet()
        self.start_proc(TestDriver(self, api, ["--cdi-mode", "600"]))
        kl.wait_dra_registered(DRV, T)
        self.wait_slices(api, 4)
        uid = api.create_claim("default", "c1", DRV, NODE, "gpu", ["dev-0"])
        r = kl.dra_prepare(DRV, ["default/c1/" + uid])
        self.assertEqual(r["by_uid"][uid]["result"], "prepared", r)
        specs = glob.glob(self.path("cdi", "*.json"))
        self.assertEqual(len(specs), 1)
        self.assertEqual(os.stat(specs[0]).st_mode & 0o777, 0o600)
        d = self.start_proc(TestDriver(self, api, ["--cdi-mode", "755",
                                                   "--kubelet-root", self.path("root2")]))
        self.assertNotEqual(d.wait_exit(T), 0)
        self.assertIn("kdp_dra_config.cdi_mode 0755", d.log_text())

    def test_claim_wide_edits(self):
        """KDP_DRA_CLAIM: the whole claim's variable and mount as a device of
        the claim's CDI spec named after its UID, whose CDI ID comes with each
        device; per-device mounts; written again from the checkpoint after a
        CDI wipe and after a driver restart; removed at unprepare."""
        api = self.api()
        kl = self.kubelet()
        shared = self.path("shared")
        os.makedirs(shared)
        args = ["--claim-edits", shared]
        drv = self.start_proc(TestDriver(self, api, args))
        kl.wait_dra_registered(DRV, T)
        self.wait_slices(api, 4)
        uid = api.create_claim("default", "c1", DRV, NODE, "gpu", ["dev-0", "dev-1"])
        r = kl.dra_prepare(DRV, ["default/c1/" + uid])
        self.assertEqual(r["by_uid"][uid]["result"], "prepared", r)
        claim_id = "k8s.%s/claim=%s" % (DRV, uid)
        for d in r["by_uid"][uid]["devices"]:
            self.assertEqual(d["cdi_device_ids"],
                             ["k8s.%s/claim=%s-%s" % (DRV, uid, d["device"]), claim_id], d)

        def spec():
            files = self.cdi_files()
            self.assertEqual(len(files), 1, files)
            with open(self.path("cdi", files[0])) as f:
                return {d["name"]: d["containerEdits"] for d in json.load(f)["devices"]}
        want = {
            uid: {"env": ["CLAIM_UID=" + uid],
                  "mounts": [{"hostPath": shared, "containerPath": "/run/claim",
                              "options": ["nosuid", "nodev", "bind"]}]},
            uid + "-dev-0": {"mounts": [{"hostPath": shared + "/dev-0",
                                         "containerPath": "/opt/dev-0",
                                         "options": ["ro", "nosuid", "nodev", "bind"]}]},
            uid + "-dev-1": {"mounts": [{"hostPath": shared + "/dev-1",
                                         "containerPath": "/opt/dev-1",
                                         "options": ["ro", "nosuid", "nodev", "bind"]}]},
        }
        self.assertEqual(spec(), want)
        # the CDI directory wiped (a reboot's tmpfs): the spec again, from the checkpoint
        for f in self.cdi_files():
            os.unlink(self.path("cdi", f))
        r = kl.dra_prepare(DRV, ["default/c1/" + uid])
        self.assertEqual(r["by_uid"][uid]["result"], "prepared", r)
        self.assertEqual(spec(), want)
        # a driver restart: the record read back keeps the whole claim's part
        self.assertEqual(drv.stop(), 0)
        for f in self.cdi_files():
            os.unlink(self.path("cdi", f))
        mark = kl.mark()
        self.start_proc(TestDriver(self, api, args))
        kl.wait_event("dra_registered", T, since=mark, driver=DRV)
        r = kl.dra_prepare(DRV, ["default/c1/" + uid])
        self.assertIn(claim_id, r["by_uid"][uid]["devices"][0]["cdi_device_ids"])
        self.assertEqual(spec(), want)
        r = kl.dra_unprepare(DRV, ["default/c1/" + uid])
        self.assertEqual(r["by_uid"][uid]["result"], "unprepared", r)
        self.assertEqual(self.cdi_files(), [])

    def test_dirs_writable_by_others(self):
        """The state and CDI directories are refused when others can write
        to them (a forged checkpoint, a swapped spec): the state directory
        at the start, naming it and the fix; the CDI directory at prepare,
        in the error the kubelet shows; fixed, the prepare works."""
        api = self.api()
        os.makedirs(self.path("state"))
        os.chmod(self.path("state"), 0o777)
        d = self.start_proc(Driver(self, ["--kubeconfig", api.kubeconfig_token,
                                          "--state-dir", self.path("state")]))
        self.assertNotEqual(d.wait_exit(T), 0)
        self.assertIn("the DRA state directory %s is writable by every user (mode 0777)"
                      % self.path("state"), d.log_text())
        os.chmod(self.path("state"), 0o700)
        os.chmod(self.path("cdi"), 0o777)
        kl = self.kubelet()
        self.driver(api, ["--state-dir", self.path("state")])
        kl.wait_dra_registered(DRV, T)
        self.wait_slices(api, 2)
        uid = api.create_claim("default", "c1", DRV, NODE, "gpu", ["gopher-0"])
        r = kl.dra_prepare(DRV, ["default/c1/" + uid])
        err = r["by_uid"][uid]["error"]
        self.assertIn("the CDI directory %s is writable by every user" % self.path("cdi"), err)
        self.assertEqual(self.cdi_files(), [])
        os.chmod(self.path("cdi"), 0o755)
        r = kl.dra_prepare(DRV, ["default/c1/" + uid])
        self.assertEqual(r["by_uid"][uid]["result"], "prepared", r)

    def test_dra_only_driver(self):
        """kdp_dra_driver_new: no device-plugin name, socket or registration;
        /healthz and the metrics speak of the driver and its DRA side."""
        api = self.api()
        addr = self.path("m.sock")
        drv = self.start_proc(TestDriver(self, api, ["--metrics-address", "unix:" + addr]))
        wait_for(lambda: os.path.exists(addr), T, "the metrics socket")
        status, _, body = get(addr, "/healthz")
        self.assertEqual(status, 503, body)
        self.assertRegex(body, r"^gopher\.example\.com: DRA: not registered: waiting for the "
                               r"kubelet's plugin watcher to ask \S+-reg\.sock \(GetInfo\)\n$")
        kl = self.kubelet()
        kl.wait_dra_registered(DRV, T)
        self.wait_slices(api, 4)
        wait_for(lambda: get(addr, "/healthz")[0] == 200, T, "/healthz 200")
        self.assertEqual(get(addr, "/healthz")[2], "ok\n")
        fams = parse(get(addr, "/metrics")[2])
        self.assertEqual(value(fams, "kdp_plugin_up", resource=DRV)["value"], 1)
        # the kubelet's own socket only: no plugin socket, no lock file
        self.assertEqual(os.listdir(self.path("root", "device-plugins")), ["kubelet.sock"])
        self.assertNotIn("kubelet.sock", drv.log_text())
        self.assertNotIn("device-plugin", drv.log_text())

    def test_dra_only_driver_no_socket_limits(self):
        """A DRA-only driver makes no device-plugin socket: a device-plugin
        directory whose socket paths would be too long does not stop it."""
        api = self.api()
        kl = self.kubelet()
        long_dir = self.path("d" * 100)
        self.start_proc(TestDriver(self, api, env={"KDP_DEVICE_PLUGIN_DIR": long_dir}))
        kl.wait_dra_registered(DRV, T)
        self.wait_slices(api, 4)

    def test_dra_only_driver_refuses_device_plugin_fields(self):
        api = self.api()
        d = self.start_proc(TestDriver(self, api, ["--resource", "example.com/x"]))
        self.assertNotEqual(d.wait_exit(T), 0)
        self.assertIn("kdp_dra_driver_new: kdp_config.resource_name is for the device-plugin API, "
                      "which a DRA-only driver does not serve", d.log_text())

    def test_bad_driver_name(self):
        d = self.start_proc(Proc([binary("kdp-example-gopher-dra"), "--devices-dir",
                                  self.path("gophers"), "--kubelet-root", self.path("root"),
                                  "--dra", "Not_A_Name", "--node", NODE]))
        self.assertNotEqual(d.wait_exit(T), 0)
        self.assertIn("kdp_dra_config.driver_name", d.log_text())


if __name__ == "__main__":
    unittest.main()
