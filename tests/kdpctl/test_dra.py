#!/usr/bin/python3
"""`kdpctl dra`: DRA without a cluster.

`kdpctl dra kubelet` (the kubelet's DRA side) against kdp-go-testdra (a
grpc-go driver) and kdp-example-gopher-dra; `kdpctl dra apiserver` (HTTPS,
discovery, slices, claims) against the same driver, kubectl,
python3-kubernetes (CustomObjectsApi), raw requests and the grpc-go kubelet
emulator; `kdpctl dra claim` against both API servers (kdpctl's and
kdp-test-apiserver).

usage: KDP_BIN_DIR=<build>/bin /usr/bin/python3 test_dra.py [-v] [Class.test ...]
"""

import http.client
import json
import os
import re
import shutil
import signal
import ssl
import sys
import time
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
import kdptest  # noqa: E402,F401
from kdptest import T  # noqa: E402
from kdptest.apiserver import ApiServer  # noqa: E402
from kdptest.kubelet import Kubelet  # noqa: E402
from kdptest.metrics import parse, value  # noqa: E402
from kdptest.proc import Proc, ProcTest, binary, run, sanitizer_report, wait_for  # noqa: E402

DRV = "gopher.example.com"

NODE = "node-a"
SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TDRV = "test.example.com"


class Base(ProcTest):
    TEST_BOUND = 90.0

    def setUp(self):
        super().setUp()
        self.root = self.path("root")
        self.reg = os.path.join(self.root, "plugins_registry")
        for d in ("root/plugins_registry", "gophers", "cdi"):
            os.makedirs(self.path(d), exist_ok=True)

    # -- kdpctl ----------------------------------------------------------------

    def kdpctl(self, *args, timeout=T):
        r = run([binary("kdpctl")] + [str(a) for a in args], timeout)
        if sanitizer_report(r.stderr):
            self.fail("sanitizer report from kdpctl %s:\n%s" % (" ".join(args), r.stderr))
        return r

    def dra_kubelet(self, *args):
        p = Proc([binary("kdpctl"), "dra", "kubelet", "--kubelet-root", self.root, "--json"]
                 + list(args), "dra-kubelet", stdin=True)
        p.stop_last = True
        self.start_proc(p)
        p.wait_event("ready", since=0)
        return p

    def dra_apiserver(self, *args):
        p = Proc([binary("kdpctl"), "dra", "apiserver", "--dir", self.path("api"), "--node", NODE,
                  "--json"] + list(args), "dra-apiserver", stdin=True)
        p.stop_last = True
        self.start_proc(p)
        p.ready = p.wait_event("ready", since=0)
        p.kubeconfig = p.ready["kubeconfig"]
        return p

    def claim(self, kubeconfig, name, devices, *extra):
        r = self.kdpctl("dra", "claim", "--kubeconfig", kubeconfig, "default/" + name,
                        "--driver", DRV, "--node", NODE, "--device", ",".join(devices), *extra)
        self.assertEqual(r.returncode, 0, r)
        uid = r.stdout.strip()
        self.assertRegex(uid, r"^[0-9a-f-]{36}$")
        return uid

    def conn(self, api):
        """An HTTPS connection to kdpctl's API server, checked with its CA."""
        ctx = ssl.create_default_context(cafile=os.path.join(self.path("api"), "ca.crt"))
        host, port = api.ready["url"][len("https://"):].rsplit(":", 1)
        return http.client.HTTPSConnection(host, int(port), context=ctx, timeout=T)

    # -- drivers ---------------------------------------------------------------

    def go_driver(self, *args):
        p = Proc([binary("kdp-go-testdra"), "-registry", self.reg, "-driver", TDRV,
                  "-pool", NODE] + list(args), "testdra", stdin=True)
        return self.start_proc(p)

    def gopher_file(self, name, content=""):
        with open(self.path("gophers", name), "w") as f:
            f.write(content)

    def gopher_dra(self, kubeconfig, env=None, args=()):
        extra = env or {}
        env = {k: v for k, v in os.environ.items()
               if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "NODE_NAME", "POD_UID")}
        env.update(extra)
        p = Proc([binary("kdp-example-gopher-dra"), "--devices-dir", self.path("gophers"),
                  "--kubelet-root", self.root, "--dra", DRV, "--node", NODE,
                  "--cdi-dir", self.path("cdi"), "--state-dir", self.path("state"),
                  "--kubeconfig", kubeconfig] + list(args), "gopher-dra", env=env)
        return self.start_proc(p)


class KubeletSide(Base):
    """`kdpctl dra kubelet` against kdp-go-testdra (grpc-go)."""

    def test_registration_and_version_choice(self):
        kl = self.dra_kubelet()
        self.go_driver("-versions", "v1beta1.DRAPlugin,v1.DRAPlugin,v1.DRAResourceHealth")
        reg = kl.wait_event("registered", driver=TDRV)
        self.assertEqual(reg["version"], "v1beta1")  # the plugin's order, not ours
        self.assertEqual(reg["health_version"], "v1")
        self.assertTrue(reg["endpoint"].startswith("/"))
        st = kl.wait_event("health", driver=TDRV)
        self.assertEqual(st["version"], "v1")
        self.assertEqual(sorted(d["device"] for d in st["devices"]),
                         ["%s/dev0" % NODE, "%s/dev1" % NODE])

    def test_sighup_is_a_restart(self):
        kl = self.dra_kubelet()
        self.go_driver("-versions", "v1.DRAPlugin,v1.DRAResourceHealth")
        kl.wait_event("registered", driver=TDRV)
        kl.wait_event("health", driver=TDRV)
        for _ in range(2):
            m = kl.mark()
            kl.signal(signal.SIGHUP)
            kl.wait_event("restart", since=m)
            kl.wait_event("found", since=m)
            reg = kl.wait_event("registered", since=m, driver=TDRV)
            self.assertEqual(reg["version"], "v1")
            kl.wait_event("health", since=m, driver=TDRV)
        self.assertTrue(kl.alive())

    def test_no_common_version_refused_and_retried(self):
        kl = self.dra_kubelet("--versions", "v1")
        self.go_driver("-versions", "v1beta1.DRAPlugin")
        ref = kl.wait_event("refused")
        self.assertIn("supported_versions", ref["error"])
        kl.wait_event("refused")  # asked again after the backoff
        kl.assert_no_event("registered", within=0.3)

    def test_prepare_several_claims_one_call(self):
        kl = self.dra_kubelet()
        self.go_driver("-fail-claim", "u2", "-omit-claim", "u3")
        kl.wait_event("registered", driver=TDRV)
        m = kl.mark()
        kl.send("prepare %s ns/a/u1 ns/b/u2 ns/c/u3" % TDRV)
        evs = [kl.wait_event("prepared", since=m, uid=u) for u in ("u1", "u2", "u3")]
        self.assertNotIn("error", evs[0])
        self.assertTrue(evs[0]["devices"])
        self.assertTrue(evs[0]["devices"][0]["cdi_device_ids"])
        self.assertIn("error", evs[1])
        self.assertIn("no entry for this claim", evs[2]["error"])
        m = kl.mark()
        kl.send("state")
        st = kl.wait_event("state", since=m)
        self.assertEqual([d["driver"] for d in st["drivers"]], [TDRV])
        self.assertEqual(len(st["prepared"]), 1)
        kl.send("unprepare %s ns/a/u1" % TDRV)
        kl.wait_event("unprepared", since=m, uid="u1")

    def test_health_stream_and_unimplemented(self):
        """The health stream chosen as the 1.37 kubelet does (its own first
        version the plugin advertises, v1 before v1alpha1), messages and
        Unknown printed; nothing advertised: no stream; UNIMPLEMENTED though
        advertised: said once, not asked again."""
        kl = self.dra_kubelet()
        d = self.go_driver("-versions", "v1.DRAPlugin,v1alpha1.DRAResourceHealth")
        st = kl.wait_event("health", driver=TDRV)
        self.assertEqual(st["version"], "v1alpha1")
        m = kl.mark()
        d.send("health dev1 Unhealthy overheated")
        d.send("health dev0 Unknown the sensor does not answer")
        ev = kl.wait_event(lambda e: e.get("event") == "health" and any(
            x["health"] == "Unknown" for x in e["devices"]), since=m)
        by = {x["device"]: x for x in ev["devices"]}
        self.assertEqual((by["%s/dev1" % NODE]["health"], by["%s/dev1" % NODE]["message"]),
                         ("Unhealthy", "overheated"))
        self.assertEqual(by["%s/dev0" % NODE]["message"], "the sensor does not answer")
        cases = ((["-versions", "v1.DRAPlugin,v1alpha1.DRAResourceHealth,v1.DRAResourceHealth"],
                  "health", "v1"),
                 (["-versions", "v1.DRAPlugin"], "health_none", ""),
                 (["-health=false", "-versions", "v1.DRAPlugin,v1.DRAResourceHealth"],
                  "health_unimplemented", "v1"))
        for args, event, version in cases:
            with self.subTest(driver=args):
                d.stop()
                kl.wait_event("deregistered", since=m)
                m = kl.mark()
                d = self.go_driver(*args)
                reg = kl.wait_event("registered", since=m, driver=TDRV)
                self.assertEqual(reg["health_version"], version)
                kl.wait_event(event, since=m, driver=TDRV)
        # not asked again: 1.37 does not retry after UNIMPLEMENTED
        m = kl.mark()
        kl.send("state")
        st = kl.wait_event("state", since=m)
        self.assertEqual(st["drivers"][0]["health_stream"], "not asked again (UNIMPLEMENTED)")

    def test_health_resend_not_a_change(self):
        """The driver sends its list again while nothing changes (every
        10 s; here 100 ms, $KDP_DRA_HEALTH_RESEND_MS): kdpctl says
        "resent" (--json; nothing in the human form), "changed" only when
        something did."""
        api = self.dra_apiserver()
        kl = self.dra_kubelet()
        self.gopher_file("gopher-0")
        d = self.gopher_dra(api.kubeconfig, env={"KDP_DRA_HEALTH_RESEND_MS": "100"})
        first = kl.wait_event("health", driver=DRV)
        self.assertEqual(first["why"], "stream opened")
        m = kl.mark()
        kl.wait_event("health", driver=DRV, why="resent", since=m)
        kl.wait_event("health", driver=DRV, why="resent", since=kl.mark())
        self.assertEqual(kl.events_since(m, "health", why="changed"), [])
        self.gopher_file("gopher-0", "unhealthy")
        ev = kl.wait_event("health", driver=DRV, why="changed", since=m)
        self.assertEqual(ev["devices"][0]["health"], "Unhealthy")
        self.assertTrue(d.alive())

    def test_health_legacy(self):
        """--health-versions legacy: as 1.34-1.36, v1alpha1 opened whether
        advertised or not."""
        kl = self.dra_kubelet("--health-versions", "legacy")
        self.go_driver("-versions", "v1.DRAPlugin")
        reg = kl.wait_event("registered", driver=TDRV)
        self.assertEqual(reg["health_version"], "v1alpha1")
        st = kl.wait_event("health", driver=TDRV)
        self.assertEqual(st["version"], "v1alpha1")
        # a plugin without the service: asked again, as 1.34-1.36 do
        kl2 = self.dra_kubelet("--health-versions", "legacy")
        self.go_driver("-health=false", "-driver", "other.example.com")
        kl2.wait_event("health_unimplemented", driver="other.example.com")
        m = kl2.mark()
        kl2.send("state")
        st = kl2.wait_event("state", since=m)
        other = [x for x in st["drivers"] if x["driver"] == "other.example.com"]
        self.assertEqual(other[0]["health_stream"], "reopening", st)
        r = self.kdpctl("dra", "kubelet", "--health-versions", "v2")
        self.assertEqual(r.returncode, 2, r)
        self.assertIn("--health-versions: \"v2\" is not v1 or v1alpha1", r.stderr)

    def test_bad_commands(self):
        kl = self.dra_kubelet()
        for line in ("hello", "prepare", "prepare nobody.example.com ns/a/u",
                     "prepare %s not-a-claim" % TDRV, "health"):
            m = kl.mark()
            kl.send(line)
            kl.wait_event("command_error", since=m)
        kl.send("x" * 70000)
        kl.wait_event("command_error", since=m, message="a command longer than 64 KiB: ignored")
        self.assertTrue(kl.alive())

    def test_cli_misuse(self):
        for args, text in ((["dra"], "usage"), (["dra", "nope"], "unknown subcommand"),
                           (["dra", "kubelet", "--kubelet-root", "rel"], "absolute path"),
                           (["dra", "kubelet", "--versions", "v2"], "not v1 or v1beta1"),
                           (["dra", "kubelet", "--dir", "x"], "not an option"),
                           (["dra", "apiserver"], "--dir DIR is required"),
                           (["dra", "apiserver", "--dir", "x", "--listen", "nope"], "HOST:PORT"),
                           (["dra", "claim", "x"], "NAMESPACE/NAME"),
                           (["dra", "claim", "default/c", "--driver", DRV], "--node N is required"),
                           (["dra", "claim", "default/c", "--driver", DRV, "--node", "n",
                             "--device", "d", "--config", "[1"], "--config wants a JSON object"),
                           (["dra", "claim", "default/c", "--driver", "Not_A_Driver", "--node",
                             "n", "--device", "d"], "is not a driver name"),
                           (["dra", "claim", "default/c", "--driver", DRV, "--node", "N_1",
                             "--device", "d"], "is not a node name")):
            r = self.kdpctl(*args)
            self.assertEqual(r.returncode, 2, r)
            self.assertIn(text, r.stderr + r.stdout)
        r = self.kdpctl("dra", "help", "kubelet")
        self.assertEqual(r.returncode, 0)
        self.assertIn("prepare DRIVER NS/NAME/UID", r.stdout)


class ApiServerSide(Base):
    """`kdpctl dra apiserver` with kdp-example-gopher-dra and clients we did not write."""

    def up(self, n=2):
        for i in range(n):
            self.gopher_file("gopher%d" % i)
        api = self.dra_apiserver()
        kl = self.dra_kubelet()
        drv = self.gopher_dra(api.kubeconfig)
        kl.wait_event("registered", driver=DRV)
        sl = api.wait_event("slice", type="ADDED", since=0)
        self.assertEqual(len(sl["devices"]), n)
        return api, kl, drv

    def test_end_to_end(self):
        api, kl, drv = self.up(3)
        sl = api.wait_event("slice", since=0)
        self.assertEqual((sl["driver"], sl["node"], sl["pool"]), (DRV, NODE, NODE))
        self.assertIn("model=gopher", sl["devices"][0]["attributes"])
        self.assertEqual(sl["devices"][0]["capacity"], "memory=1Gi")
        u1 = self.claim(api.kubeconfig, "c1", ["gopher0", "gopher1"], "--config",
                        '{"mode": "shared"}')
        u2 = self.claim(api.kubeconfig, "c2", ["gopher2"])
        # checked against the slices, as the scheduler allocates only what they offer
        for devs, extra, text in ((["gopher9"], (), "device gopher9 is in no ResourceSlice of "
                                   "driver %s on node %s" % (DRV, NODE)),
                                  (["gopher0"], ("--share-id", "new"), "does not allow multiple "
                                   "allocations")):
            r = self.kdpctl("dra", "claim", "--kubeconfig", api.kubeconfig, "default/bad",
                            "--driver", DRV, "--node", NODE, "--device", ",".join(devs), *extra)
            self.assertEqual(r.returncode, 1, r)
            self.assertIn(text, r.stderr)
            self.assertIn("--no-check", r.stderr)
        m = kl.mark()
        kl.send("prepare %s default/c1/%s default/c2/%s" % (DRV, u1, u2))
        p1 = kl.wait_event("prepared", since=m, uid=u1)
        p2 = kl.wait_event("prepared", since=m, uid=u2)
        self.assertNotIn("error", p1, p1)
        self.assertEqual(sorted(d["device"] for d in p1["devices"]), ["gopher0", "gopher1"])
        self.assertEqual([d["device"] for d in p2["devices"]], ["gopher2"])
        ids = [i for d in p1["devices"] for i in d["cdi_device_ids"]]
        self.assertTrue(all(i.startswith("k8s.%s/" % DRV) for i in ids), ids)
        self.assertTrue(os.listdir(self.path("cdi")))
        # a slice changes: printed again
        m2 = api.mark()
        self.gopher_file("gopher3")
        sl = api.wait_event("slice", type="MODIFIED", since=m2)
        self.assertEqual(len(sl["devices"]), 4)
        self.assertGreater(sl["generation"], 1)
        # health through the stream
        self.gopher_file("gopher1", "unhealthy\n")
        kl.wait_event(lambda e: e.get("event") == "health" and any(
            x["device"] == "%s/gopher1" % NODE and x["health"] == "Unhealthy"
            for x in e["devices"]), since=m)
        # and the taint in the slice the API server prints
        sl = api.wait_event(lambda e: e.get("event") == "slice" and any(
            d["name"] == "gopher1" and d["taints"] for d in e["devices"]), since=m2)
        by = {d["name"]: d["taints"] for d in sl["devices"]}
        self.assertEqual(by["gopher1"], DRV + "/unhealthy=reported-unhealthy:NoSchedule")
        self.assertEqual(by["gopher0"], "")
        kl.send("unprepare %s default/c1/%s default/c2/%s" % (DRV, u1, u2))
        for u in (u1, u2):
            ev = kl.wait_event("unprepared", since=m, uid=u)
            self.assertNotIn("error", ev)
        r = self.kdpctl("dra", "claim", "--kubeconfig", api.kubeconfig, "--delete", "default/c1")
        self.assertEqual(r.returncode, 0, r)

    def test_restart_same_dir(self):
        """Started again with the same --dir: the same CA, token and address, so a driver
        that kept running is served again and publishes its slice anew."""
        api, kl, drv = self.up(2)
        self.assertFalse(api.ready["reused"])
        with open(self.path("api", "token")) as f:
            token = f.read()
        url = api.ready["url"]
        api.stop()
        api2 = self.dra_apiserver()
        self.assertTrue(api2.ready["reused"])
        self.assertEqual(api2.ready["url"], url)
        with open(self.path("api", "token")) as f:
            self.assertEqual(f.read(), token)
        sl = api2.wait_event("slice", type="ADDED", since=0, timeout=60)
        self.assertEqual(sorted(d["name"] for d in sl["devices"]), ["gopher0", "gopher1"])
        self.assertTrue(drv.alive())
        # credentials that no longer hold together are made anew
        api2.stop()
        with open(self.path("api", "server.key"), "w") as f:
            f.write("not a key\n")
        api3 = self.dra_apiserver()
        self.assertFalse(api3.ready["reused"])
        with open(self.path("api", "token")) as f:
            self.assertNotEqual(f.read(), token)

    def test_faults(self):
        """The faults a driver must survive, played from stdin; the driver publishes
        through each (kdp-example-gopher-dra reading DIR/kubeconfig-tokenfile)."""
        for i in range(2):
            self.gopher_file("gopher%d" % i)
        api = self.dra_apiserver()
        kl = self.dra_kubelet()
        self.gopher_dra(self.path("api", "kubeconfig-tokenfile"))
        kl.wait_event("registered", driver=DRV)
        name = api.wait_event("slice", type="ADDED", since=0)["name"]

        def devices_become(n, since):
            return api.wait_event(lambda e: e.get("event") == "slice" and e["name"] == name
                                  and len(e["devices"]) == n, since=since, timeout=30)

        def fault(line):
            m = api.mark()
            api.send(line)
            return api.wait_event("fault", since=m)

        # 409s on the slice's writes: listed again and written again
        self.assertIn("conflict: 2 more", fault("conflict 2")["detail"])
        m = api.mark()
        self.gopher_file("gopher2")
        devices_become(3, m)
        self.assertEqual(len(api.events_since(m, "request", code=409)), 2)
        # 503s with Retry-After
        self.assertIn("fail: 3 more (code 503)", fault("fail 503 3")["detail"])
        m = api.mark()
        self.gopher_file("gopher3")
        devices_become(4, m)
        self.assertEqual(len(api.events_since(m, "request", code=503)), 3)
        # edited and deleted behind the driver's back: put back
        m = api.mark()
        self.assertEqual(fault("edit-slice " + name)["detail"], "device gopher3 removed")
        devices_become(3, m)
        sl = devices_become(4, m)
        self.assertGreater(sl["generation"], 1)
        m = api.mark()
        self.assertEqual(fault("delete-slice " + name)["detail"], name + " deleted")
        api.wait_event("slice", type="DELETED", since=m)
        sl = api.wait_event("slice", type="ADDED", since=m, timeout=30)
        self.assertEqual(len(sl["devices"]), 4)
        name = sl["name"]
        # by its generateName prefix ('*'): the pool's oldest slice
        m = api.mark()
        self.assertEqual(fault("delete-slice %s*" % name[:-5])["detail"], name + " deleted")
        sl = api.wait_event("slice", type="ADDED", since=m, timeout=30)
        name = sl["name"]
        self.assertIn("no ResourceSlice", fault("edit-slice nothing-like-it*")["error"])
        # an outage: a device added meanwhile is published once it is back
        m = api.mark()
        self.assertIn("closed for 2 s", fault("down 2")["detail"])
        self.gopher_file("gopher4")
        self.assertEqual(api.wait_event("fault", since=m, command="up")["detail"],
                         api.ready["url"])
        devices_become(5, m)
        # a new token: the old one refused, the driver reads its token file again after a 401
        with open(self.path("api", "token")) as f:
            old = f.read()
        m = api.mark()
        self.assertIn("old one refused", fault("rotate-token")["detail"])
        with open(self.path("api", "token")) as f:
            self.assertNotEqual(f.read(), old)
        c = self.conn(api)
        c.request("GET", "/apis/resource.k8s.io/v1/resourceslices",
                  headers={"Authorization": "Bearer " + old})
        self.assertEqual(c.getresponse().status, 401)
        c.close()
        self.gopher_file("gopher5")
        devices_become(6, m)
        self.assertTrue(api.events_since(m, "request", code=401))
        # misuse: said, nothing armed
        for line, text in (("fail 200", "wrong arguments"), ("down 0", "wrong arguments"),
                           ("edit-slice nosuch", 'no ResourceSlice "nosuch"'),
                           ("bogus", "down SECONDS, fail CODE")):
            self.assertIn(text, fault(line)["error"])
        self.assertEqual(fault("faults")["detail"],
                         "up; fail: 0 more (code 503); conflict: 0 more")

    def test_metrics(self):
        """The DRA families on the driver's /metrics page, read by Prometheus's own parser
        (kdp-promparse): calls and claims by outcome, prepared claims, the slices and their
        failures, the API server's answers by verb and code."""
        for i in range(3):
            self.gopher_file("gopher%d" % i)
        api = self.dra_apiserver()
        kl = self.dra_kubelet()
        drv = self.gopher_dra(api.kubeconfig, args=["--metrics-address", "127.0.0.1:0"])
        addr = re.search(r"metrics: serving /metrics and /healthz on (\S+)",
                         drv.wait_log(r"metrics: serving")).group(1)
        kl.wait_event("registered", driver=DRV)
        api.wait_event("slice", type="ADDED", since=0)
        u1 = self.claim(api.kubeconfig, "m1", ["gopher0", "gopher1"])
        m = kl.mark()
        missing = "00000000-0000-4000-8000-000000000000"
        kl.send("prepare %s default/m1/%s default/nosuch/%s" % (DRV, u1, missing))
        kl.wait_event("prepared", since=m, uid=u1)
        m = api.mark()
        api.send("conflict 1")
        api.wait_event("fault", since=m)
        self.gopher_file("gopher3")
        api.wait_event(lambda e: e.get("event") == "slice" and len(e["devices"]) == 4, since=m)

        def page():
            c = http.client.HTTPConnection(*addr.rsplit(":", 1), timeout=T)
            c.request("GET", "/metrics")
            text = c.getresponse().read().decode()
            c.close()
            return parse(text)

        def published_again():  # the publish after the 409 may still be on its way
            f = page()
            return f if value(f, "kdp_dra_slice_devices")["value"] == 4 else None

        f = wait_for(published_again, T, "the 4 devices on the page")
        one = {"driver": DRV}
        self.assertEqual(value(f, "kdp_dra_registered", **one)["value"], 1)
        self.assertEqual(value(f, "kdp_dra_claims_total", op="prepare", result="ok")["value"], 1)
        self.assertEqual(value(f, "kdp_dra_claims_total", op="prepare", result="error")["value"],
                         1)  # the claim the API server does not have
        self.assertEqual(value(f, "kdp_dra_prepared_claims")["value"], 1)
        self.assertEqual(value(f, "kdp_dra_prepared_shares")["value"], 0)
        h = value(f, "kdp_dra_call_duration_seconds", op="prepare")
        self.assertEqual(f["kdp_dra_call_duration_seconds"]["type"], "HISTOGRAM")
        self.assertEqual(h["count"], 1)
        self.assertEqual(value(f, "kdp_dra_slices_published")["value"], 1)
        self.assertEqual(value(f, "kdp_dra_slices")["value"], 1)
        self.assertEqual(value(f, "kdp_dra_slice_devices")["value"], 4)
        self.assertGreaterEqual(float(value(f, "kdp_dra_pool_generation")["value"]), 2)
        self.assertEqual(value(f, "kdp_dra_slice_failures_total", reason="conflict")["value"], 1)
        self.assertEqual(value(f, "kdp_dra_api_requests_total", verb="PUT", code="409")["value"],
                         1)
        self.assertGreaterEqual(
            float(value(f, "kdp_dra_api_requests_total", verb="GET", code="200")["value"]), 3)
        self.assertEqual(value(f, "kdp_dra_api_requests_total", verb="GET", code="404")["value"],
                         1)  # the missing claim
        m = kl.mark()
        kl.send("unprepare %s default/m1/%s" % (DRV, u1))
        kl.wait_event("unprepared", since=m, uid=u1)
        f = page()
        self.assertEqual(value(f, "kdp_dra_claims_total", op="unprepare", result="ok")["value"],
                         1)
        self.assertEqual(value(f, "kdp_dra_prepared_claims")["value"], 0)

    def test_kubectl(self):
        kubectl = shutil.which("kubectl")
        if not kubectl:
            self.skipTest("no kubectl")
        api, kl, drv = self.up(2)
        # its own discovery cache: one kept in $HOME from another API server that had
        # this port would spare kubectl the requests this test looks for

        def kc(*args):
            return run([kubectl, "--kubeconfig", api.kubeconfig, "--cache-dir",
                        self.path("kubecache")] + list(args), 30)
        r = kc("get", "resourceslices", "-o", "json")
        self.assertEqual(r.returncode, 0, r)
        items = json.loads(r.stdout)["items"]
        self.assertEqual(len(items), 1)
        self.assertEqual(items[0]["spec"]["driver"], DRV)
        self.assertEqual(items[0]["metadata"]["ownerReferences"][0]["kind"], "Node")
        r = kc("get", "resourceslices", "-o", "yaml")
        self.assertEqual(r.returncode, 0, r)
        self.assertIn("gopher1", r.stdout)
        r = kc("get", "nodes", "-o", "name")
        self.assertEqual(r.stdout.strip(), "node/" + NODE)
        # kubectl 1.32 asks for aggregated discovery first: served, so it
        # never needs the per-version lists
        paths = [e["path"] for e in api.events() if e.get("event") == "request"]
        self.assertIn("/apis", paths)
        self.assertNotIn("/apis/resource.k8s.io/v1", paths)
        # the Table kubectl get asks for: its columns
        r = kc("get", "resourceslices")
        self.assertEqual(r.returncode, 0, r)
        head, row = r.stdout.splitlines()[:2]
        self.assertEqual(head.split(), ["NAME", "NODE", "DRIVER", "POOL", "AGE"])
        self.assertEqual(row.split()[1:4], [NODE, DRV, NODE])
        self.claim(api.kubeconfig, "k1", ["gopher0"])
        r = kc("get", "resourceclaims", "-n", "default", "k1", "-o", "json")
        self.assertEqual(r.returncode, 0, r)
        res = json.loads(r.stdout)["status"]["allocation"]["devices"]["results"]
        self.assertEqual(res, [{"request": "req-0", "driver": DRV, "pool": NODE,
                                "device": "gopher0"}])
        r = kc("get", "resourceclaims", "-A")
        self.assertEqual(r.stdout.split()[:8], ["NAMESPACE", "NAME", "STATE", "AGE",
                                                "default", "k1", "allocated", r.stdout.split()[7]])
        # the DeviceClass deploy/dra ships (KEP-5004's name), created as an operator does
        # (no OpenAPI schema here: --validate=false)
        dc = os.path.join(SRC, "deploy", "dra", "deviceclass.yaml")
        r = kc("create", "--validate=false", "-f", dc)
        self.assertEqual(r.returncode, 0, r)
        self.assertIn("deviceclass.resource.k8s.io/gopher.example.com created", r.stdout)
        r = kc("get", "deviceclasses", DRV, "-o", "jsonpath={.spec.extendedResourceName}")
        self.assertEqual((r.returncode, r.stdout), (0, "example.com/gopher"), r)

    def test_python_kubernetes(self):
        try:
            from kubernetes import client, config, watch
        except ImportError:
            self.skipTest("python3-kubernetes is missing (run with /usr/bin/python3)")
        api, kl, drv = self.up(2)
        c = config.new_client_from_config(config_file=api.kubeconfig)
        co = client.CustomObjectsApi(c)
        lst = co.list_cluster_custom_object("resource.k8s.io", "v1", "resourceslices",
                                            field_selector="spec.driver=" + DRV)
        self.assertEqual(len(lst["items"]), 1)
        name = lst["items"][0]["metadata"]["name"]
        got = co.get_cluster_custom_object("resource.k8s.io", "v1", "resourceslices", name)
        self.assertEqual(got["metadata"]["uid"], lst["items"][0]["metadata"]["uid"])
        body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                "metadata": {"generateName": "py-"},
                "spec": {"driver": "py.example.com", "nodeName": NODE,
                         "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
                         "devices": [{"name": "d0"}]}}
        made = co.create_cluster_custom_object("resource.k8s.io", "v1", "resourceslices", body)
        self.assertTrue(made["metadata"]["name"].startswith("py-"))
        w = watch.Watch()
        seen = []
        for ev in w.stream(co.list_cluster_custom_object, "resource.k8s.io", "v1",
                           "resourceslices", field_selector="spec.driver=py.example.com",
                           timeout_seconds=5):
            seen.append((ev["type"], ev["object"]["metadata"]["name"]))
            w.stop()
        self.assertEqual(seen, [("ADDED", made["metadata"]["name"])])
        co.delete_cluster_custom_object("resource.k8s.io", "v1", "resourceslices",
                                        made["metadata"]["name"])
        claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                 "metadata": {"name": "py-claim"},
                 "spec": {"devices": {"requests": [{"name": "r", "exactly": {
                     "deviceClassName": DRV}}]}}}
        co.create_namespaced_custom_object("resource.k8s.io", "v1", "default", "resourceclaims",
                                           claim)
        got = co.get_namespaced_custom_object("resource.k8s.io", "v1", "default",
                                              "resourceclaims", "py-claim")
        self.assertEqual(got["metadata"]["namespace"], "default")

    def test_go_kubelet_emulator(self):
        for i in range(2):
            self.gopher_file("gopher%d" % i)
        api = self.dra_apiserver()
        os.makedirs(self.path("root", "device-plugins"), exist_ok=True)
        kl = self.start_proc(Kubelet(self.path("root", "device-plugins"), registry=self.reg,
                                     kubelet_root=self.root))
        self.gopher_dra(api.kubeconfig)
        kl.wait_dra_registered(DRV)
        api.wait_event("slice", type="ADDED", since=0)
        uid = self.claim(api.kubeconfig, "g1", ["gopher0", "gopher1"])
        r = kl.dra_prepare(DRV, [("default", "g1", uid)], pod="ml/train", containers=["main"])
        self.assertTrue(r["ok"], r)
        self.assertEqual(r["by_uid"][uid]["result"], "prepared")
        self.assertEqual([d["device"] for d in r["by_uid"][uid]["devices"]],
                         ["gopher0", "gopher1"])
        # kdpctl pods: the claim as the kubelet's PodResources carries it
        out = self.kdpctl("pods", "--kubelet-root", self.root)
        self.assertEqual(out.returncode, 0, out)
        self.assertEqual(out.stdout.split("\n")[0].split(),
                         ["NAMESPACE", "POD", "CONTAINER", "RESOURCE", "CLAIM", "DEVICES"])
        self.assertEqual(out.stdout.split("\n")[1].split(),
                         ["ml", "train", "main", DRV, "default/g1", "gopher0,gopher1"])
        out = self.kdpctl("--json", "pods", "--kubelet-root", self.root, "--device", "gopher1")
        row = json.loads(out.stdout)
        self.assertEqual((row["claim"], row["resource"], row["pool"], row["devices"]),
                         ("default/g1", DRV, NODE, ["gopher1"]))
        r = kl.dra_unprepare(DRV, [("default", "g1", uid)])
        self.assertTrue(r["ok"], r)

    def test_claim_against_go_apiserver(self):
        api = self.start_proc(ApiServer(self.path("goapi"), nodes=[NODE]))
        # no driver there: nothing published, so --no-check
        uid = self.claim(api.kubeconfig_token, "c1", ["gopher0", "gopher1"], "--request", "gpu",
                         "--config", '{"a": 1}', "--no-check")
        cl = [c for c in api.claims() if c["metadata"]["name"] == "c1"][0]
        self.assertEqual(cl["metadata"]["uid"], uid)
        alloc = cl["status"]["allocation"]["devices"]
        self.assertEqual([x["device"] for x in alloc["results"]], ["gopher0", "gopher1"])
        self.assertEqual(alloc["config"][0]["opaque"]["parameters"], {"a": 1})
        r = self.kdpctl("dra", "claim", "--kubeconfig", api.kubeconfig_token, "default/c1",
                        "--driver", DRV, "--node", NODE, "--device", "gopher0", "--no-check")
        self.assertEqual(r.returncode, 1, r)
        self.assertIn("already exists", r.stderr)
        self.assertIn("--delete", r.stderr)


class Run(Base):
    """`kdpctl dra run`: both sides in one process."""

    def test_run(self):
        for i in range(2):
            self.gopher_file("gopher%d" % i)
        p = Proc([binary("kdpctl"), "dra", "run", "--dir", self.path("api"), "--kubelet-root",
                  self.root, "--node", NODE, "--json"], "dra-run", stdin=True)
        p.stop_last = True
        self.start_proc(p)
        ready = [p.wait_event(lambda e, k=k: e.get("event") == "ready" and k in e, since=0)
                 for k in ("url", "registry")]
        kubeconfig = ready[0]["kubeconfig"]
        drv = self.gopher_dra(kubeconfig)
        p.wait_event("registered", since=0, driver=DRV)
        # the registration socket appears listening: GetInfo at its first sight works, also
        # after a driver restart (no "connection refused" and a retry 500 ms later)
        drv.stop()
        m = p.mark()
        self.gopher_dra(kubeconfig)
        p.wait_event("registered", since=m, driver=DRV)
        self.assertEqual(p.events_since(0, lambda e: e.get("event") == "info_failed"), [])
        sl = p.wait_event("slice", since=0, type="ADDED")
        self.assertEqual(len(sl["devices"]), 2)
        uid = self.claim(kubeconfig, "r1", ["gopher1"])
        m = p.mark()
        p.send("prepare %s default/r1/%s" % (DRV, uid))
        ev = p.wait_event("prepared", since=m, uid=uid)
        self.assertEqual([d["device"] for d in ev["devices"]], ["gopher1"])
        # SIGHUP: a kubelet restart; the driver registers again and its health stream is
        # reopened, the API server's objects and the prepared claim are kept
        m = p.mark()
        p.signal(signal.SIGHUP)
        p.wait_event("restart", since=m)
        p.wait_event("registered", since=m, driver=DRV)
        p.wait_event("health", since=m, driver=DRV)
        self.assertTrue(p.alive())
        p.send("state")
        st = p.wait_event("state", since=m)
        self.assertIn(uid, json.dumps(st))
        m = p.mark()
        p.send("unprepare %s default/r1/%s" % (DRV, uid))
        ev = p.wait_event("unprepared", since=m, uid=uid)
        self.assertNotIn("error", ev)
        r = self.kdpctl("dra", "claim", "--kubeconfig", kubeconfig, "--delete", "default/r1")
        self.assertEqual(r.returncode, 0, r)  # the API server kept it
        # the API server's commands on the same stdin
        m = p.mark()
        p.send("conflict 3")
        self.assertIn("conflict: 3 more", p.wait_event("fault", since=m)["detail"])
        p.send("nonsense")
        self.assertIn("rotate-token", p.wait_event("command_error", since=m)["hint"])


class BadInput(Base):
    """Raw requests: every error a Status, never a crash."""

    def req(self, api, method, path, body=None, token=True, ctype="application/json"):
        with open(os.path.join(self.path("api"), "token")) as f:
            tok = f.read().strip()
        h = {"Content-Type": ctype, "Accept": "application/json"}
        if token:
            h["Authorization"] = "Bearer " + tok
        c = self.conn(api)
        try:
            c.request(method, path, body=body, headers=h)
            r = c.getresponse()
            data = r.read()
            return r.status, (json.loads(data) if data[:1] == b"{" else data)
        finally:
            c.close()

    def status(self, api, code, reason, *a, **kw):
        got, obj = self.req(api, *a, **kw)
        self.assertEqual(got, code, obj)
        self.assertEqual((obj["kind"], obj["status"], obj["reason"], obj["code"]),
                         ("Status", "Failure", reason, code), obj)
        return obj

    def test_errors(self):
        api = self.dra_apiserver()
        S = "/apis/resource.k8s.io/v1/resourceslices"
        self.status(api, 401, "Unauthorized", "GET", S, token=False)
        self.status(api, 404, "NotFound", "GET", "/apis/nope/v1/things")
        self.status(api, 404, "NotFound", "GET", "/apis/resource.k8s.io/v1beta1/resourceslices")
        self.status(api, 404, "NotFound", "GET", S + "/missing")
        self.status(api, 400, "BadRequest", "POST", S, body=b"\x00garbage{")
        self.status(api, 400, "BadRequest", "POST", S, body=b"[1,2]")
        self.status(api, 400, "BadRequest", "GET", S + "?fieldSelector=spec.bogus%3Dx")
        self.status(api, 400, "BadRequest", "GET", S + "?watch=true&resourceVersion=abc")
        self.status(api, 405, "MethodNotAllowed", "DELETE", S)
        self.status(api, 413, "RequestEntityTooLarge", "POST", S, body=b" " * (5 << 20))
        obj = self.status(api, 422, "Invalid", "POST", S, body=json.dumps(
            {"metadata": {"name": "x"}, "spec": {"driver": DRV, "nodeName": NODE,
                                                 "pool": {"name": "p", "resourceSliceCount": 1},
                                                 "devices": [{"name": "Bad_Name"}]}}).encode())
        self.assertIn("spec.devices[0].name", obj["message"])

        good = {"metadata": {"name": "s1"},
                "spec": {"driver": DRV, "nodeName": NODE,
                         "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
                         "devices": [{"name": "d0"}]}}
        code, made = self.req(api, "POST", S, body=json.dumps(good).encode())
        self.assertEqual(code, 201, made)
        self.status(api, 409, "AlreadyExists", "POST", S, body=json.dumps(good).encode())
        stale = dict(made)
        stale["metadata"] = dict(made["metadata"], resourceVersion="1")
        self.status(api, 409, "Conflict", "PUT", S + "/s1", body=json.dumps(stale).encode())
        fresh = json.loads(json.dumps(made))
        fresh["spec"]["devices"].append({"name": "d1"})
        code, upd = self.req(api, "PUT", S + "/s1", body=json.dumps(fresh).encode())
        self.assertEqual(code, 200, upd)
        self.assertEqual(upd["metadata"]["generation"], 2)
        moved = json.loads(json.dumps(upd))
        moved["spec"]["driver"] = "other.example.com"
        self.status(api, 422, "Invalid", "PUT", S + "/s1", body=json.dumps(moved).encode())
        # a watch from an old resourceVersion replays; from now, nothing yet
        c = self.conn(api)
        c.request("GET", S + "?watch=true&resourceVersion=1&timeoutSeconds=1",
                  headers={"Authorization": "Bearer " + open(
                      os.path.join(self.path("api"), "token")).read().strip()})
        r = c.getresponse()
        lines = [json.loads(x) for x in r.read().splitlines() if x.strip()]
        c.close()
        self.assertEqual([e["type"] for e in lines], ["ADDED", "MODIFIED"])
        code, _ = self.req(api, "DELETE", S + "/s1")
        self.assertEqual(code, 200)
        code, _ = self.req(api, "GET", "/version", token=False)
        self.assertEqual(code, 200)
        self.assertTrue(api.alive())

    def test_claim_status(self):
        """A claim's status.devices checked as the API server checks them."""
        api = self.dra_apiserver()
        self.claim(os.path.join(self.path("api"), "kubeconfig"), "st", ["gopher0"], "--no-check")
        C = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/st"
        code, cl = self.req(api, "GET", C)
        self.assertEqual(code, 200, cl)
        del cl["metadata"]["resourceVersion"]  # no precondition: each PUT is checked

        def put(devices):
            o = json.loads(json.dumps(cl))
            o["status"]["devices"] = devices
            return json.dumps(o).encode()
        cond = {"type": "Ready", "status": "True", "reason": "Configured", "message": "m",
                "lastTransitionTime": "2026-12-02T00:00:00Z"}
        ok = {"driver": DRV, "pool": NODE, "device": "gopher0", "conditions": [cond],
              "data": {"a": 1}, "networkData": {"interfaceName": "net1", "ips": ["10.9.8.7/24"]}}
        code, upd = self.req(api, "PUT", C + "/status", body=put([ok]))
        self.assertEqual(code, 200, upd)
        self.assertEqual(upd["status"]["devices"][0]["conditions"][0]["reason"], "Configured")
        no_time = {k: v for k, v in cond.items() if k != "lastTransitionTime"}
        cases = [
            (dict(ok, device="gopher9"), "status.devices[0]", "must be an allocated device"),
            (dict(ok, shareID="0b7d6f1e-3c52-4a8e-9d35-1f2e3d4c5b6a"), "status.devices[0]",
             "must be an allocated device"),
            (dict(ok, conditions=[dict(cond, reason="not a reason!")]), "status.devices[0]",
             "conditions[0].reason must be CamelCase"),
            (dict(ok, conditions=[no_time]), "status.devices[0].conditions[0].lastTransitionTime",
             "Required value"),
            (dict(ok, conditions=[cond, cond]), "status.devices[0]", "conditions[0]'s too"),
            (dict(ok, data=[1]), "status.devices[0]", "data must be a JSON object"),
            (dict(ok, networkData={"ips": ["10.9.8.7"]}), "status.devices[0]",
             "not an address in canonical CIDR form"),
            ({k: v for k, v in ok.items() if k != "driver"}, "status.devices[0].driver",
             "Required value"),
            (dict(ok, device="Bad_Name"), "status.devices[0].device", "Invalid value"),
        ]
        for dev, field, words in cases:
            obj = self.status(api, 422, "Invalid", "PUT", C + "/status", body=put([dev]))
            self.assertIn(field, obj["message"])
            self.assertIn(words, obj["message"])
        obj = self.status(api, 422, "Invalid", "PUT", C + "/status", body=put([ok, ok]))
        self.assertIn("status.devices[1]: Duplicate value", obj["message"])
        # a merge patch is checked too, and nothing was stored by the refusals
        obj = self.status(api, 422, "Invalid", "PATCH", C + "/status",
                          body=json.dumps(
                              {"status": {"devices": [dict(ok, pool="other")]}}).encode(),
                          ctype="application/merge-patch+json")
        code, now = self.req(api, "GET", C)
        self.assertEqual(now["status"]["devices"], upd["status"]["devices"])
        # a create drops the status before any check, as the API server does
        code, made = self.req(api, "POST", "/apis/resource.k8s.io/v1/namespaces/default/"
                              "resourceclaims", body=json.dumps(
                                  {"metadata": {"name": "with-status"},
                                   "spec": cl["spec"],
                                   "status": {"devices": [{"driver": "Bad_Driver"}]}}).encode())
        self.assertEqual(code, 201, made)
        self.assertNotIn("status", made)

    def test_device_classes(self):
        """DeviceClasses stored, listed and checked as the API server checks them."""
        api = self.dra_apiserver()
        D = "/apis/resource.k8s.io/v1/deviceclasses"

        def cls(spec):
            return json.dumps({"metadata": {"name": "c"}, "spec": spec}).encode()
        sel = [{"cel": {"expression": 'device.driver == "%s"' % DRV}}]
        code, made = self.req(api, "POST", D, body=cls(
            {"selectors": sel, "extendedResourceName": "example.com/gopher",
             "config": [{"opaque": {"driver": DRV, "parameters": {"a": 1}}}]}))
        self.assertEqual(code, 201, made)
        self.assertEqual(made["kind"], "DeviceClass")
        code, lst = self.req(api, "GET", D)
        self.assertEqual([c["metadata"]["name"] for c in lst["items"]], ["c"])
        for spec, field in [
                ({"selectors": sel, "extendedResourceName": "gopher"}, "spec.extendedResourceName"),
                ({"extendedResourceName": "kubernetes.io/gpu"}, "spec.extendedResourceName"),
                ({"extendedResourceName": "requests.example.com/x"},
                 "spec.extendedResourceName"),
                ({"selectors": [{"cel": {"expression": ""}}]}, "spec.selectors[0].cel.expression"),
                ({"config": [{"opaque": {"driver": "Bad_Driver", "parameters": {}}}]},
                 "spec.config[0].opaque.driver"),
                ({"config": [{"opaque": {"driver": DRV, "parameters": [1]}}]},
                 "spec.config[0].opaque.parameters")]:
            obj = self.status(api, 422, "Invalid", "POST", D, body=json.dumps(
                {"metadata": {"name": "bad"}, "spec": spec}).encode())
            self.assertIn("DeviceClass.resource.k8s.io \"bad\" is invalid: " + field,
                          obj["message"])
        # an update is checked too
        bad = json.loads(json.dumps(made))
        bad["spec"]["extendedResourceName"] = "nope"
        del bad["metadata"]["resourceVersion"]
        self.status(api, 422, "Invalid", "PUT", D + "/c", body=json.dumps(bad).encode())
        code, _ = self.req(api, "DELETE", D + "/c")
        self.assertEqual(code, 200)

    def test_taints(self):
        """Device taints checked as the API server checks them."""
        api = self.dra_apiserver()
        S = "/apis/resource.k8s.io/v1/resourceslices"

        def tainted(devices):
            return json.dumps({"metadata": {"name": "t"}, "spec": {
                "driver": DRV, "nodeName": NODE,
                "pool": {"name": "p", "resourceSliceCount": 1}, "devices": devices}}).encode()
        ok = {"key": DRV + "/unhealthy", "value": "probe", "effect": "NoSchedule"}
        for taint, field in ((dict(ok, key="bad key"), "taints[0].key"),
                             (dict(ok, value="-x"), "taints[0].value"),
                             (dict(ok, effect="Evict"), "taints[0].effect"),
                             ({"key": "k"}, "taints[0].effect")):
            obj = self.status(api, 422, "Invalid", "POST", S,
                              body=tainted([{"name": "d0", "taints": [taint]}]))
            self.assertIn("spec.devices[0]." + field, obj["message"])
        obj = self.status(api, 422, "Invalid", "POST", S,
                          body=tainted([{"name": "d0", "taints": [ok] * 17}]))
        self.assertIn("spec.devices[0].taints: Too many", obj["message"])
        many = [{"name": "d%d" % i} for i in range(65)]
        many[64]["taints"] = [ok]
        obj = self.status(api, 422, "Invalid", "POST", S, body=tainted(many))
        self.assertIn("spec.devices: Too many", obj["message"])
        many[63]["taints"] = [ok]
        code, made = self.req(api, "POST", S, body=tainted(many[:64]))
        self.assertEqual(code, 201, made)
        self.assertEqual(made["spec"]["devices"][63]["taints"][0]["effect"], "NoSchedule")
        code, _ = self.req(api, "DELETE", S + "/t")
        self.assertEqual(code, 200)
        self.assertTrue(api.alive())

    def test_sharing(self):
        """Counter sets, consumesCounters and request policies checked as
        the 1.35-1.37 API server checks them: 422 with the field's path."""
        api = self.dra_apiserver()
        S = "/apis/resource.k8s.io/v1/resourceslices"

        def body(spec):
            return json.dumps({"metadata": {"name": "s"}, "spec": dict({
                "driver": DRV, "nodeName": NODE, "pool": {"name": "p", "resourceSliceCount": 1}},
                **spec)}).encode()
        ok_set = {"name": "card-0", "counters": {"memory": {"value": "80Gi"}}}
        for spec, field, words in (
                ({"sharedCounters": [ok_set, ok_set]}, "spec.sharedCounters[1].name", "Duplicate value"),
                ({"sharedCounters": [dict(ok_set, name="s%d" % i) for i in range(9)]},
                 "spec.sharedCounters", "Too many"),
                ({"sharedCounters": [ok_set], "devices": []}, "spec", "only one of"),
                ({"sharedCounters": [{"name": "c", "counters": {"m": {"value": "-1"}}}]},
                 "spec.sharedCounters[0].counters[m].value", "greater than or equal to 0"),
                ({"devices": [{"name": "d", "consumesCounters": [
                    {"counterSet": "card-0", "counters": {"memory": {"value": "1"}}},
                    {"counterSet": "card-0", "counters": {"memory": {"value": "1"}}}]}]},
                 "spec.devices[0].consumesCounters[1].counterSet", "Duplicate value"),
                ({"devices": [{"name": "d", "consumesCounters": [
                    {"counterSet": "Card", "counters": {"memory": {"value": "1"}}}]}]},
                 "spec.devices[0].consumesCounters[0].counterSet", "RFC 1123 label"),
                ({"devices": [{"name": "d", "capacity": {"memory": {
                    "value": "80Gi", "requestPolicy": {"default": "1Gi"}}}}]},
                 "spec.devices[0].capacity[memory].requestPolicy",
                 "allowMultipleAllocations must be true"),
                ({"devices": [{"name": "d", "allowMultipleAllocations": True, "capacity": {"memory": {
                    "value": "80Gi", "requestPolicy": {"default": "3Gi",
                                                       "validRange": {"min": "2Gi", "step": "2Gi"}}}}}]},
                 "spec.devices[0].capacity[memory].requestPolicy.default", "not a multiple of a given step"),
                ({"devices": [{"name": "d", "allowMultipleAllocations": True, "capacity": {"memory": {
                    "value": "80Gi", "requestPolicy": {"default": "8Gi", "validValues": ["8Gi", "4Gi"]}}}}]},
                 "spec.devices[0].capacity[memory].requestPolicy.validValues[1]", "ascending order")):
            obj = self.status(api, 422, "Invalid", "POST", S, body=body(spec))
            self.assertIn(field + ":", obj["message"])
            self.assertIn(words, obj["message"])
        many = [{"name": "d%d" % i} for i in range(65)]
        many[0]["consumesCounters"] = [{"counterSet": "card-0", "counters": {"memory": {"value": "1"}}}]
        obj = self.status(api, 422, "Invalid", "POST", S, body=body({"devices": many}))
        self.assertIn("spec.devices: Too many", obj["message"])
        code, made = self.req(api, "POST", S, body=body({"sharedCounters": [ok_set]}))
        self.assertEqual(code, 201, made)
        code, _ = self.req(api, "DELETE", S + "/s")
        self.assertEqual(code, 200)
        good = {"devices": [{"name": "d", "allowMultipleAllocations": True, "capacity": {"memory": {
            "value": "80Gi", "requestPolicy": {"default": "8Gi", "validValues": ["4Gi", "8Gi"]}}},
            "consumesCounters": [{"counterSet": "card-0", "counters": {"memory": {"value": "8Gi"}}}]}]}
        code, made = self.req(api, "POST", S, body=body(good))
        self.assertEqual(code, 201, made)
        self.assertTrue(api.alive())

    def test_binding_conditions(self):
        """bindsToNode, bindingConditions and bindingFailureConditions (KEP-5007)
        checked as the API server checks them, in a slice's devices and a
        claim's allocation results; a good slice stored and shown."""
        api = self.dra_apiserver()
        S = "/apis/resource.k8s.io/v1/resourceslices"

        def body(dev):
            return json.dumps({"metadata": {"name": "b"}, "spec": {
                "driver": DRV, "nodeName": NODE, "pool": {"name": "p", "resourceSliceCount": 1},
                "devices": [dict({"name": "d0"}, **dev)]}}).encode()
        c, f = ["example.com/attached"], ["example.com/failed"]
        P = "spec.devices[0]."
        for dev, field, words in (
                ({"bindingConditions": ["a", "b", "c", "d", "e"], "bindingFailureConditions": f},
                 "bindingConditions", "Too many: 5: must have at most 4 items"),
                ({"bindingConditions": c, "bindingFailureConditions": ["x"] * 5},
                 "bindingFailureConditions", "Too many"),
                ({"bindingConditions": ["ok", "bad key"], "bindingFailureConditions": f},
                 "bindingConditions[1]", 'Invalid value: "bad key"'),
                ({"bindingConditions": c, "bindingFailureConditions": ["Bad_Prefix.com/x"]},
                 "bindingFailureConditions[0]", "Invalid value"),
                ({"bindingConditions": ["a", "a"], "bindingFailureConditions": f},
                 "bindingConditions[1]", 'Duplicate value: "a"'),
                ({"bindingConditions": c, "bindingFailureConditions": ["x", c[0]]},
                 "bindingFailureConditions[1]",
                 "bindingFailureConditions must not overlap with bindingConditions"),
                ({"bindingFailureConditions": f}, "bindingConditions",
                 "bindingConditions are required to use bindingFailureConditions"),
                ({"bindingConditions": c}, "bindingFailureConditions",
                 "bindingFailureConditions are required to use bindingConditions"),
                ({"bindingConditions": "a", "bindingFailureConditions": f}, "bindingConditions",
                 "must be a list"),
                ({"bindingConditions": [1], "bindingFailureConditions": f}, "bindingConditions[0]",
                 "must be a string"),
                ({"bindsToNode": "yes"}, "bindsToNode", "must be a boolean")):
            obj = self.status(api, 422, "Invalid", "POST", S, body=body(dev))
            self.assertIn('ResourceSlice.resource.k8s.io "b" is invalid: ' + P + field + ": ",
                          obj["message"])
            self.assertIn(words, obj["message"])
        # binding conditions do not lower the 128 devices of a slice
        many = [{"name": "d%d" % i, "bindingConditions": c, "bindingFailureConditions": f}
                for i in range(128)]
        code, made = self.req(api, "POST", S, body=json.dumps({"metadata": {"name": "many"}, "spec": {
            "driver": DRV, "nodeName": NODE, "pool": {"name": "q", "resourceSliceCount": 1},
            "devices": many}}).encode())
        self.assertEqual(code, 201, made)
        # bindsToNode alone, and a full good set: stored, and shown
        m = api.mark()
        good = {"bindingConditions": c + ["Ready"], "bindingFailureConditions": f,
                "bindsToNode": True}
        code, made = self.req(api, "POST", S, body=body(good))
        self.assertEqual(code, 201, made)
        self.assertEqual(made["spec"]["devices"][0]["bindingConditions"], c + ["Ready"])
        self.assertIs(made["spec"]["devices"][0]["bindsToNode"], True)
        ev = api.wait_event("slice", type="ADDED", name="b", since=m)
        self.assertEqual(ev["devices"][0]["binding"],
                         "binding: example.com/attached,Ready / fail: example.com/failed, "
                         "bindsToNode")
        code, _ = self.req(api, "DELETE", S + "/b")
        self.assertEqual(code, 200)
        code, made = self.req(api, "POST", S, body=body({"bindsToNode": False}))
        self.assertEqual(code, 201, made)
        # a claim's allocation results carry them under the same rules
        self.claim(os.path.join(self.path("api"), "kubeconfig"), "bc", ["gopher0"], "--no-check")
        C = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/bc"
        code, cl = self.req(api, "GET", C)
        self.assertEqual(code, 200, cl)
        del cl["metadata"]["resourceVersion"]
        res = cl["status"]["allocation"]["devices"]["results"][0]
        res.update({"bindingConditions": c, "bindingFailureConditions": c})
        obj = self.status(api, 422, "Invalid", "PUT", C + "/status", body=json.dumps(cl).encode())
        self.assertIn("status.allocation.devices.results[0].bindingFailureConditions[0]: ",
                      obj["message"])
        res["bindingFailureConditions"] = f
        code, upd = self.req(api, "PUT", C + "/status", body=json.dumps(cl).encode())
        self.assertEqual(code, 200, upd)
        self.assertEqual(upd["status"]["allocation"]["devices"]["results"][0]["bindingConditions"], c)
        self.assertTrue(api.alive())

    def test_binding_conditions_table(self):
        """Without --json: the device table's BINDING column."""
        p = Proc([binary("kdpctl"), "dra", "apiserver", "--dir", self.path("api"), "--node", NODE],
                 "dra-apiserver", stdin=True)
        p.stop_last = True
        self.start_proc(p)
        line = p.wait_line(r"serving https://\S+ ", since=0)
        p.ready = {"url": re.search(r"https://\S+", line).group(0)}
        code, made = self.req(p, "POST", "/apis/resource.k8s.io/v1/resourceslices", body=json.dumps(
            {"metadata": {"name": "t"}, "spec": {
                "driver": DRV, "nodeName": NODE, "pool": {"name": "p", "resourceSliceCount": 1},
                "devices": [{"name": "nic0", "bindingConditions": ["Attached"],
                             "bindingFailureConditions": ["Failed"]},
                            {"name": "nic1", "bindsToNode": True}]}}).encode())
        self.assertEqual(code, 201, made)
        p.wait_line(r"^\s*DEVICE\s+ATTRIBUTES\s+CAPACITY\s+TAINTS\s+BINDING\s*$")
        p.wait_line(r"^\s*nic0\s+binding: Attached / fail: Failed\s*$")
        p.wait_line(r"^\s*nic1\s+bindsToNode\s*$")


    def test_binding_state(self):
        """`dra claim` copies a slice device's binding conditions into its
        result (with allocationTimestamp), as the scheduler does; the claim's
        binding state, PreBind's check, in its output, the apiserver's claim
        events and the Table's Binding column: pending until the status entry
        of the result's driver, pool and device (shareID ignored; another
        pool's or driver's does not count) has them True; failed when a
        failure condition is True."""
        api = self.dra_apiserver()
        kc = os.path.join(self.path("api"), "kubeconfig")
        S = "/apis/resource.k8s.io/v1/resourceslices"
        code, made = self.req(api, "POST", S, body=json.dumps({"metadata": {"name": "s"}, "spec": {
            "driver": DRV, "nodeName": NODE, "pool": {"name": NODE, "resourceSliceCount": 1},
            "devices": [{"name": "gopher0", "bindingConditions": ["Attached"],
                         "bindingFailureConditions": ["Failed"], "bindsToNode": True},
                        {"name": "gopher1"}]}}).encode())
        self.assertEqual(code, 201, made)
        m = api.mark()
        r = self.kdpctl("dra", "claim", "--kubeconfig", kc, "default/bc", "--driver", DRV, "--node",
                        NODE, "--device", "gopher0,gopher1", "--json")
        self.assertEqual(r.returncode, 0, r)
        ev = json.loads(r.stdout.splitlines()[-1])
        self.assertEqual((ev["event"], ev["binding_state"], ev["binding"]),
                         ("claim", "pending", "pending: waiting for Attached"))
        api.wait_event("claim", name="bc", binding_state="pending", since=m)
        C = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/"
        code, cl = self.req(api, "GET", C + "bc")
        alloc = cl["status"]["allocation"]
        res = alloc["devices"]["results"]
        self.assertEqual((res[0]["bindingConditions"], res[0]["bindingFailureConditions"]),
                         (["Attached"], ["Failed"]))
        self.assertNotIn("bindingConditions", res[1])
        self.assertRegex(alloc["allocationTimestamp"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        self.assertEqual(alloc["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"],
                         [NODE])
        # no binding conditions: ready at once
        self.assertIn("binding ready", self.kdpctl("dra", "claim", "--kubeconfig", kc, "default/plain",
                                                   "--driver", DRV, "--node", NODE, "--device",
                                                   "gopher1").stderr)

        def cond(t, status="True", reason="Attached"):
            return {"type": t, "status": status, "reason": reason,
                    "lastTransitionTime": "2026-11-27T21:00:00Z"}

        def put_status(claim):
            code, out = self.req(api, "PUT", C + claim["metadata"]["name"] + "/status",
                                 body=json.dumps(claim).encode())
            self.assertEqual(code, 200, out)
            return out
        # a claim as the scheduler leaves it: gopher0 twice shared, and a
        # gopher0 of another pool and of another driver
        s1, s2 = "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"
        other = "other.example.com"
        bc = {"bindingConditions": ["Attached"], "bindingFailureConditions": ["Failed"]}
        results = [dict(bc, request="r", driver=DRV, pool=NODE, device="gopher0", shareID=s1),
                   dict(bc, request="r", driver=DRV, pool=NODE, device="gopher0", shareID=s2),
                   dict(bc, request="r", driver=DRV, pool="node-b", device="gopher0"),
                   dict(bc, request="r", driver=other, pool=NODE, device="gopher0")]
        code, p = self.req(api, "POST", C[:-1], body=json.dumps({
            "metadata": {"name": "p", "namespace": "default"}, "spec": {"devices": {"requests": [
                {"name": "r", "exactly": {"deviceClassName": DRV, "allocationMode": "ExactCount",
                                          "count": 4}}]}}}).encode())
        self.assertEqual(code, 201, p)
        p["status"] = {"allocation": {"devices": {"results": results},
                                      "allocationTimestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                           time.gmtime())}}
        m = api.mark()
        p = put_status(p)
        ev = api.wait_event("claim", name="p", since=m)
        self.assertEqual(ev["binding"], "pending: waiting for Attached,Attached,Attached,Attached")
        p["status"]["devices"] = [
            {"driver": DRV, "pool": "node-b", "device": "gopher0", "conditions": [cond("Attached")]},
            {"driver": other, "pool": NODE, "device": "gopher0", "conditions": [cond("Attached")]},
            {"driver": DRV, "pool": NODE, "device": "gopher0", "shareID": s2,
             "conditions": [cond("Attached", "False", "Waiting")]}]
        m = api.mark()
        p = put_status(p)
        ev = api.wait_event("claim", name="p", since=m)
        self.assertEqual((ev["binding_state"], ev["binding"]),
                         ("pending", "pending: waiting for Attached,Attached"))
        # the second share's entry answers for both shares
        p["status"]["devices"][2]["conditions"] = [cond("Attached")]
        m = api.mark()
        p = put_status(p)
        ev = api.wait_event("claim", name="p", since=m)
        self.assertEqual((ev["binding_state"], ev["binding"]), ("ready", "ready"))
        p["status"]["devices"][2]["conditions"].append(cond("Failed", reason="NoFabricPort"))
        m = api.mark()
        p = put_status(p)
        ev = api.wait_event("claim", name="p", since=m)
        self.assertEqual((ev["binding_state"], ev["binding"]), ("failed", "failed: Failed NoFabricPort"))
        # the Table's Binding column (kubectl get -o wide)
        with open(os.path.join(self.path("api"), "token")) as f:
            tok = f.read().strip()
        c = self.conn(api)
        c.request("GET", C[:-1], headers={"Authorization": "Bearer " + tok, "Accept":
                                          "application/json;as=Table;v=v1;g=meta.k8s.io"})
        t = json.loads(c.getresponse().read())
        c.close()
        self.assertEqual([(x["name"], x["priority"]) for x in t["columnDefinitions"]][-1], ("Binding", 1))
        cells = {row["cells"][0]: row["cells"][-1] for row in t["rows"]}
        self.assertEqual(cells, {"bc": "pending: waiting for Attached", "plain": "ready",
                                 "p": "failed: Failed NoFabricPort"})
        self.assertTrue(api.alive())


class Window(Base):
    """Watches that resume: from the window of the last 1000 events, or 410."""

    def test_expired(self):
        api = self.dra_apiserver()
        S = "/apis/resource.k8s.io/v1/resourceslices"
        with open(os.path.join(self.path("api"), "token")) as f:
            h = {"Authorization": "Bearer " + f.read().strip(), "Content-Type": "application/json"}
        c = self.conn(api)  # one connection, kept alive
        body = {"metadata": {"name": "s1"},
                "spec": {"driver": DRV, "nodeName": NODE,
                         "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
                         "devices": []}}
        c.request("POST", S, body=json.dumps(body), headers=h)
        obj = json.loads(c.getresponse().read())
        first = int(obj["metadata"]["resourceVersion"])
        for gen in range(2, 1103):  # 1101 updates: the first ones leave the window
            obj["spec"]["pool"]["generation"] = gen
            c.request("PUT", S + "/s1", body=json.dumps(obj), headers=h)
            r = c.getresponse()
            obj = json.loads(r.read())
            self.assertEqual(r.status, 200, obj)
        c.close()
        c = self.conn(api)
        c.request("GET", S + "?watch=true&resourceVersion=%d" % first, headers=h)
        lines = [json.loads(x) for x in c.getresponse().read().splitlines() if x.strip()]
        c.close()
        self.assertEqual(len(lines), 1, lines[:3])
        self.assertEqual(lines[0]["type"], "ERROR")
        self.assertEqual((lines[0]["object"]["code"], lines[0]["object"]["reason"]),
                         (410, "Expired"))
        self.assertIn("too old resource version", lines[0]["object"]["message"])
        # from a recent one: the events since, then the stream stays open until timeoutSeconds
        recent = int(obj["metadata"]["resourceVersion"]) - 3
        c = self.conn(api)
        c.request("GET", S + "?watch=true&timeoutSeconds=1&resourceVersion=%d" % recent,
                  headers=h)
        lines = [json.loads(x) for x in c.getresponse().read().splitlines() if x.strip()]
        c.close()
        self.assertEqual([e["object"]["spec"]["pool"]["generation"] for e in lines],
                         [1100, 1101, 1102])


class GoneClients(Base):
    """Watch clients that go while nothing is queued for them are found and
    their watches freed: the cap (64) is not eaten by them."""

    def test_gone_watch_clients(self):
        api = self.dra_apiserver()
        S = "/apis/resource.k8s.io/v1/resourceslices?watch=true&resourceVersion=1"
        with open(os.path.join(self.path("api"), "token")) as f:
            h = {"Authorization": "Bearer " + f.read().strip()}

        def watch():
            c = self.conn(api)
            c.request("GET", S, headers=h)
            r = c.getresponse()
            return c, r.status

        conns = [watch() for _ in range(64)]
        self.assertEqual({st for _, st in conns}, {200})
        c, st = watch()  # the 65th: over the cap
        self.assertEqual(st, 429)
        c.close()
        for c, _ in conns:
            c.close()
        time.sleep(6)  # the reaper runs every 5 s
        conns = [watch() for _ in range(3)]
        self.assertEqual([st for _, st in conns], [200, 200, 200])
        for c, _ in conns:
            c.close()
        self.assertTrue(api.alive())


if __name__ == "__main__":
    unittest.main()
