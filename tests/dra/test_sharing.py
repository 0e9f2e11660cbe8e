#!/usr/bin/env python3
"""Sharing end to end: kdp-example-accel (partitions of cards with counter
sets, a card shared with consumable capacity) between the kubelet emulator
(tests/kubelet) and the API-server emulator (tests/apiserver), which
validates the 1.37 fields as the API server does; kubectl and
python3-kubernetes read the slices back."""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from kdptest import T, Proc, ProcTest, binary  # noqa: E402
from kdptest.apiserver import ApiServer  # noqa: E402
from kdptest.kubelet import Kubelet  # noqa: E402

DRV = "accel.example.com"
NODE = "node-a"
KUBECTL = shutil.which("kubectl")
SHARE_A = "11111111-1111-4111-8111-111111111111"
SHARE_B = "22222222-2222-4222-8222-222222222222"

try:
    from kubernetes import client as kclient  # noqa: E402
    from kubernetes import config as kconfig  # noqa: E402
except ImportError:  # pragma: no cover
    kclient = None


class Accel(Proc):
    """kdp-example-accel: what it prints of each prepare is on stdout."""

    def __init__(self, test, api, args=()):
        argv = [binary("kdp-example-accel"), "--kubelet-root", test.path("root"),
                "--kubeconfig", api.kubeconfig_token, "--node", NODE,
                "--cdi-dir", test.path("cdi")] + list(args)
        env = {k: v for k, v in os.environ.items()
               if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "NODE_NAME", "POD_UID")}
        super().__init__(argv, name="accel", env=env)

    def wait_out(self, text, timeout=T):
        return self.wait_line(re.escape(text), timeout, since=0)


class Sharing(ProcTest):
    TEST_BOUND = 90.0

    def setUp(self):
        super().setUp()
        for d in ("root/device-plugins", "root/plugins_registry", "cdi"):
            os.makedirs(self.path(d), exist_ok=True)

    def up(self, cards=2, shared=1, kubelet=True):
        api = self.start_proc(ApiServer(self.path("api"), nodes=[NODE]))
        kl = None
        if kubelet:
            kl = self.start_proc(Kubelet(self.path("root", "device-plugins"),
                                         registry=self.path("root", "plugins_registry")))
        drv = self.start_proc(Accel(self, api, ["--cards", str(cards), "--shared", str(shared)]))
        if kl:
            kl.wait_dra_registered(DRV, T)
        return api, kl, drv

    def slices(self, api):
        return [s for s in api.slices() if s["spec"]["driver"] == DRV]

    def wait_pool(self, api, n_devices, n_sets, since_gen=0):
        """The pool complete at one generation: its slices, all of them."""
        deadline = time.time() + T
        while True:
            mine = self.slices(api)
            gens = {s["spec"]["pool"]["generation"] for s in mine}
            devs = sum(len(s["spec"].get("devices") or []) for s in mine)
            sets = sum(len(s["spec"].get("sharedCounters") or []) for s in mine)
            if (len(gens) == 1 and gens.pop() > since_gen and devs == n_devices and sets == n_sets
                    and all(s["spec"]["pool"]["resourceSliceCount"] == len(mine) for s in mine)):
                return mine
            self.assertLess(time.time(), deadline, "pool not complete: %s" % json.dumps(mine)[:2000])
            time.sleep(0.05)

    def cdi_env(self, uid):
        """The env of every device of a claim's CDI spec, by device name."""
        out = {}
        for p in glob.glob(self.path("cdi", "*%s*.json" % uid)):
            with open(p) as f:
                spec = json.load(f)
            for d in spec["devices"]:
                out[d["name"]] = sorted(d["containerEdits"].get("env", []))
        return out

    def test_partitions_published_and_split(self):
        """8 cards of 15 partitions and a shared card: every partition
        consumes its card's counters; slices with consuming devices hold 64
        at most, counter sets go in slices of their own (8 each), all at one
        generation. 20 cards: 5 device slices, 3 of counter sets."""
        api, _, drv = self.up(cards=8, shared=1, kubelet=False)
        t0 = time.time()
        mine = self.wait_pool(api, 8 * 15 + 1, 8)
        took = time.time() - t0
        with_devs = [s for s in mine if s["spec"].get("devices")]
        with_sets = [s for s in mine if s["spec"].get("sharedCounters")]
        self.assertEqual((len(with_devs), len(with_sets)), (2, 1))
        for s in mine:
            self.assertFalse(s["spec"].get("devices") and s["spec"].get("sharedCounters"))
            self.assertLessEqual(len(s["spec"].get("devices") or []), 64)
        devs = {d["name"]: d for s in with_devs for d in s["spec"]["devices"]}
        self.assertEqual(devs["card3-half-1"]["consumesCounters"],
                         [{"counterSet": "card-3", "counters": {"memory": {"value": "40Gi"},
                                                                "slices": {"value": "3"}}}])
        self.assertEqual(devs["card3"]["consumesCounters"][0]["counters"]["slices"], {"value": "7"})
        self.assertEqual(devs["card3-seventh-6"]["attributes"]["profile"], {"string": "seventh"})
        sets = {c["name"]: c["counters"] for c in with_sets[0]["spec"]["sharedCounters"]}
        self.assertEqual(sets["card-7"], {"memory": {"value": "80Gi"}, "slices": {"value": "7"}})
        shared = devs["shared0"]
        self.assertTrue(shared["allowMultipleAllocations"])
        self.assertEqual(shared["capacity"]["memory"]["requestPolicy"],
                         {"default": "8Gi", "validRange": {"min": "1Gi", "step": "1Gi"}})
        self.assertEqual(shared["capacity"]["compute"]["requestPolicy"],
                         {"default": "10", "validValues": ["10", "25", "50", "100"]})
        self.assertNotIn("consumesCounters", shared)
        drv.wait_log(re.escape("121 device(s) and 8 counter set(s) of %s published in 3 "
                               "ResourceSlice(s)" % DRV), T)
        sys.stderr.write("figure: 8 cards x 15 partitions + 1 shared: 3 slices, published in %.0f ms "
                         "(from the driver's start)\n" % (took * 1000))
        self.assertEqual(drv.stop(), 0)
        # more cards: the same pool, split again at the next generation
        gen = mine[0]["spec"]["pool"]["generation"]
        drv = self.start_proc(Accel(self, api, ["--cards", "20", "--shared", "0"]))
        mine = self.wait_pool(api, 300, 20, since_gen=gen)
        self.assertEqual(sorted(len(s["spec"].get("devices") or []) for s in mine),
                         [0, 0, 0, 44, 64, 64, 64, 64])
        self.assertEqual(sorted(len(s["spec"].get("sharedCounters") or []) for s in mine),
                         [0, 0, 0, 0, 0, 4, 8, 8])

    def test_overlapping_partitions_two_claims(self):
        """A half and a seventh of one card (they overlap the whole card and
        each other's siblings, the scheduler keeps the books) allocated to
        two claims, each prepared with its own partition; a third claim for
        the same half is refused, naming both claims."""
        api, kl, drv = self.up(cards=1, shared=0)
        self.wait_pool(api, 15, 1)
        a = api.create_claim("default", "half", DRV, NODE, "acc", ["card0-half-1"])
        b = api.create_claim("default", "seventh", DRV, NODE, "acc", ["card0-seventh-6"])
        r = kl.dra_prepare(DRV, ["default/half/" + a, "default/seventh/" + b])
        self.assertEqual([r["by_uid"][u]["result"] for u in (a, b)], ["prepared"] * 2, r)
        drv.wait_out("accel: prepare default/half: card0-half-1: card 0, half (3 slices, 40Gi)", T)
        drv.wait_out("accel: prepare default/seventh: card0-seventh-6: card 0, seventh (1 slices, 10Gi)", T)
        self.assertEqual(self.cdi_env(a), {a + "-card0-half-1": ["ACCEL_0=card0-half-1"]})
        self.assertEqual(self.cdi_env(b), {b + "-card0-seventh-6": ["ACCEL_0=card0-seventh-6"]})
        c = api.create_claim("default", "again", DRV, NODE, "acc", ["card0-half-1"])
        r = kl.dra_prepare(DRV, ["default/again/" + c])
        err = r["by_uid"][c]["error"]
        self.assertIn("card0-half-1", err)
        self.assertIn("default/half", err)
        self.assertIn("default/again", err)
        r = kl.dra_unprepare(DRV, ["default/half/" + a])
        self.assertEqual(r["by_uid"][a]["result"], "unprepared", r)
        self.assertEqual(self.cdi_env(a), {})
        self.assertEqual(self.cdi_env(b), {b + "-card0-seventh-6": ["ACCEL_0=card0-seventh-6"]})

    def test_shares_independent_and_kept_across_a_restart(self):
        """Two claims share one card, each with its share ID and what it
        consumed: each prepared with its own CDI device and values; one
        unprepared leaves the other; after a restart the other is still
        recorded (the checkpoint keeps its share and consumption) and its
        unprepare sees them."""
        api, kl, drv = self.up(cards=0, shared=1)
        self.wait_pool(api, 1, 0)
        a = api.create_claim("default", "small", DRV, NODE, "acc", ["shared0"], share_id=SHARE_A,
                             consumed={"memory": "8Gi", "compute": "10"})
        b = api.create_claim("default", "big", DRV, NODE, "acc", ["shared0"], share_id=SHARE_B,
                             consumed={"memory": "48Gi", "compute": "50"})
        r = kl.dra_prepare(DRV, ["default/small/" + a, "default/big/" + b])
        self.assertEqual([r["by_uid"][u]["result"] for u in (a, b)], ["prepared"] * 2, r)
        self.assertEqual(r["by_uid"][b]["devices"][0]["share_id"], SHARE_B)
        self.assertEqual(r["by_uid"][b]["devices"][0]["cdi_device_ids"],
                         ["k8s.%s/claim=%s-shared0-%s" % (DRV, b, SHARE_B)])
        drv.wait_out("accel: prepare default/small: shared0 share %s: memory 8Gi, compute 10" % SHARE_A, T)
        drv.wait_out("accel: prepare default/big: shared0 share %s: memory 48Gi, compute 50" % SHARE_B, T)
        self.assertEqual(self.cdi_env(b), {"%s-shared0-%s" % (b, SHARE_B): [
            "ACCEL_0=shared0", "ACCEL_0_COMPUTE=50", "ACCEL_0_MEMORY=48Gi", "ACCEL_0_SHARE=" + SHARE_B]})
        r = kl.dra_unprepare(DRV, ["default/small/" + a])
        self.assertEqual(r["by_uid"][a]["result"], "unprepared", r)
        drv.wait_out("accel: unprepare default/small: shared0 share " + SHARE_A, T)
        self.assertEqual(self.cdi_env(a), {})
        files = glob.glob(self.path("root", "plugins", DRV, "claims", "*.json"))
        self.assertEqual([os.path.basename(p) for p in files], [b + ".json"])
        with open(files[0]) as f:
            dev = json.load(f)["claim"]["devices"][0]
        self.assertEqual((dev["share_id"], dev["consumed"]), (SHARE_B, {"memory": "48Gi", "compute": "50"}))
        self.assertEqual(drv.stop(), 0)
        drv = self.start_proc(Accel(self, api, ["--cards", "0", "--shared", "1"]))
        kl.wait_dra_registered(DRV, T)
        # the claim is gone from the API server: the unprepare works from the record
        api.ok("delete-claim default big")
        r = kl.dra_unprepare(DRV, ["default/big/" + b])
        self.assertEqual(r["by_uid"][b]["result"], "unprepared", r)
        drv.wait_out("accel: unprepare default/big: shared0 share " + SHARE_B, T)
        self.assertEqual(self.cdi_env(b), {})

    def test_shared_card_without_a_share_id(self):
        """A claim of a shared card without a share ID (not what the scheduler writes, but
        what an API server may hold): prepared as the whole card, the driver unhurt."""
        api, kl, drv = self.up(cards=0, shared=1)
        self.wait_pool(api, 1, 0)
        u = api.create_claim("default", "whole", DRV, NODE, "acc", ["shared0"])
        r = kl.dra_prepare(DRV, ["default/whole/" + u])
        self.assertEqual(r["by_uid"][u]["result"], "prepared", r)
        drv.wait_out("accel: prepare default/whole: shared0: shared card 0, whole", T)
        r = kl.dra_unprepare(DRV, ["default/whole/" + u])
        self.assertEqual(r["by_uid"][u]["result"], "unprepared", r)
        self.assertTrue(drv.alive())

    def test_clients_read_the_new_fields(self):
        """kubectl and python3-kubernetes read the counter sets, the
        consumptions and the request policies back."""
        api, _, _ = self.up(cards=1, shared=1, kubelet=False)
        self.wait_pool(api, 16, 1)
        self.assertTrue(KUBECTL, "kubectl is not installed")
        env = dict(os.environ, HOME=self.path("home"))
        env.pop("KUBECONFIG", None)
        out = subprocess.run([KUBECTL, "--kubeconfig", api.kubeconfig_token, "--cache-dir",
                              self.path("kubecache"), "get", "resourceslices", "-o", "yaml"],
                             capture_output=True, text=True, timeout=60, env=env, check=True).stdout
        for words in ("sharedCounters:", "consumesCounters:", "counterSet: card-0",
                      "allowMultipleAllocations: true", "requestPolicy:", "validRange:"):
            self.assertIn(words, out)
        self.assertIsNotNone(kclient, "python3-kubernetes is not installed")
        c = kconfig.new_client_from_config(config_file=api.kubeconfig_token)
        self.addCleanup(c.close)
        items = kclient.CustomObjectsApi(c).list_cluster_custom_object(
            "resource.k8s.io", "v1", "resourceslices")["items"]
        sets = [x for s in items for x in s["spec"].get("sharedCounters") or []]
        self.assertEqual(sets, [{"name": "card-0", "counters": {"memory": {"value": "80Gi"},
                                                                "slices": {"value": "7"}}}])
        devs = {d["name"]: d for s in items for d in s["spec"].get("devices") or []}
        self.assertEqual(devs["card0-2g-2"]["consumesCounters"][0]["counters"]["memory"], {"value": "20Gi"})
        self.assertEqual(devs["shared0"]["capacity"]["compute"]["requestPolicy"]["default"], "10")


if __name__ == "__main__":
    unittest.main()
