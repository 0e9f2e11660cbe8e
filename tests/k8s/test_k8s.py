#!/usr/bin/python3
"""The API-server side of kdp's DRA driver (src/k8s: kconfig, api, claims,
slices) through kdp-test-k8s (tests/k8s/k8s_driver.c), against the
API-server emulator (tests/apiserver, driven by kdptest.apiserver): the
ResourceSlices it publishes (checked with the emulator, kubectl and
python3-kubernetes, clients kdp did not write), re-publishing on change and
when someone else edits or deletes them, 409 storms, the API server down at
start and flapping, a rotated token, a 403 with its RBAC hint, a server that
serves v1beta1 only, discovery failures, and claims read at prepare.

usage: KDP_BIN_DIR=<build>/bin /usr/bin/python3 test_k8s.py [-v] [Test.name ...]
"""

import errno
import json
import os
import shutil
import subprocess
import sys
import time
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from kdptest import log, rss_kib  # noqa: E402
from kdptest.apiserver import ApiServer  # noqa: E402
from kdptest.proc import Proc, ProcTest, binary  # noqa: E402

DRIVER = "gpu.example.com"
NODE = "node-a"


class Driver(Proc):
    """kdp-test-k8s: commands on stdin, JSON events on stdout."""

    name = "kdp-test-k8s"

    def __init__(self, env=None):
        e = dict(os.environ)
        e.update(env or {})
        super().__init__([binary("kdp-test-k8s")], env=e)

    def config(self, path=None):
        m = self.mark()
        self.send("config" + (" " + path if path else ""))
        return self.wait_event("config", since=m)

    def status(self, pred, timeout=20, since=None):
        return self.wait_event(lambda e: e.get("event") == "status" and pred(e), timeout,
                               since=since)

    def published(self, devices, since=None, timeout=20):
        return self.status(lambda e: e["published"] and e["devices"] == devices,
                           timeout=timeout, since=since)

    def quit(self):
        self.send("quit")
        return self.wait_exit()


class K8sTest(ProcTest):
    TEST_BOUND = 150.0

    def api(self, **kw):
        return self.start_proc(ApiServer(self.path("api"), nodes=[NODE], **kw))

    def driver(self, api, config="kubeconfig_token", env=None):
        d = self.start_proc(Driver(env))
        ev = d.config(getattr(api, config) if config else None)
        self.assertEqual(ev["err"], 0, ev)
        return d

    def start_slices(self, d, resync_ms=600000):
        d.send("slices %s %s %d" % (DRIVER, NODE, resync_ms))

    def node_uid(self, api):
        code, node = api.http("GET", "/api/v1/nodes/" + NODE)
        self.assertEqual(code, 200)
        return node["metadata"]["uid"]

    def check_pool(self, api, ndev, gen=None, model="m-a", version="v1"):
        """The node's slices as the emulator holds them (v1 objects)."""
        slices = [s for s in api.slices() if s["spec"]["driver"] == DRIVER]
        want = max(1, (ndev + 127) // 128)
        self.assertEqual(len(slices), want, [s["metadata"]["name"] for s in slices])
        uid = self.node_uid(api)
        gens = {s["spec"]["pool"]["generation"] for s in slices}
        self.assertEqual(len(gens), 1, "one generation across the pool: %s" % gens)
        if gen is not None:
            self.assertEqual(gens, {gen})
        names = []
        for s in slices:
            spec, meta = s["spec"], s["metadata"]
            self.assertEqual(spec["nodeName"], NODE)
            self.assertEqual(spec["pool"]["name"], NODE)
            self.assertEqual(spec["pool"]["resourceSliceCount"], want)
            self.assertTrue(meta["name"].startswith("node-a-gpu-example-com-"), meta["name"])
            self.assertEqual(meta["ownerReferences"],
                             [{"apiVersion": "v1", "kind": "Node", "name": NODE, "uid": uid,
                               "controller": True}])
            self.assertLessEqual(len(spec.get("devices") or []), 128)
            for dev in spec.get("devices") or []:
                names.append(dev["name"])
                self.assertEqual(dev["attributes"]["model"], {"string": model})
                self.assertEqual(dev["capacity"]["memory"], {"value": "1Gi"})
        self.assertEqual(sorted(names), ["dev-%03d" % i for i in range(ndev)])
        return slices

    # -- publishing ----------------------------------------------------------

    def test_publish_change_and_idle(self):
        api = self.api()
        d = self.driver(api)
        self.start_slices(d)
        d.send("set 300")
        t0 = time.monotonic()
        st = d.published(300)
        log("300 devices published in %.0f ms" % ((time.monotonic() - t0) * 1000))
        self.assertEqual((st["slices"], st["generation"], st["version"]), (3, 1, "v1"))
        slices = self.check_pool(api, 300, gen=1)
        self.assertEqual(sorted(len(s["spec"]["devices"]) for s in slices), [44, 128, 128])
        self.check_clients(api, 3)

        # a change: re-published with a higher generation
        m = d.mark()
        d.send("set 300 b")
        st = d.status(lambda e: e["published"] and e["generation"] == 2, since=m)
        self.check_pool(api, 300, gen=2, model="m-b")
        # fewer devices: the obsolete slices are deleted, first
        api.sync()
        m, am = d.mark(), api.mark()
        d.send("set 100 b")
        st = d.status(lambda e: e["published"] and e["devices"] == 100, since=m)
        self.assertEqual((st["slices"], st["generation"]), (1, 3))
        self.check_pool(api, 100, gen=3, model="m-b")
        api.sync()
        writes = [e["verb"] for e in api.requests(am) if e["resource"] == "resourceslices"
                  and e["verb"] in ("create", "update", "delete")]
        self.assertEqual(writes, ["delete", "delete", "update"], writes)
        # the same devices again: nothing written
        api.sync()
        m, am = d.mark(), api.mark()
        d.send("set 100 b")
        d.wait_event("set", since=m)
        time.sleep(0.5)
        self.assertEqual([e for e in api.requests(am, resource="resourceslices")
                          if e["verb"] != "watch"], [])
        # an empty pool is still one slice
        m = d.mark()
        d.send("set 0")
        d.published(0, since=m)
        self.check_pool(api, 0)

        # idle and published: the watch open, no call, no wakeup but the
        # resync timer (curl's stale connect timer may fire once, 10 s after
        # the connection opened: wait it out)
        time.sleep(max(0, 11 - (time.monotonic() - t0)))
        m = d.mark()
        d.send("idle 2000")
        start = d.wait_event("idle_start", since=m)
        idle = d.wait_event("idle", since=m, timeout=10)
        log("idle 2 s: %s (next timer %s ms before)" % (idle, start["next_timeout_ms"]))
        self.assertEqual(idle["wakeups"], 1, "only the test's own timer ran")
        self.assertEqual(idle["in_flight"], 1, "the watch")
        self.assertGreater(idle["next_timeout_ms"], 500000, "the resync timer only")
        self.assertEqual(d.quit(), 0)

    def check_clients(self, api, n):
        """kubectl and python3-kubernetes see the slices too."""
        kubectl = shutil.which("kubectl")
        if kubectl:
            # its own discovery cache, not one in $HOME of another server on this port
            p = subprocess.run([kubectl, "--kubeconfig", api.kubeconfig_token, "--cache-dir",
                                self.path("kubecache"), "get", "resourceslices", "-o", "json"],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(p.returncode, 0, p.stderr)
            items = json.loads(p.stdout)["items"]
            self.assertEqual(len([i for i in items if i["spec"]["driver"] == DRIVER]), n)
            log("kubectl get resourceslices: %d" % len(items))
        code = ("import sys, kubernetes as k\n"
                "c = k.config.new_client_from_config(sys.argv[1])\n"
                "r = k.client.CustomObjectsApi(c).list_cluster_custom_object("
                "'resource.k8s.io', 'v1', 'resourceslices',"
                " field_selector='spec.nodeName=%s,spec.driver=%s')\n"
                "print(len(r['items']), sum(len(i['spec']['devices']) for i in r['items']))\n"
                % (NODE, DRIVER))
        p = subprocess.run(["/usr/bin/python3", "-c", code, api.kubeconfig_token],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        log("python3-kubernetes: %s" % p.stdout.strip())
        self.assertEqual(p.stdout.split()[0], str(n))

    def test_someone_else_edits_or_deletes(self):
        api = self.api()
        d = self.driver(api)
        self.start_slices(d)
        d.send("set 200")
        d.published(200)
        slices = self.check_pool(api, 200, gen=1)
        # deleted: put back (a new slice; the pool moves to a new generation)
        m = d.mark()
        lm = d.log_mark()
        api.ok("delete " + slices[0]["metadata"]["name"])
        d.wait_log("deleted by someone else", since=lm)
        d.status(lambda e: e["published"] and e["generation"] > 1, since=m)
        self.check_pool(api, 200)
        # a device dropped, and the generation raised by someone else
        for how in ("drop-device", "generation", "attribute"):
            slices = self.check_pool(api, 200)
            gen = slices[0]["spec"]["pool"]["generation"]
            m = d.mark()
            api.ok("edit %s %s" % (slices[-1]["metadata"]["name"], how))
            d.status(lambda e: e["published"] and e["generation"] > gen, since=m)
            after = self.check_pool(api, 200)
            self.assertGreater(after[0]["spec"]["pool"]["generation"], gen)
        # the watch ended with 410: listed and watched again, still right
        api.sync()
        am = api.mark()
        api.ok("expire-watches 410")
        api.wait_event("request", verb="list", resource="resourceslices", since=am)
        api.wait_event("watch_open", resource="resourceslices", since=am)
        slices = self.check_pool(api, 200)
        m = d.mark()
        api.ok("delete " + slices[0]["metadata"]["name"])
        d.status(lambda e: e["published"], since=m)
        self.check_pool(api, 200)
        self.assertEqual(d.quit(), 0)

    def test_generation_at_its_bounds(self):
        """A pool generation someone set to int64's maximum (the API refuses
        a negative one): the next round publishes at the maximum again,
        never an overflow (which the API server would refuse)."""
        api = self.api()
        d = self.driver(api)
        self.start_slices(d)
        d.send("set 10")
        d.published(10)
        model = "m-a"
        for gen, then in ((2**63 - 1, 2**63 - 1),):
            sl = self.check_pool(api, 10, model=model)[0]
            name = sl["metadata"]["name"]
            sl["spec"]["pool"]["generation"] = gen
            m = d.mark()
            code, body = api.http("PUT", "/apis/resource.k8s.io/v1/resourceslices/" + name, sl)
            self.assertEqual(code, 200, body)
            d.send("set 10 b")  # a change: a new round
            d.status(lambda e: e["published"] and e["generation"] == then, since=m)
            model = "m-b"
            deadline = time.monotonic() + 20
            while True:  # the status may be the one of the PUT seen by the watch
                sl = [x for x in api.slices() if x["spec"]["driver"] == DRIVER]
                if all(dv["attributes"]["model"] == {"string": model}
                       for x in sl for dv in x["spec"].get("devices") or []):
                    break
                self.assertLess(time.monotonic(), deadline, sl)
                time.sleep(0.05)
            self.check_pool(api, 10, gen=then, model=model)
        self.assertEqual(d.quit(), 0)

    def test_resync_backstop(self):
        """The periodic list (here every second) runs as a backstop to the
        watch, and writes nothing while the pool is as wanted."""
        api = self.api()
        d = self.driver(api)
        self.start_slices(d, resync_ms=1000)
        d.send("set 3")
        d.published(3)
        api.sync()  # the publishing writes' lines read before the mark
        am = api.mark()
        time.sleep(3.5)
        lists = [e for e in api.requests(am, resource="resourceslices") if e["verb"] == "list"]
        writes = [e for e in api.requests(am, resource="resourceslices")
                  if e["verb"] in ("create", "update", "delete")]
        self.assertGreaterEqual(len(lists), 2, lists)
        self.assertLessEqual(len(lists), 5, lists)
        self.assertEqual(writes, [])
        self.assertEqual(d.quit(), 0)

    def test_conflict_storm(self):
        api = self.api()
        d = self.driver(api)
        self.start_slices(d)
        d.send("set 300")
        d.published(300)
        api.ok("conflict 6")
        m = d.mark()
        lm = d.log_mark()
        t0 = time.monotonic()
        d.send("set 300 c")
        d.status(lambda e: e["published"] and e["generation"] >= 2, since=m, timeout=40)
        log("converged after 6 conflicts in %.1f s" % (time.monotonic() - t0))
        self.check_pool(api, 300, model="m-c")
        self.assertGreaterEqual(api.stats()["conflicts"], 6)
        # logged once, not per retry
        self.assertEqual(d.count_log(r"conflict: listing again", since=lm), 1, d.log_text())
        self.assertEqual(d.quit(), 0)

    def test_down_at_start_and_flapping(self):
        api = self.api()
        api.ok("down")
        d = self.driver(api)
        self.start_slices(d)
        d.send("set 10")
        st = d.status(lambda e: "unreachable" in e["error"])
        self.assertFalse(st["published"])
        time.sleep(2)  # several retries
        self.assertEqual(d.count_log(r"unreachable"), 1, "logged once: " + d.log_text())
        m = d.mark()
        api.ok("up")
        d.published(10, since=m, timeout=40)
        self.check_pool(api, 10)
        d.wait_log(r"the API server answers again")
        # flapping: down, a change, up; down and up again
        for i, tag in enumerate(("x", "y")):
            api.ok("down")
            m = d.mark()
            d.send("set 10 " + tag)
            time.sleep(0.5)
            api.ok("up")
            d.status(lambda e: e["published"], since=m, timeout=40)
            self.check_pool(api, 10, model="m-" + tag)
        # the watch is back after the flaps: someone else's delete is seen
        api.wait_event("watch_open", resource="resourceslices")
        slices = self.check_pool(api, 10, model="m-y")
        m = d.mark()
        api.ok("delete " + slices[0]["metadata"]["name"])
        d.status(lambda e: e["published"], since=m, timeout=40)
        self.check_pool(api, 10, model="m-y")
        self.assertEqual(d.quit(), 0)

    def test_token_rotated_in_cluster(self):
        api = self.api(token_grace=0)
        env = api.incluster_env()
        env["KDP_SERVICEACCOUNT_DIR"] = api.serviceaccount
        d = self.start_proc(Driver(env))
        ev = d.config()
        self.assertEqual((ev["err"], ev["source"]), (0, "in-cluster"), ev)
        self.start_slices(d)
        d.send("set 5")
        d.published(5)
        api.ok("token-rotate")  # the old token is refused at once
        api.sync()
        m, am = d.mark(), api.mark()
        d.send("set 5 r")
        d.status(lambda e: e["published"] and e["generation"] == 2, since=m)
        api.sync()
        codes = [e["code"] for e in api.requests(am) if e["verb"] == "update"]
        self.assertIn(401, codes, "the old token was refused once")
        self.assertEqual(codes[-1], 200)
        d.wait_log(r"token in .* changed")
        self.check_pool(api, 5, model="m-r")
        self.assertEqual(d.quit(), 0)

    def test_token_reread_periodically(self):
        """A rotated token is picked up before the old one stops working:
        the token file is re-read every minute (here 300 ms)."""
        api = self.api(token_grace=60)
        env = api.incluster_env()
        env["KDP_SERVICEACCOUNT_DIR"] = api.serviceaccount
        d = self.start_proc(Driver(env))
        self.assertEqual(d.config()["err"], 0)
        d.send("token-refresh 300")
        self.start_slices(d)
        d.send("set 2")
        d.published(2)
        api.ok("token-rotate")
        time.sleep(0.5)
        api.sync()
        m, am = d.mark(), api.mark()
        d.send("set 2 t")
        d.status(lambda e: e["published"] and e["generation"] == 2, since=m)
        api.sync()
        auths = {e["auth"] for e in api.requests(am) if e["verb"] == "update"}
        self.assertEqual(auths, {"token"}, "the new token, not the old one")
        self.assertEqual(d.quit(), 0)

    def test_forbidden_logged_with_rbac_hint(self):
        api = self.api()
        api.ok("forbid create resourceslices")
        d = self.driver(api)
        self.start_slices(d)
        d.send("set 3")
        st = d.status(lambda e: "grant create on resourceslices in resource.k8s.io" in e["error"])
        log("403: " + st["error"])
        time.sleep(1)
        self.assertEqual(d.count_log(r"grant create on resourceslices"), 1, d.log_text())
        m = d.mark()
        api.ok("allow create resourceslices")
        d.published(3, since=m, timeout=40)
        self.check_pool(api, 3)
        self.assertEqual(d.quit(), 0)

    def test_v1beta1_only(self):
        api = self.api(versions=["v1beta1"])
        d = self.driver(api, config="kubeconfig_cert")
        self.start_slices(d)
        d.send("set 130")
        st = d.published(130)
        self.assertEqual((st["version"], st["slices"]), ("v1beta1", 2))
        code, lst = api.http("GET", "/apis/resource.k8s.io/v1beta1/resourceslices")
        self.assertEqual(code, 200)
        for s in lst["items"]:
            for dev in s["spec"]["devices"]:
                self.assertIn("basic", dev)
                self.assertEqual(dev["basic"]["attributes"]["model"], {"string": "m-a"})
        self.check_pool(api, 130)  # the emulator's v1 view
        # a claim read through v1beta1: the same allocation shape
        uid = api.create_claim("ns1", "c1", DRIVER, NODE, "gpu", ["dev-003"], config={"a": 1})
        m = d.mark()
        d.send("claim v1beta1 %s %s ns1 c1 %s" % (DRIVER, NODE, uid))
        ev = d.wait_event("claim", since=m)
        self.assertEqual(ev["err"], 0, ev)
        self.assertEqual([(x["device"], x["configs"]) for x in ev["claim"]["devices"]],
                         [("dev-003", ['{"a":1}'])])
        self.assertEqual(d.quit(), 0)

    def test_discovery_failures(self):
        api = self.api()
        d = self.driver(api, config="kubeconfig_data")
        api.ok("fail 1 404 * discovery")
        m = d.mark()
        d.send("discover")
        ev = d.wait_event("discover", since=m)
        self.assertEqual(ev["err"], -errno.ENOTSUP, ev)
        self.assertIn("does not serve resource.k8s.io", ev["why"])
        m = d.mark()
        d.send("discover")
        ev = d.wait_event("discover", since=m)
        self.assertEqual((ev["err"], ev["version"]), (0, "v1"), ev)
        self.assertEqual(d.quit(), 0)

    # -- claims --------------------------------------------------------------

    def test_claims(self):
        api = self.api()
        d = self.driver(api)
        r = api.ok("create-claim ns1 c1 --driver %s --pool %s --request gpu --device dev-000,dev-001"
                   " --config {\"mode\":\"fast\"} --pool node-b --device dev-009"
                   " --driver nic.example.com --pool %s --request nic --device n0"
                   " --config {\"nic\":1}" % (DRIVER, NODE, NODE))
        uid = r["uid"]

        def claim(ns, name, uid):
            m = d.mark()
            d.send("claim v1 %s %s %s %s %s" % (DRIVER, NODE, ns, name, uid))
            return d.wait_event("claim", since=m)

        ev = claim("ns1", "c1", uid)
        self.assertEqual(ev["err"], 0, ev)
        c = ev["claim"]
        self.assertEqual((c["ns"], c["name"], c["uid"]), ("ns1", "c1", uid))
        self.assertEqual([(x["request"], x["device"]) for x in c["devices"]],
                         [("gpu", "dev-000"), ("gpu", "dev-001")])
        self.assertEqual(c["devices"][0]["configs"], ['{"mode":"fast"}'])
        # what a hostile API server answers is bounded: a claim is one object
        # (3 MiB; etcd keeps 1.5), and a dense one that would cost too much to
        # decode is refused before jansson sees it
        uid4 = api.ok("create-claim ns1 c4 --driver %s --pool %s --request gpu --device dev-000"
                      % (DRIVER, NODE))["uid"]
        api.ok("pad-claim ns1 c4 %d large" % (3 * 1024 * 1024 + 1))
        ev = claim("ns1", "c4", uid4)
        self.assertEqual(ev["err"], -errno.EMSGSIZE, ev)
        self.assertIn("over its bound of 3145728 bytes", ev["why"])
        uid3 = api.ok("create-claim ns1 c3 --driver %s --pool %s --request gpu --device dev-000"
                      % (DRIVER, NODE))["uid"]
        api.ok("pad-claim ns1 c3 %d dense" % (1024 * 1024))
        rss0 = rss_kib(d.proc.pid)
        ev = claim("ns1", "c3", uid3)
        self.assertEqual(ev["err"], -errno.EMSGSIZE, ev)
        self.assertIn("MiB to decode (bound 32 MiB): refused", ev["why"])
        self.assertLess(rss_kib(d.proc.pid) - rss0, 8 * 1024)
        # another UID: a newer claim of that name (128 characters, the
        # longest the DRA side takes: read, not refused at the call)
        ev = claim("ns1", "c1", "0000-other")
        self.assertEqual(ev["err"], -errno.ESTALE, ev)
        ev = claim("ns1", "c1", "u" * 128)
        self.assertEqual(ev["err"], -errno.ESTALE, ev)
        m = d.mark()
        d.send("claim v1 %s %s ns1 c1 %s" % (DRIVER, NODE, "u" * 129))
        ev = d.wait_event("refused", since=m)
        self.assertEqual(ev["err"], -errno.EINVAL, ev)
        # not allocated
        code, _ = api.http("POST", "/apis/resource.k8s.io/v1/namespaces/ns1/resourceclaims",
                           {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                            "metadata": {"name": "c2", "namespace": "ns1"},
                            "spec": {"devices": {"requests": []}}})
        self.assertEqual(code, 201)
        ev = claim("ns1", "c2", "-")
        self.assertEqual(ev["err"], -errno.ENODATA, ev)
        self.assertIn("not allocated", ev["why"])
        # deleted
        api.ok("delete-claim ns1 c1")
        ev = claim("ns1", "c1", uid)
        self.assertEqual(ev["err"], -errno.ENOENT, ev)
        self.assertIn("gone", ev["why"])
        # forbidden: the hint names the rule
        api.ok("forbid get resourceclaims")
        ev = claim("ns1", "c2", "-")
        self.assertEqual(ev["err"], -errno.EACCES, ev)
        self.assertIn("grant get on resourceclaims in resource.k8s.io", ev["why"])
        self.assertEqual(d.quit(), 0)

    def test_kubeconfig_errors(self):
        api = self.api()
        d = self.start_proc(Driver({"KUBECONFIG": ""}))
        with open(self.path("bad"), "w") as f:
            f.write("apiVersion: v1\nkind: Config\nclusters: []\n")
        ev = d.config(self.path("bad"))
        self.assertEqual(ev["err"], -errno.EINVAL)
        self.assertIn("kubectl config use-context", ev["why"])
        # a token the server does not know: 401 with what to check
        with open(api.kubeconfig_token) as f:
            text = f.read()
        tok = api.token()
        with open(self.path("kc-wrong"), "w") as f:
            f.write(text.replace(tok, "wrong-token"))
        ev = d.config(self.path("kc-wrong"))
        self.assertEqual(ev["err"], 0, ev)
        m = d.mark()
        d.send("call GET /api/v1/nodes/" + NODE)
        ev = d.wait_event("call", since=m)
        self.assertEqual((ev["err"], ev["code"]), (-errno.EACCES, 401), ev)
        self.assertIn("was refused", ev["why"])
        self.assertEqual(d.quit(), 0)

    def test_informer(self):
        """k8s/informer over the cluster's ResourceClaims: a list in pages
        (limit, continue) between inf_begin and inf_end, then the watch's
        changes; a watch the server ends opened again from its
        resourceVersion (no list); 410 Gone after the events were forgotten
        listed again; the API server down, told and retried, then back."""
        api = self.api()
        d = self.driver(api)
        for i in range(7):
            api.ok("create-claim ns%d c%d --driver %s --pool %s --request gpu --device dev-000"
                   % (i % 2, i, DRIVER, NODE))
        m = d.mark()
        mark = api.mark()
        d.send("informer /apis/resource.k8s.io/v1/resourceclaims 3")
        d.wait_event("inf_end", since=m)
        evs = [e for e in d.events_since(m) if e["event"].startswith("inf")]
        self.assertEqual(evs[0]["event"], "inf_begin")
        self.assertEqual(sorted(e["name"] for e in evs if e["event"] == "inf"),
                         ["c%d" % i for i in range(7)])
        self.assertTrue(all(e["type"] == "ADDED" for e in evs if e["event"] == "inf"))
        api.sync()
        lists = api.requests(mark, verb="list", resource="resourceclaims")
        self.assertEqual(len(lists), 3, lists)  # 3 + 3 + 1
        api.wait_event("request", since=mark, verb="watch", resource="resourceclaims")
        # a change and a deletion through the watch
        m = d.mark()
        api.ok("create-claim ns0 c9 --driver %s --pool %s --request gpu --device dev-001"
               % (DRIVER, NODE))
        d.wait_event("inf", since=m, type="ADDED", name="c9")
        code, body = api.http("DELETE", "/apis/resource.k8s.io/v1/namespaces/ns0/resourceclaims/c9")
        self.assertEqual(code, 200, body)
        d.wait_event("inf", since=m, type="DELETED", name="c9")
        # the watch ended by the server: opened again, no list
        mark = api.mark()
        api.ok("expire-watches")
        api.wait_event("request", since=mark, verb="watch", resource="resourceclaims")
        api.sync()
        self.assertEqual(api.requests(mark, verb="list", resource="resourceclaims"), [])
        # 410 Gone: listed again, whole
        m = d.mark()
        api.ok("compact")
        api.ok("expire-watches 410")
        d.wait_event("inf_end", since=m)
        self.assertEqual(len([e for e in d.events_since(m) if e["event"] == "inf"]), 7)
        # down: told, retried with backoff, then back: watched again from
        # where it was
        m = d.mark()
        api.ok("down")
        d.wait_event("inf_error", since=m)
        api.ok("up")
        api.ok("create-claim ns1 c10 --driver %s --pool %s --request gpu --device dev-002"
               % (DRIVER, NODE))
        d.wait_event("inf", timeout=20, since=m, type="ADDED", name="c10")
        d.send("idle 200")
        self.assertEqual(d.quit(), 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
