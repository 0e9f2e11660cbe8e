#!/usr/bin/python3
"""Binding conditions (KEP-5007) end to end, the driver's side:
kdp-test-dra-driver declares them and has a bind op; the API-server
emulator allocates claims as the scheduler would (the lists copied into the
results) and answers the scheduler's PreBind check (binding-state).

usage: KDP_BIN_DIR=<build>/bin /usr/bin/python3 test_binding.py [-v]
"""

import os
import sys
import time
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_dra import DRV, NODE, SRC, Base, TestDriver  # noqa: E402
from kdptest import T  # noqa: E402

ATTACHED = "example.com/attached"
FAILED = "example.com/attach-failed"
DECLARE = ["--binding-conditions", ATTACHED, "--binding-failure-conditions", FAILED]


class Binding(Base):
    def up(self, mode):
        """The emulators and the driver with its bind op in mode, its
        slices published."""
        api = self.api()
        kl = self.kubelet()
        drv = self.start_proc(TestDriver(self, api, DECLARE + ["--bind", mode]))
        kl.wait_dra_registered(DRV, T)
        self.wait_slices(api, 4)
        return api, kl, drv

    def claim(self, api, name, devices):
        return api.create_claim("default", name, DRV, NODE, "gpu", devices,
                                binding_conditions=[ATTACHED], binding_failure_conditions=[FAILED])

    def wait_state(self, api, name, want):
        deadline = time.time() + T
        while True:
            st = api.binding_state("default", name)
            if st["state"] == want:
                return st
            if time.time() > deadline:
                self.fail("claim %s: binding %s, not %s" % (name, st, want))
            time.sleep(0.05)

    def entry(self, api, name, device):
        c = [x for x in api.claims() if x["metadata"]["name"] == name][0]
        for d in c.get("status", {}).get("devices") or []:
            if d["device"] == device:
                return d
        return None

    def test_bind_op_sets_the_conditions(self):
        """The watch sees a claim allocated a device with binding
        conditions: the bind op runs once, its status makes the claim ready
        for the scheduler; the kubelet's prepare and unprepare afterwards
        keep the condition; a claim without them gets no bind op; the claim
        deleted, the unbind op runs."""
        api, kl, drv = self.up("ok")
        uid = self.claim(api, "c1", ["dev-0"])
        drv.wait_log("bind %s dev-0$" % uid, T)
        drv.wait_log(r"status bind dev-0: 0$", T)
        self.wait_state(api, "c1", "ready")
        cond = self.entry(api, "c1", "dev-0")["conditions"][0]
        self.assertEqual((cond["type"], cond["status"], cond["reason"]),
                         (ATTACHED, "True", "Attached"))
        # the pod bound: the kubelet prepares; the entry stays
        r = kl.dra_prepare(DRV, ["default/c1/" + uid])
        self.assertEqual(r["by_uid"][uid]["result"], "prepared", r)
        time.sleep(0.3)
        self.assertEqual(self.entry(api, "c1", "dev-0")["conditions"][0]["type"], ATTACHED)
        self.assertEqual(api.binding_state("default", "c1")["state"], "ready")
        self.assertEqual(drv.count_log("bind " + uid), 1)
        # the pod gone, the claim still allocated: its binding conditions
        # hold (another pod may use the claim)
        r = kl.dra_unprepare(DRV, ["default/c1/" + uid])
        self.assertEqual(r["by_uid"][uid]["result"], "unprepared", r)
        time.sleep(0.3)
        self.assertEqual(api.binding_state("default", "c1")["state"], "ready")
        # no binding conditions: no bind op
        plain = api.create_claim("default", "c2", DRV, NODE, "gpu", ["dev-1"])
        r = kl.dra_prepare(DRV, ["default/c2/" + plain])
        self.assertEqual(r["by_uid"][plain]["result"], "prepared", r)
        self.assertEqual(drv.count_log("bind " + plain), 0)
        # the claim deleted: its allocation ended, the unbind op detaches
        code, body = api.http("DELETE", "/apis/resource.k8s.io/v1/namespaces/default/"
                              "resourceclaims/c1")
        self.assertEqual(code, 200, body)
        drv.wait_log("unbind %s dev-0$" % uid, T)
        self.assertEqual(drv.count_log("unbind " + plain), 0)

    def test_bind_op_fails(self):
        """A bind op that fails sets the device's first failure condition
        with its error: the scheduler's check says failed."""
        api, kl, drv = self.up("fail")
        uid = self.claim(api, "c1", ["dev-2"])
        drv.wait_log("bind %s dev-2$" % uid, T)
        st = self.wait_state(api, "c1", "failed")
        self.assertEqual(st["condition"], FAILED, st)
        self.assertEqual(st["reason"], "BindFailed", st)
        self.assertIn("no fabric port for dev-2", st["message"])
        drv.wait_log("its bind op failed: its binding failure conditions set", T)

    def test_pending_claim_after_a_restart(self):
        """A claim still pending when the driver restarts gets the bind op
        again (the watch lists it); one met already does not."""
        api, kl, drv = self.up("later")
        pending = self.claim(api, "c1", ["dev-0"])
        drv.wait_log("bind %s dev-0$" % pending, T)
        self.assertEqual(api.binding_state("default", "c1")["state"], "pending")
        self.assertEqual(drv.stop(), 0)
        mark = kl.mark()
        drv = self.start_proc(TestDriver(self, api, DECLARE + ["--bind", "ok"]))
        kl.wait_event("dra_registered", T, since=mark, driver=DRV)
        drv.wait_log("bind %s dev-0$" % pending, T)
        self.wait_state(api, "c1", "ready")
        self.assertEqual(drv.stop(), 0)
        drv = self.start_proc(TestDriver(self, api, DECLARE + ["--bind", "ok"]))
        drv.wait_log("slices published", T)
        met = self.claim(api, "c2", ["dev-1"])
        drv.wait_log("bind %s dev-1$" % met, T)
        self.wait_state(api, "c2", "ready")
        self.assertEqual(drv.count_log("bind " + pending), 0)  # met: left alone

    def test_watch_refused(self):
        """Without list and watch on resourceclaims, the log names the RBAC
        rule; granted, the watch starts and the claim is bound. Without a
        bind op there is no watch at all."""
        api = self.api()
        kl = self.kubelet()
        api.ok("forbid list resourceclaims")
        drv = self.start_proc(TestDriver(self, api, DECLARE + ["--bind", "ok"]))
        kl.wait_dra_registered(DRV, T)
        drv.wait_log("cannot watch the cluster's ResourceClaims .*grant list and watch on "
                     "resourceclaims.resource.k8s.io", T)
        api.ok("allow list resourceclaims")
        uid = self.claim(api, "c1", ["dev-0"])
        drv.wait_log("bind %s dev-0$" % uid, T + 35)  # the backoff is at most 30 s
        self.assertEqual(drv.stop(), 0)
        mark = api.mark()
        drv = self.start_proc(TestDriver(self, api, DECLARE))
        drv.wait_log("slices published", T)
        api.sync()
        self.assertEqual(api.requests(mark, verb="list", resource="resourceclaims"), [])
        self.assertEqual(api.requests(mark, verb="watch", resource="resourceclaims"), [])

    def test_watch_ended_and_expired(self):
        """The claim watch ended by the server is opened again from where it
        was (no list); ended with 410 Gone after the events were forgotten,
        the claims are listed again; a claim deleted meanwhile is dropped,
        and the claims after it are bound."""
        api, kl, drv = self.up("ok")
        uid = self.claim(api, "c1", ["dev-0"])
        drv.wait_log("bind %s dev-0$" % uid, T)
        mark = api.mark()
        api.ok("expire-watches")
        api.wait_event("request", T, since=mark, verb="watch", resource="resourceclaims")
        api.sync()
        self.assertEqual(api.requests(mark, verb="list", resource="resourceclaims"), [])
        mark = api.mark()
        api.ok("compact")
        api.ok("expire-watches 410")
        api.wait_event("request", T, since=mark, verb="list", resource="resourceclaims")
        uid2 = self.claim(api, "c2", ["dev-1"])
        drv.wait_log("bind %s dev-1$" % uid2, T)
        self.wait_state(api, "c2", "ready")
        self.assertEqual(drv.count_log("bind " + uid), 1)  # met: no second bind op

    def test_rbac_covers_calls(self):
        """A bind driver's calls (slices, the claim watch, the bind op's
        status, a prepare and unprepare) are granted by deploy/dra/rbac.yaml
        with rbac-bind.yaml, and rbac-bind.yaml grants nothing unused."""
        import yaml
        granted = {}
        for name in ("rbac.yaml", "rbac-bind.yaml"):
            with open(os.path.join(SRC, "deploy", "dra", name)) as f:
                docs = [d for d in yaml.safe_load_all(f) if d]
            role = [d for d in docs if d["kind"] == "ClusterRole"][0]
            granted[name] = {(v, res) for r in role["rules"] for res in r["resources"]
                             for v in r["verbs"]}
        api, kl, drv = self.up("ok")
        uid = self.claim(api, "c1", ["dev-0"])
        self.wait_state(api, "c1", "ready")
        claim = ["default/c1/" + uid]
        self.assertEqual(kl.dra_prepare(DRV, claim)["by_uid"][uid]["result"], "prepared")
        self.assertEqual(kl.dra_unprepare(DRV, claim)["by_uid"][uid]["result"], "unprepared")
        self.assertEqual(drv.stop(), 0)
        api.sync()
        used = {(r["verb"], r["resource"]) for r in api.requests()
                if r.get("resource") and r["code"] < 500}
        all_granted = granted["rbac.yaml"] | granted["rbac-bind.yaml"]
        self.assertEqual(sorted(used - all_granted), [], "calls the manifests do not grant")
        self.assertEqual(sorted(granted["rbac-bind.yaml"] - used), [],
                         "granted but never called: remove them from deploy/dra/rbac-bind.yaml")


if __name__ == "__main__":
    unittest.main()
