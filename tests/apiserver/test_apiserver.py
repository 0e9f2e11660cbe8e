#!/usr/bin/python3
"""The API-server emulator (kdp-test-apiserver) against clients we did not
write: the machine's kubectl (through discovery, with the emulator's
kubeconfigs) and Debian's python3-kubernetes (CustomObjectsApi). Proves its
REST conventions before kdp's DRA driver is tested with it.

usage: KDP_BIN_DIR=<build>/bin /usr/bin/python3 test_apiserver.py [-v] [Test.name ...]
"""

import json
import os
import shutil
import socket
import ssl
import sys
import threading
import time
import unittest
import urllib.request
import warnings

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from kdptest import ProcTest, figure, log, percentile, print_figures, run  # noqa: E402
from kdptest.apiserver import ApiServer  # noqa: E402

try:
    import kubernetes  # noqa: E402
    from kubernetes import client as kclient  # noqa: E402
    from kubernetes import config as kconfig  # noqa: E402
    from kubernetes import watch as kwatch  # noqa: E402
    from kubernetes.client.rest import ApiException  # noqa: E402
except ImportError:  # pragma: no cover - the test fails with the reason below
    kubernetes = None

GROUP = "resource.k8s.io"
DRIVER = "gpu.example.com"
NODE = "node-a"
KUBECTL = shutil.which("kubectl")


def slice_body(node=NODE, driver=DRIVER, devices=2, name=None, generation=1, count=1, version="v1",
               labels=None):
    """A ResourceSlice of `version` (v1beta1: devices nest under basic)."""
    devs = []
    for i in range(devices):
        d = {"attributes": {"index": {"int": i}, "model": {"string": "X%d" % i},
                            "driverVersion": {"version": "1.2.%d" % i}},
             "capacity": {"memory": {"value": "16Gi"}}}
        devs.append({"name": "gpu%d" % i, "basic": d} if version == "v1beta1" else dict(d, name="gpu%d" % i))
    md = {"name": name} if name else {"generateName": "%s-%s-" % (node, driver)}
    if labels:
        md["labels"] = labels
    md["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": node,
                              "uid": "00000000-0000-4000-8000-000000000001", "controller": True}]
    return {"apiVersion": "%s/%s" % (GROUP, version), "kind": "ResourceSlice", "metadata": md,
            "spec": {"driver": driver, "nodeName": node,
                     "pool": {"name": node, "generation": generation, "resourceSliceCount": count},
                     "devices": devs}}


class ApiTest(ProcTest):
    """A test with one emulator (self.api) and helpers for both clients."""

    TEST_BOUND = 120.0
    VERSIONS = None
    NODES = (NODE,)

    def setUp(self):
        super().setUp()
        self.assertIsNotNone(kubernetes, "python3-kubernetes is missing (apt-get install python3-kubernetes)")
        self.api = self.start_proc(ApiServer(self.path("api"), nodes=self.NODES, versions=self.VERSIONS))
        self.home = self.path("home")
        os.makedirs(self.home)

    def tearDown(self):
        # a -race build of the emulator (go build -race) reports here
        for p in self.procs:
            self.assertNotIn("WARNING: DATA RACE", p.log_text(), p.name)
        super().tearDown()

    # -- kubectl -------------------------------------------------------------

    def kubectl(self, *args, kubeconfig=None, rc=0, timeout=60):
        self.assertTrue(KUBECTL, "kubectl is not installed")
        argv = [KUBECTL, "--kubeconfig", kubeconfig or self.api.kubeconfig_token,
                "--cache-dir", self.path("kubecache"), "--request-timeout", "20s"] + list(args)
        env = dict(os.environ, HOME=self.home, KUBECONFIG="")
        env.pop("KUBECONFIG")
        return run(argv, timeout=timeout, check_rc=rc, env=env)

    # -- python3-kubernetes ----------------------------------------------------

    def custom(self, kubeconfig=None):
        """A CustomObjectsApi from one of the emulator's kubeconfigs."""
        api_client = kconfig.new_client_from_config(config_file=kubeconfig or self.api.kubeconfig_token)
        self.addCleanup(api_client.close)
        return kclient.CustomObjectsApi(api_client)

    def raises(self, status, fn, *args, **kw):
        """Calls fn; asserts an ApiException with that HTTP status; returns
        its decoded body (a Status)."""
        with self.assertRaises(ApiException) as cm:
            fn(*args, **kw)
        e = cm.exception
        self.assertEqual(e.status, status, "%s: %s" % (e.status, e.body))
        return json.loads(e.body) if e.body else None


# ---------------------------------------------------------------------------

class Basics(ApiTest):

    def test_files_tls_and_http2(self):
        api = self.api
        for name in ("ca.crt", "token", "client.crt", "client.key", "kubeconfig-token", "kubeconfig-cert",
                     "kubeconfig-data", "serviceaccount/token", "serviceaccount/ca.crt",
                     "serviceaccount/namespace"):
            self.assertTrue(os.path.isfile(api.path(name)), name)
        with open(api.path("serviceaccount/token")) as f:
            self.assertEqual(f.read(), api.token())
        with open(api.path("serviceaccount/namespace")) as f:
            self.assertEqual(f.read(), "kdp-system")
        self.assertTrue(api.url.startswith("https://127.0.0.1:"), api.url)
        # ALPN offers h2 (HTTP/2) and http/1.1
        for proto in ("h2", "http/1.1"):
            ctx = ssl.create_default_context(cafile=api.ca)
            ctx.set_alpn_protocols([proto])
            with socket.create_connection((api.host, api.port), timeout=5) as raw:
                with ctx.wrap_socket(raw, server_hostname="localhost") as tls:
                    self.assertEqual(tls.selected_alpn_protocol(), proto)
        # a certificate for 127.0.0.1 too
        ctx = ssl.create_default_context(cafile=api.ca)
        with socket.create_connection((api.host, api.port), timeout=5) as raw:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1"):
                pass
        # the in-cluster variables point at it
        env = api.incluster_env()
        self.assertEqual("https://%s:%s" % (env["KUBERNETES_SERVICE_HOST"], env["KUBERNETES_SERVICE_PORT"]),
                         api.url)

    def test_plain_http_refused(self):
        with socket.create_connection((self.api.host, self.api.port), timeout=5) as c:
            c.sendall(b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n")
            self.assertIn(b" 400 ", c.recv(200))

    def test_figures(self):
        """Measured, never asserted: start, request and watch latencies, RSS."""
        t0 = time.monotonic()
        api = self.start_proc(ApiServer(self.path("api-fig"), nodes=self.NODES))
        figure("emulator exec -> ready", "%.1f ms" % ((time.monotonic() - t0) * 1e3))
        co = self.custom(api.kubeconfig_token)
        lat = []
        for i in range(50):
            t = time.monotonic()
            co.create_cluster_custom_object(GROUP, "v1", "resourceslices", slice_body(name="f%d" % i, devices=128))
            lat.append((time.monotonic() - t) * 1e3)
        figure("create of a 128-device slice (python3-kubernetes, HTTP/1.1 keep-alive)",
               "p50 %.2f ms, p99 %.2f ms" % (percentile(lat, 50), percentile(lat, 99)))
        t = time.monotonic()
        n = len(co.list_cluster_custom_object(GROUP, "v1", "resourceslices")["items"])
        figure("list of %d slices x 128 devices" % n, "%.1f ms" % ((time.monotonic() - t) * 1e3))
        got = []
        rv = co.list_cluster_custom_object(GROUP, "v1", "resourceslices", limit=1)["metadata"]["resourceVersion"]
        w = kwatch.Watch()
        mark = api.mark()

        def watch():
            for ev in w.stream(co.list_cluster_custom_object, GROUP, "v1", "resourceslices",
                               resource_version=rv, timeout_seconds=10):
                got.append(time.monotonic())
                w.stop()
                break

        th = threading.Thread(target=watch)
        th.start()
        api.wait_event("watch_open", since=mark)
        t = time.monotonic()
        co.create_cluster_custom_object(GROUP, "v1", "resourceslices", slice_body(name="w"))
        th.join(15)
        figure("create -> watch event at the client", "%.2f ms" % ((got[0] - t) * 1e3))
        with open("/proc/%d/status" % api.pid) as f:
            rss = [line.split()[1] for line in f if line.startswith("VmRSS")][0]
        figure("emulator RSS with %d slices of 128 devices" % (n + 1), "%d MiB" % (int(rss) // 1024))

    def test_discovery_documents(self):
        api = self.api
        code, v = api.http("GET", "/version", token="")
        self.assertEqual((code, v["gitVersion"]), (200, "v1.34.0"))
        code, g = api.http("GET", "/apis")
        self.assertEqual(code, 200)
        self.assertEqual(g["kind"], "APIGroupList")
        grp = [x for x in g["groups"] if x["name"] == GROUP][0]
        self.assertEqual(grp["preferredVersion"]["groupVersion"], "resource.k8s.io/v1")
        code, rl = api.http("GET", "/apis/resource.k8s.io/v1")
        self.assertEqual((code, rl["kind"], rl["groupVersion"]), (200, "APIResourceList", "resource.k8s.io/v1"))
        res = {r["name"]: r for r in rl["resources"]}
        self.assertEqual(set(res), {"resourceslices", "resourceclaims", "resourceclaims/status", "deviceclasses"})
        self.assertEqual(res["resourceslices"]["kind"], "ResourceSlice")
        self.assertFalse(res["resourceslices"]["namespaced"])
        self.assertTrue(res["resourceclaims"]["namespaced"])
        self.assertEqual(res["resourceslices"]["singularName"], "resourceslice")
        self.assertEqual(sorted(res["resourceslices"]["verbs"]),
                         ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"])
        self.assertEqual(res["resourceclaims/status"]["verbs"], ["get", "patch", "update"])
        # the aggregated form, when asked for
        req_accept = ("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
                      "application/json")
        req = urllib.request.Request(api.url + "/apis", headers={"Accept": req_accept,
                                                                 "Authorization": "Bearer " + api.token()})
        with urllib.request.urlopen(req, context=api.ssl_context(), timeout=10) as resp:
            self.assertEqual(resp.headers["Content-Type"],
                             "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
            agg = json.loads(resp.read())
        self.assertEqual((agg["kind"], agg["apiVersion"]), ("APIGroupDiscoveryList", "apidiscovery.k8s.io/v2"))
        v1 = agg["items"][0]["versions"][0]
        self.assertEqual(v1["version"], "v1")
        rs = {r["resource"]: r for r in v1["resources"]}
        self.assertEqual(rs["resourceslices"]["scope"], "Cluster")
        self.assertEqual(rs["resourceclaims"]["scope"], "Namespaced")
        self.assertEqual(rs["resourceclaims"]["subresources"][0]["subresource"], "status")
        self.assertEqual(rs["resourceslices"]["responseKind"], {"group": GROUP, "version": "v1", "kind": "ResourceSlice"})
        code, st = api.http("GET", "/apis/resource.k8s.io/v1beta1")
        self.assertEqual((code, st["reason"]), (404, "NotFound"))
        code, core = api.http("GET", "/api/v1")
        self.assertEqual([r["name"] for r in core["resources"]], ["nodes"])
        code, node = api.http("GET", "/api/v1/nodes/" + NODE)
        self.assertEqual(code, 200)
        self.assertEqual((node["kind"], node["apiVersion"]), ("Node", "v1"))
        self.assertEqual(len(node["metadata"]["uid"]), 36)

    def test_kubectl_through_discovery(self):
        """kubectl v1.32 asks for aggregated discovery first; the emulator
        answers the unaggregated documents (Content-Type application/json)
        and kubectl falls back to them."""
        r = self.kubectl("api-resources", "--api-group=resource.k8s.io")
        lines = r.stdout.strip().splitlines()
        self.assertTrue(lines[0].split()[:2] == ["NAME", "SHORTNAMES"] or lines[0].startswith("NAME"), lines)
        names = sorted(line.split()[0] for line in lines[1:])
        self.assertEqual(names, ["deviceclasses", "resourceclaims", "resourceslices"])
        self.assertIn("resource.k8s.io/v1", r.stdout)
        r = self.kubectl("get", "nodes")
        self.assertIn(NODE, r.stdout)
        # kubectl speaks HTTP/2 and asked for aggregated discovery first (the
        # emulator's line for the request may come after kubectl's exit)
        self.api.sync()
        reqs = self.api.requests(resource="nodes")
        self.assertEqual(reqs[-1]["proto"], "HTTP/2.0")
        self.assertIn("Ready", r.stdout)
        r = self.kubectl("get", "resourceslices", "-o", "yaml")
        self.assertIn("items: []", r.stdout)

        api = self.custom()
        for driver in (DRIVER, "net.example.com"):
            api.create_cluster_custom_object(GROUP, "v1", "resourceslices", slice_body(driver=driver))
        r = self.kubectl("get", "resourceslices", "-o", "yaml")
        self.assertEqual(r.stdout.count("kind: ResourceSlice"), 2, r.stdout)
        self.assertIn("driver: gpu.example.com", r.stdout)
        self.assertIn("generateName: node-a-gpu.example.com-", r.stdout)
        self.assertIn("kind: Node", r.stdout)  # ownerReferences kept
        r = self.kubectl("get", "resourceslices", "--field-selector", "spec.driver=net.example.com",
                         "-o", "jsonpath={.items[*].spec.driver}")
        self.assertEqual(r.stdout.strip(), "net.example.com")
        # human output: the server's Table (NAME NODE DRIVER POOL AGE)
        r = self.kubectl("get", "resourceslices")
        self.assertEqual(r.stdout.splitlines()[0].split(), ["NAME", "NODE", "DRIVER", "POOL", "AGE"])
        r = self.kubectl("get", "resourceslices", "--field-selector", "spec.bogus=x", rc=1)
        self.assertIn("field label not supported", r.stderr)
        name = [s for s in self.api.slices() if s["spec"]["driver"] == DRIVER][0]["metadata"]["name"]
        mark = self.api.mark()
        r = self.kubectl("delete", "resourceslice", name)
        self.assertIn('resourceslice.resource.k8s.io "%s" deleted' % name, r.stdout)
        self.api.wait_event("request", verb="delete", resource="resourceslices", code=200, since=mark)
        self.assertEqual([s["spec"]["driver"] for s in self.api.slices()], ["net.example.com"])
        r = self.kubectl("get", "resourceslice", name, rc=1)
        self.assertIn('resourceslices.resource.k8s.io "%s" not found' % name, r.stderr)

    def test_kubectl_discovery_forms(self):
        """Both discovery forms: aggregated (what kubectl asks for first and
        a 1.34 server answers) and the per-version documents it falls back
        to (-aggregated-discovery=false)."""
        self.api.stop()
        for aggregated in (True, False):
            api = self.start_proc(ApiServer(self.path("api-%s" % aggregated), nodes=self.NODES,
                                            args=["-log-discovery", "-aggregated-discovery=%s" % str(aggregated).lower()]))
            self.api = api
            shutil.rmtree(self.path("kubecache"), ignore_errors=True)
            self.kubectl("get", "resourceslices")
            api.sync()
            paths = [e["path"] for e in api.requests()]
            self.assertIn("/apis", paths)
            self.assertEqual("/apis/resource.k8s.io/v1" in paths, not aggregated, paths)
            self.assertEqual(paths[-1], "/apis/resource.k8s.io/v1/resourceslices")
            apis = [e for e in api.requests() if e["path"] == "/apis"][0]
            self.assertIn("g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList", apis["accept"])
            api.stop()

    def test_kubectl_client_certificate(self):
        for kc in (self.api.kubeconfig_cert, self.api.kubeconfig_data):
            mark = self.api.mark()
            r = self.kubectl("get", "resourceclaims", "-n", "default", kubeconfig=kc)
            self.assertIn("No resources found in default namespace.", r.stdout + r.stderr)
            ev = self.api.wait_event("request", verb="list", resource="resourceclaims", since=mark)
            self.assertEqual((ev["auth"], ev["user"], ev["namespace"]), ("cert", "kdp-dra-driver", "default"))
        self.api.ok("create-claim default claim-1 --driver %s --pool %s --request gpu --device gpu0,gpu1"
                    " --node %s --reserved" % (DRIVER, NODE, NODE))
        r = self.kubectl("get", "resourceclaims", "-n", "default", kubeconfig=self.api.kubeconfig_cert)
        self.assertEqual(r.stdout.splitlines()[0].split(), ["NAME", "STATE", "AGE"])
        self.assertEqual(r.stdout.splitlines()[1].split()[:2], ["claim-1", "allocated,reserved"])
        r = self.kubectl("get", "resourceclaims", "-A", "-o", "yaml")
        self.assertIn("pool: node-a", r.stdout)


class Python(ApiTest):

    def test_crud_and_errors(self):
        api = self.custom()
        created = api.create_cluster_custom_object(GROUP, "v1", "resourceslices", slice_body())
        md = created["metadata"]
        name = md["name"]
        self.assertTrue(name.startswith("node-a-gpu.example.com-") and len(name) == len("node-a-gpu.example.com-") + 5)
        self.assertEqual(len(md["uid"]), 36)
        self.assertEqual(md["generation"], 1)
        self.assertEqual(md["ownerReferences"][0]["kind"], "Node")
        self.assertTrue(md["creationTimestamp"].endswith("Z"))
        rv1 = int(md["resourceVersion"])
        self.assertEqual(created["spec"]["devices"][0]["attributes"]["index"], {"int": 0})
        # get
        got = api.get_cluster_custom_object(GROUP, "v1", "resourceslices", name)
        self.assertEqual(got["metadata"]["resourceVersion"], md["resourceVersion"])
        # list (+ its resourceVersion) and field selectors
        api.create_cluster_custom_object(GROUP, "v1", "resourceslices", slice_body(node="node-b"))
        lst = api.list_cluster_custom_object(GROUP, "v1", "resourceslices")
        self.assertEqual(lst["kind"], "ResourceSliceList")
        self.assertEqual(len(lst["items"]), 2)
        self.assertGreater(int(lst["metadata"]["resourceVersion"]), rv1)
        for sel, n in (("spec.nodeName=node-a", 1), ("spec.nodeName!=node-a", 1), ("spec.driver=%s" % DRIVER, 2),
                       ("spec.driver=other.example.com", 0),
                       ("metadata.name=%s" % name, 1), ("spec.nodeName=node-a,spec.driver=%s" % DRIVER, 1)):
            got = api.list_cluster_custom_object(GROUP, "v1", "resourceslices", field_selector=sel)
            self.assertEqual(len(got["items"]), n, sel)
        st = self.raises(400, api.list_cluster_custom_object, GROUP, "v1", "resourceslices",
                         field_selector="spec.devices=x")
        self.assertEqual(st["reason"], "BadRequest")
        self.assertEqual(st["message"], "field label not supported for resource.k8s.io/v1, Kind=ResourceSlice: "
                         "spec.devices")
        # spec.pool.name is no field label of the API server either (-pool-field-selector adds it)
        self.raises(400, api.list_cluster_custom_object, GROUP, "v1", "resourceslices",
                    field_selector="spec.pool.name=node-a")
        # replace (PUT): generation bumps on a spec change, not otherwise
        got["metadata"]["labels"] = {"a": "b"}
        cur = api.get_cluster_custom_object(GROUP, "v1", "resourceslices", name)
        cur["metadata"]["labels"] = {"a": "b"}
        upd = api.replace_cluster_custom_object(GROUP, "v1", "resourceslices", name, cur)
        self.assertEqual(upd["metadata"]["generation"], 1)
        self.assertGreater(int(upd["metadata"]["resourceVersion"]), rv1)
        # a no-op update writes nothing: same resourceVersion (and no watch event)
        same = api.replace_cluster_custom_object(GROUP, "v1", "resourceslices", name, upd)
        self.assertEqual(same["metadata"]["resourceVersion"], upd["metadata"]["resourceVersion"])
        upd["spec"]["pool"]["generation"] = 2
        upd2 = api.replace_cluster_custom_object(GROUP, "v1", "resourceslices", name, upd)
        self.assertEqual(upd2["metadata"]["generation"], 2)
        # a stale resourceVersion: 409 Conflict with the API server's words
        st = self.raises(409, api.replace_cluster_custom_object, GROUP, "v1", "resourceslices", name, upd)
        self.assertEqual(st["reason"], "Conflict")
        self.assertEqual(st["message"], 'Operation cannot be fulfilled on resourceslices.resource.k8s.io "%s": '
                         'the object has been modified; please apply your changes to the latest version '
                         'and try again' % name)
        self.assertEqual(st["details"], {"name": name, "group": GROUP, "kind": "resourceslices"})
        # label selectors
        self.assertEqual(len(api.list_cluster_custom_object(GROUP, "v1", "resourceslices",
                                                            label_selector="a=b")["items"]), 1)
        self.assertEqual(len(api.list_cluster_custom_object(GROUP, "v1", "resourceslices",
                                                            label_selector="a!=b")["items"]), 1)
        self.assertEqual(len(api.list_cluster_custom_object(GROUP, "v1", "resourceslices",
                                                            label_selector="a")["items"]), 1)
        # merge patch
        p = api.patch_cluster_custom_object(GROUP, "v1", "resourceslices", name,
                                            {"metadata": {"labels": {"c": "d"}},
                                             "spec": {"pool": {"generation": 3}}})
        self.assertEqual(p["metadata"]["labels"], {"a": "b", "c": "d"})
        self.assertEqual(p["spec"]["pool"]["generation"], 3)
        self.assertEqual(p["metadata"]["generation"], 3)
        # a patch naming a stale resourceVersion conflicts too
        self.raises(409, api.patch_cluster_custom_object, GROUP, "v1", "resourceslices", name,
                    {"metadata": {"resourceVersion": md["resourceVersion"]}})
        # create of an existing name: 409 AlreadyExists
        body = slice_body(name="fixed")
        api.create_cluster_custom_object(GROUP, "v1", "resourceslices", body)
        st = self.raises(409, api.create_cluster_custom_object, GROUP, "v1", "resourceslices", body)
        self.assertEqual((st["reason"], st["message"]),
                         ("AlreadyExists", 'resourceslices.resource.k8s.io "fixed" already exists'))
        # delete, then 404
        d = api.delete_cluster_custom_object(GROUP, "v1", "resourceslices", name)
        self.assertEqual((d["kind"], d["status"], d["details"]["name"]), ("Status", "Success", name))
        st = self.raises(404, api.get_cluster_custom_object, GROUP, "v1", "resourceslices", name)
        self.assertEqual((st["reason"], st["message"], st["details"]["kind"]),
                         ("NotFound", 'resourceslices.resource.k8s.io "%s" not found' % name, "resourceslices"))
        self.raises(404, api.delete_cluster_custom_object, GROUP, "v1", "resourceslices", name)
        self.raises(404, api.replace_cluster_custom_object, GROUP, "v1", "resourceslices", name, upd)
        # resourceVersion is one counter across resources, like etcd's revision
        rvs = [int(s["metadata"]["resourceVersion"]) for s in self.api.slices()]
        self.assertEqual(len(set(rvs)), len(rvs))

    def test_validation_422(self):
        api = self.custom()

        def invalid(body, *fields):
            st = self.raises(422, api.create_cluster_custom_object, GROUP, "v1", "resourceslices", body)
            self.assertEqual(st["reason"], "Invalid")
            self.assertEqual(st["details"]["kind"], "ResourceSlice")
            self.assertEqual(st["details"]["group"], GROUP)
            got = [c["field"] for c in st["details"]["causes"]]
            for f in fields:
                self.assertIn(f, got, st)
            self.assertIn(" is invalid: ", st["message"])
            return st

        b = slice_body(name="x")
        b["spec"]["driver"] = ""
        st = invalid(b, "spec.driver")
        self.assertEqual(st["message"], 'ResourceSlice.resource.k8s.io "x" is invalid: spec.driver: Required value')
        self.assertEqual(st["details"]["causes"], [{"reason": "FieldValueRequired", "message": "Required value",
                                                    "field": "spec.driver"}])
        b["spec"]["driver"] = "a" * 60 + ".example.com"
        st = invalid(b, "spec.driver")
        self.assertIn("Too long: may not be more than 63 bytes", st["message"])
        b["spec"]["driver"] = "Bad_Driver"
        invalid(b, "spec.driver")
        b = slice_body(name="x")
        b["spec"]["pool"] = {"name": "", "generation": -1, "resourceSliceCount": 0}
        invalid(b, "spec.pool.name", "spec.pool.generation", "spec.pool.resourceSliceCount")
        b = slice_body(name="x")
        del b["spec"]["nodeName"]
        st = invalid(b, "spec")
        self.assertIn("exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required",
                      st["message"])
        b["spec"]["allNodes"] = True
        b["spec"]["nodeName"] = NODE
        st = invalid(b, "spec")
        self.assertIn("but multiple fields are set", st["message"])
        b = slice_body(name="x", devices=129)
        st = invalid(b, "spec.devices")
        self.assertIn("spec.devices: Too many: 129: must have at most 128 items", st["message"])
        b = slice_body(name="x", devices=2)
        b["spec"]["devices"][1]["name"] = "gpu0"
        st = invalid(b, "spec.devices[1]")
        self.assertIn('Duplicate value: "gpu0"', st["message"])
        b["spec"]["devices"][1]["name"] = "GPU_1"
        invalid(b, "spec.devices[1].name")
        b = slice_body(name="x", devices=1)
        attrs = b["spec"]["devices"][0]["attributes"]
        attrs["both"] = {"int": 1, "bool": True}
        attrs["none"] = {}
        attrs["long"] = {"string": "s" * 65}
        attrs["ver"] = {"version": "1.2"}
        attrs["bad/name/x"] = {"int": 1}
        attrs["example.com/ok_name"] = {"bool": True}
        invalid(b, "spec.devices[0].attributes[both]", "spec.devices[0].attributes[none]",
                "spec.devices[0].attributes[long].string", "spec.devices[0].attributes[ver].version",
                "spec.devices[0].attributes[bad/name/x]")
        b = slice_body(name="x", devices=1)
        for i in range(32):
            b["spec"]["devices"][0]["attributes"]["a%d" % i] = {"int": i}
        st = invalid(b, "spec.devices[0]")
        self.assertIn("the total number of attributes and capacities must not exceed 32", st["message"])
        # metadata: ownerReferences complete (the Node's uid), labels valid
        b = slice_body(name="x")
        b["metadata"]["ownerReferences"][0]["uid"] = ""
        st = invalid(b, "metadata.ownerReferences.uid")
        self.assertIn('metadata.ownerReferences.uid: Invalid value: "": uid must not be empty', st["message"])
        b = slice_body(name="x", labels={"ok.example.com/a": "b", "bad key": "v", "k": "-bad-"})
        st = invalid(b, "metadata.labels")
        self.assertEqual(len(st["details"]["causes"]), 2, st)
        b = slice_body(name="x")
        del b["metadata"]["name"]
        st = invalid(b, "metadata.name")
        self.assertIn("name or generateName is required", st["message"])
        # taints: a label name for the key, a label value, one of the effects,
        # at most 16; a slice with a tainted device holds 64 devices at most
        b = slice_body(name="x", devices=1)
        b["spec"]["devices"][0]["taints"] = [
            {"key": "bad key", "effect": "NoSchedule"}, {"key": "k", "value": "-v", "effect": "NoSchedule"},
            {"key": "k2", "effect": "Sometimes"}, {"key": "k3"}]
        st = invalid(b, "spec.devices[0].taints[0].key", "spec.devices[0].taints[1].value",
                     "spec.devices[0].taints[2].effect", "spec.devices[0].taints[3].effect")
        self.assertIn('spec.devices[0].taints[2].effect: Unsupported value: "Sometimes"', st["message"])
        b["spec"]["devices"][0]["taints"] = [{"key": "k%d" % i, "effect": "NoSchedule"} for i in range(17)]
        invalid(b, "spec.devices[0].taints")
        b = slice_body(name="x", devices=65)
        b["spec"]["devices"][3]["taints"] = [{"key": "example.com/unhealthy", "effect": "NoExecute"}]
        st = invalid(b, "spec.devices")
        self.assertIn("must have at most 64 items", st["message"])
        b = slice_body(name="tainted", devices=1)
        b["spec"]["devices"][0]["taints"] = [{"key": "example.com/unhealthy", "value": "probe",
                                              "effect": "NoSchedule"}]
        got = api.create_cluster_custom_object(GROUP, "v1", "resourceslices", b)
        self.assertRegex(got["spec"]["devices"][0]["taints"][0]["timeAdded"],
                         r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")  # the server's now
        api.delete_cluster_custom_object(GROUP, "v1", "resourceslices", "tainted")
        # 128 devices is fine; exactly 32 attributes+capacities too
        api.create_cluster_custom_object(GROUP, "v1", "resourceslices", slice_body(name="big", devices=128))
        b = slice_body(name="full", devices=1)
        for i in range(28):
            b["spec"]["devices"][0]["attributes"]["a%d" % i] = {"int": i}
        api.create_cluster_custom_object(GROUP, "v1", "resourceslices", b)
        # driver, pool name and node name are immutable
        cur = api.get_cluster_custom_object(GROUP, "v1", "resourceslices", "big")
        cur["spec"]["driver"] = "other.example.com"
        st = self.raises(422, api.replace_cluster_custom_object, GROUP, "v1", "resourceslices", "big", cur)
        self.assertIn("spec.driver: Invalid value: \"other.example.com\": field is immutable", st["message"])
        # apiVersion/kind mismatch: 400
        b = slice_body(name="y", version="v1beta1")
        self.raises(400, api.create_cluster_custom_object, GROUP, "v1", "resourceslices", b)

    def test_sharing_validation_and_canonical_quantities(self):
        """Counter sets, consumesCounters and request policies validated as
        the 1.35-1.37 API server does (422 naming each field); quantities
        written back in resource.Quantity's canonical form, which
        python3-kubernetes and kubectl then read."""
        api = self.custom()

        def invalid(body, *fields):
            st = self.raises(422, api.create_cluster_custom_object, GROUP, "v1", "resourceslices", body)
            got = [c["field"] for c in st["details"]["causes"]]
            for f in fields:
                self.assertIn(f, got, st)
            return st

        def counters_body(sets):
            b = slice_body(name="ctr", devices=0)
            del b["spec"]["devices"]
            b["spec"]["sharedCounters"] = sets
            return b

        ok = {"name": "card-0", "counters": {"memory": {"value": "80Gi"}, "slices": {"value": "7"}}}
        st = invalid(counters_body([ok, dict(ok), {"name": "Card_1", "counters": {}},
                                    {"name": "c2", "counters": {"Bad": {"value": "1"}, "x": {"value": "lots"}}}]),
                     "spec.sharedCounters[1].name", "spec.sharedCounters[2].name",
                     "spec.sharedCounters[2].counters", "spec.sharedCounters[3].counters",
                     "spec.sharedCounters[3].counters[x].value")
        self.assertIn('spec.sharedCounters[1].name: Duplicate value: "card-0"', st["message"])
        invalid(counters_body([dict(ok, name="s%d" % i) for i in range(9)]), "spec.sharedCounters")
        st = invalid(counters_body([{"name": "neg", "counters": {"memory": {"value": "-1Gi"}}}]),
                     "spec.sharedCounters[0].counters[memory].value")
        self.assertIn("must be greater than or equal to 0", st["message"])
        both = counters_body([ok])
        both["spec"]["devices"] = slice_body(devices=1)["spec"]["devices"]
        st = invalid(both, "spec")
        self.assertIn("only one of `sharedCounters` or `devices` is allowed", st["message"])

        b = slice_body(name="x", devices=1)
        dev = b["spec"]["devices"][0]
        dev["consumesCounters"] = [{"counterSet": "card-0", "counters": {"memory": {"value": "10Gi"}}},
                                   {"counterSet": "card-0", "counters": {"memory": {"value": "1"}},
                                    "compatibilityGroups": ["mig", "mig"]}]
        st = invalid(b, "spec.devices[0].consumesCounters[1].counterSet",
                     "spec.devices[0].consumesCounters[1].compatibilityGroups[1]")
        dev["consumesCounters"] = [{"counterSet": "a%d" % i, "counters": {"m": {"value": "1"}}} for i in range(3)]
        invalid(b, "spec.devices[0].consumesCounters")
        b = slice_body(name="x", devices=65)
        b["spec"]["devices"][0]["consumesCounters"] = [{"counterSet": "card-0", "counters": {"m": {"value": "1"}}}]
        st = invalid(b, "spec.devices")
        self.assertIn("must have at most 64 items", st["message"])

        # request policies: only with allowMultipleAllocations, each rule
        b = slice_body(name="x", devices=1)
        cap = b["spec"]["devices"][0]["capacity"]
        cap["memory"] = {"value": "80Gi", "requestPolicy": {"default": "1Gi", "validRange": {"min": "1Gi"}}}
        st = invalid(b, "spec.devices[0].capacity[memory].requestPolicy")
        self.assertIn("Forbidden: allowMultipleAllocations must be true", st["message"])
        b["spec"]["devices"][0]["allowMultipleAllocations"] = True
        for policy, field, words in [
                ({"validValues": ["8Gi", "4Gi"], "default": "4Gi"}, "validValues[1]", "sorted in ascending order"),
                ({"validValues": ["8Gi", "90Gi"], "default": "8Gi"}, "validValues[1]",
                 "option is larger than capacity value: 80Gi"),
                ({"validValues": ["8Gi"], "default": "4Gi"}, "validValues", "default value is not valid"),
                ({"validValues": ["8Gi"]}, "default", "required when validValues is defined"),
                ({"validValues": ["8Gi"], "default": "8Gi", "validRange": {"min": "1"}}, "",
                 "exactly one policy can be specified"),
                ({"validRange": {"min": "2Gi", "step": "2Gi"}, "default": "3Gi"}, "default",
                 "value is not a multiple of a given step (2Gi) from (2Gi)"),
                ({"validRange": {"min": "2Gi", "max": "1Gi"}, "default": "2Gi"}, "validRange.max",
                 "min is larger than max"),
                ({"validRange": {"min": "1Gi", "step": "0"}, "default": "1Gi"}, "validRange.step", "must be positive"),
                ({"validRange": {"min": "1n"}, "default": "1n"}, "default", "cannot be represented as a milli value"),
        ]:
            cap["memory"]["requestPolicy"] = policy
            st = invalid(b, "spec.devices[0].capacity[memory].requestPolicy" + ("." + field if field else ""))
            self.assertIn(words, st["message"])

        # accepted, and stored canonical: 1.5Gi -> 1536Mi, 0.5 -> 500m, 2048Ki -> 2Mi, 1500 -> 1500
        cap["memory"]["requestPolicy"] = {"default": "1.5Gi", "validRange": {"min": "0.5Gi", "step": "0.5Gi"}}
        cap["cores"] = {"value": "0.5"}
        b["spec"]["devices"][0]["consumesCounters"] = [
            {"counterSet": "card-0", "counters": {"memory": {"value": "2048Ki"}, "ops": {"value": "1500"}}}]
        got = api.create_cluster_custom_object(GROUP, "v1", "resourceslices", b)
        d = got["spec"]["devices"][0]
        self.assertEqual(d["capacity"]["memory"]["requestPolicy"],
                         {"default": "1536Mi", "validRange": {"min": "512Mi", "step": "512Mi"}})
        self.assertEqual(d["capacity"]["cores"]["value"], "500m")
        self.assertEqual(d["consumesCounters"][0]["counters"],
                         {"memory": {"value": "2Mi"}, "ops": {"value": "1500"}})
        self.assertTrue(d["allowMultipleAllocations"])
        api.create_cluster_custom_object(GROUP, "v1", "resourceslices", counters_body([ok]))
        r = self.kubectl("get", "resourceslices", "ctr", "-o",
                         "jsonpath={.spec.sharedCounters[0].counters.memory.value}")
        self.assertEqual(r.stdout, "80Gi")
        r = self.kubectl("get", "resourceslices", "x", "-o",
                         "jsonpath={.spec.devices[0].consumesCounters[0].counterSet}")
        self.assertEqual(r.stdout, "card-0")

    def test_auth_401_403_rotation(self):
        api = self.custom()
        api.list_cluster_custom_object(GROUP, "v1", "resourceslices")
        # a wrong token: 401 Unauthorized Status
        code, st = self.api.http("GET", "/apis/resource.k8s.io/v1/resourceslices", token="nope")
        self.assertEqual((code, st["kind"], st["reason"], st["message"], st["code"]),
                         (401, "Status", "Unauthorized", "Unauthorized", 401))
        # forbid: RBAC's 403
        self.api.ok("forbid create resourceslices")
        st = self.raises(403, api.create_cluster_custom_object, GROUP, "v1", "resourceslices", slice_body())
        self.assertEqual(st["reason"], "Forbidden")
        self.assertEqual(st["message"], 'resourceslices.resource.k8s.io is forbidden: User '
                         '"system:serviceaccount:kdp-system:kdp-dra-driver" cannot create resource "resourceslices" '
                         'in API group "resource.k8s.io" at the cluster scope')
        self.api.ok("forbid get resourceclaims")
        st = self.raises(403, api.get_namespaced_custom_object, GROUP, "v1", "default", "resourceclaims", "c")
        self.assertIn('resourceclaims.resource.k8s.io "c" is forbidden', st["message"])
        self.assertIn('in the namespace "default"', st["message"])
        self.api.ok("allow create resourceslices")
        api.create_cluster_custom_object(GROUP, "v1", "resourceslices", slice_body())
        # rotation: the old token keeps working for the grace period only
        old = self.api.token()
        mark = self.api.mark()
        self.api.ok("token-rotate")
        new = self.api.token()
        self.assertNotEqual(old, new)
        with open(self.api.path("serviceaccount/token")) as f:
            self.assertEqual(f.read(), new)
        code, _ = self.api.http("GET", "/apis/resource.k8s.io/v1/resourceslices", token=old)
        self.assertEqual(code, 200)
        self.assertEqual(self.api.wait_event("request", since=mark, code=200)["auth"], "old-token")
        # the kubeconfig was rewritten with the new token: a fresh client works
        self.custom().list_cluster_custom_object(GROUP, "v1", "resourceslices")
        self.api.ok("token-revoke")
        self.raises(401, self.custom().list_cluster_custom_object, GROUP, "v1", "resourceslices")
        # the client certificate still works
        self.custom(self.api.kubeconfig_cert).list_cluster_custom_object(GROUP, "v1", "resourceslices")
        # no credentials at all: anonymous, refused by RBAC
        code, st = self.api.http("GET", "/apis/resource.k8s.io/v1/resourceslices", token="")
        self.assertEqual((code, st["reason"]), (403, "Forbidden"))
        self.assertIn('User "system:anonymous" cannot list resource "resourceslices"', st["message"])

    def test_token_grace_ends(self):
        self.api.stop()
        self.api = self.start_proc(ApiServer(self.path("api2"), nodes=self.NODES, token_grace=0.5))
        old = self.api.token()
        self.api.ok("token-rotate")
        self.assertEqual(self.api.http("GET", "/apis", token=old)[0], 200)
        time.sleep(0.8)
        code, st = self.api.http("GET", "/apis", token=old)
        self.assertEqual((code, st["reason"]), (401, "Unauthorized"))
        self.assertEqual(self.api.http("GET", "/apis")[0], 200)

    def test_claims_and_status(self):
        api = self.custom()
        uid = self.api.create_claim("ns1", "claim-a", DRIVER, NODE, "gpu", ["gpu0", "gpu1"],
                                    config={"sharing": {"strategy": "Time Slicing"}, "n": 3}, node=NODE)
        c = api.get_namespaced_custom_object(GROUP, "v1", "ns1", "resourceclaims", "claim-a")
        self.assertEqual(c["metadata"]["uid"], uid)
        alloc = c["status"]["allocation"]
        self.assertEqual(alloc["devices"]["results"],
                         [{"request": "gpu", "driver": DRIVER, "pool": NODE, "device": "gpu0"},
                          {"request": "gpu", "driver": DRIVER, "pool": NODE, "device": "gpu1"}])
        self.assertEqual(alloc["devices"]["config"][0]["opaque"],
                         {"driver": DRIVER, "parameters": {"sharing": {"strategy": "Time Slicing"}, "n": 3}})
        self.assertEqual(alloc["devices"]["config"][0]["requests"], ["gpu"])
        self.assertEqual(alloc["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"], [NODE])
        self.assertEqual(c["spec"]["devices"]["requests"][0]["exactly"]["count"], 2)
        # several drivers in one claim
        r = self.api.ok("create-claim ns1 claim-b --driver %s --pool %s --request a --device gpu0"
                        " --driver net.example.com --pool p2 --request b --device eth0,eth1" % (DRIVER, NODE))
        res = r["claim"]["status"]["allocation"]["devices"]["results"]
        self.assertEqual([(x["driver"], x["device"]) for x in res],
                         [(DRIVER, "gpu0"), ("net.example.com", "eth0"), ("net.example.com", "eth1")])
        self.assertEqual(len(api.list_namespaced_custom_object(GROUP, "v1", "ns1", "resourceclaims")["items"]), 2)
        self.assertEqual(len(api.list_namespaced_custom_object(GROUP, "v1", "ns2", "resourceclaims")["items"]), 0)
        self.assertEqual(len(api.list_cluster_custom_object(GROUP, "v1", "resourceclaims")["items"]), 2)
        # a claim created through the API: status dropped, set via /status
        body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "claim-c"},
                "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]}},
                "status": {"allocation": {"devices": {"results": []}}}}
        c = api.create_namespaced_custom_object(GROUP, "v1", "ns2", "resourceclaims", body)
        self.assertNotIn("status", c)
        self.assertEqual(c["metadata"]["namespace"], "ns2")
        self.assertEqual(c["spec"]["devices"]["requests"][0]["exactly"],
                         {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1})
        c["status"] = {"allocation": {"devices": {"results": [{"request": "r", "driver": DRIVER, "pool": NODE,
                                                                "device": "gpu3"}]}}}
        c2 = api.replace_namespaced_custom_object_status(GROUP, "v1", "ns2", "resourceclaims", "claim-c", c)
        self.assertEqual(c2["status"]["allocation"]["devices"]["results"][0]["device"], "gpu3")
        # /status changes neither spec nor metadata
        c2["metadata"]["labels"] = {"x": "y"}
        c2["status"]["reservedFor"] = [{"resource": "pods", "name": "p", "uid": "u"}]
        c2 = api.replace_namespaced_custom_object_status(GROUP, "v1", "ns2", "resourceclaims", "claim-c", c2)
        self.assertNotIn("labels", c2["metadata"])
        self.assertEqual(c2["status"]["reservedFor"][0]["name"], "p")
        # the main resource ignores status, /status ignores spec
        c2["status"] = {}
        c3 = api.replace_namespaced_custom_object(GROUP, "v1", "ns2", "resourceclaims", "claim-c", c2)
        self.assertEqual(c3["status"]["allocation"]["devices"]["results"][0]["device"], "gpu3")
        c3["spec"]["devices"]["requests"][0]["name"] = "changed"
        st = self.raises(422, api.replace_namespaced_custom_object, GROUP, "v1", "ns2", "resourceclaims",
                         "claim-c", c3)
        self.assertIn("field is immutable", st["message"])
        # delete-claim: gone for the API
        self.api.ok("delete-claim ns1 claim-a")
        self.raises(404, api.get_namespaced_custom_object, GROUP, "v1", "ns1", "resourceclaims", "claim-a")
        r = self.api.command("delete-claim ns1 claim-a")
        self.assertEqual((r["ok"], r["code"]), (False, "NotFound"))

    def test_claim_device_status(self):
        """status.devices (KEP-4817) through /status with python3-kubernetes,
        checked as the API server checks it."""
        api = self.custom()
        self.api.create_claim("ns1", "c", DRIVER, NODE, "gpu", ["gpu0", "gpu1"], node=NODE)
        c = api.get_namespaced_custom_object(GROUP, "v1", "ns1", "resourceclaims", "c")
        ok = {"driver": DRIVER, "pool": NODE, "device": "gpu0",
              "conditions": [{"type": "Ready", "status": "True", "reason": "Configured",
                              "message": "MIG 1g.10gb", "lastTransitionTime": "2026-11-27T21:00:00Z"}],
              "data": {"uuid": "GPU-1234"},
              "networkData": {"interfaceName": "eth1", "ips": ["10.9.8.7/24", "2001:db8::1/64"],
                              "hardwareAddress": "02:00:00:00:00:01"}}
        c["status"]["devices"] = [ok]
        c2 = api.replace_namespaced_custom_object_status(GROUP, "v1", "ns1", "resourceclaims", "c", c)
        self.assertEqual(c2["status"]["devices"], [ok])
        # what the API server refuses, with the field
        cases = (
            (dict(ok, device="gpu7"), "status.devices[0]", "must be an allocated device in the claim"),
            (dict(ok, shareID="not-a-uid"), "status.devices[0].shareID", "UUID"),
            (dict(ok, conditions=ok["conditions"] * 2), "status.devices[0].conditions[1].type",
             "Duplicate value"),
            (dict(ok, conditions=[dict(ok["conditions"][0], type="T%d" % i) for i in range(9)]),
             "status.devices[0].conditions", "Too many"),
            (dict(ok, conditions=[dict(ok["conditions"][0], status="Maybe")]),
             "status.devices[0].conditions[0].status", "Unsupported value"),
            (dict(ok, conditions=[dict(ok["conditions"][0], reason="not ok!")]),
             "status.devices[0].conditions[0].reason", "Invalid value"),
            (dict(ok, conditions=[{"type": "Ready", "status": "True", "reason": "R"}]),
             "status.devices[0].conditions[0].lastTransitionTime", "Required value"),
            (dict(ok, data={"x": "y" * 11000}), "status.devices[0].data", "Too long"),
            (dict(ok, data=[1, 2]), "status.devices[0].data", "must be a valid JSON object"),
            (dict(ok, networkData={"ips": ["10.9.8.7"]}), "status.devices[0].networkData.ips[0]",
             "CIDR"),
            (dict(ok, networkData={"ips": ["2001:0db8::1/64"]}),
             "status.devices[0].networkData.ips[0]", "canonical"),
            (dict(ok, networkData={"interfaceName": "i" * 257}),
             "status.devices[0].networkData.interfaceName", "Too long"),
        )
        for entry, field, words in cases:
            with self.subTest(field=field, words=words):
                c2["status"]["devices"] = [entry]
                st = self.raises(422, api.replace_namespaced_custom_object_status, GROUP, "v1", "ns1",
                                 "resourceclaims", "c", c2)
                self.assertIn(field + ":", st["message"])
                self.assertIn(words, st["message"])
        c2["status"]["devices"] = [ok, dict(ok)]
        st = self.raises(422, api.replace_namespaced_custom_object_status, GROUP, "v1", "ns1",
                         "resourceclaims", "c", c2)
        self.assertIn("status.devices[1]: Duplicate value", st["message"])
        # kubectl reads it back
        out = self.kubectl("get", "resourceclaims", "-n", "ns1", "c", "-o",
                           "jsonpath={.status.devices[0].conditions[0].reason}")
        self.assertEqual(out.stdout.strip(), "Configured")

    def test_binding_conditions(self):
        """create-claim's binding flags (KEP-5007) and binding-state, the
        scheduler's PreBind check: pending until each result's conditions
        are True in the status entry of its driver, pool and device (shareID
        ignored; another pool's or driver's entry does not count); a failure
        condition True fails it."""
        api = self.custom()
        uid = self.api.create_claim("ns1", "b", DRIVER, NODE, "gpu", ["gpu0", "gpu1"],
                                    binding_conditions=["example.com/attached", "Ready"],
                                    binding_failure_conditions=["example.com/failed"],
                                    binds_to_node=True)
        c = api.get_namespaced_custom_object(GROUP, "v1", "ns1", "resourceclaims", "b")
        self.assertEqual(c["metadata"]["uid"], uid)
        alloc = c["status"]["allocation"]
        for r in alloc["devices"]["results"]:
            self.assertEqual(r["bindingConditions"], ["example.com/attached", "Ready"])
            self.assertEqual(r["bindingFailureConditions"], ["example.com/failed"])
        self.assertRegex(alloc["allocationTimestamp"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        self.assertEqual(alloc["nodeSelector"], {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [NODE]}]}]})
        st = self.api.binding_state("ns1", "b")
        self.assertEqual((st["state"], st["detail"]), (
            "pending", "waiting for example.com/attached,Ready,example.com/attached,Ready"))
        # no binding conditions: ready at once, no timestamp
        self.api.create_claim("ns1", "plain", DRIVER, NODE, "gpu", ["gpu0"], node=NODE)
        self.assertEqual(self.api.binding_state("ns1", "plain")["state"], "ready")
        plain = api.get_namespaced_custom_object(GROUP, "v1", "ns1", "resourceclaims", "plain")
        self.assertNotIn("allocationTimestamp", plain["status"]["allocation"])
        self.assertNotIn("bindingConditions", plain["status"]["allocation"]["devices"]["results"][0])

        def cond(t, status="True", reason="Attached"):
            return {"type": t, "status": status, "reason": reason, "message": "m",
                    "lastTransitionTime": "2026-11-27T21:00:00Z"}
        # results of three devices gpu0: this driver and pool, another
        # driver, another pool; the other two's entries do not count
        other = "other.example.com"
        self.api.ok("create-claim ns1 p --driver %s --pool %s --request gpu --device gpu0 --driver %s"
                    " --device gpu0 --driver %s --pool node-b --device gpu0 --node %s"
                    " --binding-conditions Attached --binding-failure-conditions Failed"
                    % (DRIVER, NODE, other, DRIVER, NODE))
        c = api.get_namespaced_custom_object(GROUP, "v1", "ns1", "resourceclaims", "p")
        self.assertEqual([r["bindingConditions"] for r in c["status"]["allocation"]["devices"]["results"]],
                         [["Attached"]] * 3)
        c["status"]["devices"] = [
            {"driver": other, "pool": NODE, "device": "gpu0", "conditions": [cond("Attached")]},
            {"driver": DRIVER, "pool": "node-b", "device": "gpu0", "conditions": [cond("Attached")]},
            {"driver": DRIVER, "pool": NODE, "device": "gpu0",
             "conditions": [cond("Attached", "False", "Waiting")]}]
        c = api.replace_namespaced_custom_object_status(GROUP, "v1", "ns1", "resourceclaims", "p", c)
        st = self.api.binding_state("ns1", "p")
        self.assertEqual((st["state"], st["waiting"]), ("pending", ["Attached"]))
        c["status"]["devices"][2]["conditions"] = [cond("Attached")]
        c = api.replace_namespaced_custom_object_status(GROUP, "v1", "ns1", "resourceclaims", "p", c)
        self.assertEqual(self.api.binding_state("ns1", "p")["state"], "ready")
        # a failure condition True fails it, even with the others True
        c["status"]["devices"][2]["conditions"].append(cond("Failed", reason="NoFabricPort"))
        c = api.replace_namespaced_custom_object_status(GROUP, "v1", "ns1", "resourceclaims", "p", c)
        st = self.api.binding_state("ns1", "p")
        self.assertEqual((st["state"], st["condition"], st["reason"], st["detail"]),
                         ("failed", "Failed", "NoFabricPort", "Failed NoFabricPort"))
        # two shares of gpu1: one entry (the second share's) answers for both
        s1, s2 = "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"
        self.api.ok("create-claim ns1 s --driver %s --pool %s --request gpu --share-id %s --device gpu1"
                    " --share-id %s --device gpu1 --binding-conditions Attached" % (DRIVER, NODE, s1, s2))
        self.assertEqual(self.api.binding_state("ns1", "s")["waiting"], ["Attached", "Attached"])
        c = api.get_namespaced_custom_object(GROUP, "v1", "ns1", "resourceclaims", "s")
        c["status"]["devices"] = [{"driver": DRIVER, "pool": NODE, "device": "gpu1", "shareID": s2,
                                   "conditions": [cond("Attached")]}]
        api.replace_namespaced_custom_object_status(GROUP, "v1", "ns1", "resourceclaims", "s", c)
        self.assertEqual(self.api.binding_state("ns1", "s")["state"], "ready")
        r = self.api.command("binding-state ns1 missing")
        self.assertEqual((r["ok"], r["code"]), (False, "NotFound"))

    def test_deviceclasses(self):
        api = self.custom()
        body = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.example.com"},
                "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}],
                         "extendedResourceName": "example.com/gpu"}}
        c = api.create_cluster_custom_object(GROUP, "v1", "deviceclasses", body)
        self.assertEqual(c["spec"]["extendedResourceName"], "example.com/gpu")
        got = api.get_cluster_custom_object(GROUP, "v1", "deviceclasses", "gpu.example.com")
        self.assertEqual(got["spec"], body["spec"])
        got["spec"]["extendedResourceName"] = "example.com/gpu2"
        upd = api.replace_cluster_custom_object(GROUP, "v1", "deviceclasses", "gpu.example.com", got)
        self.assertEqual(upd["metadata"]["generation"], 2)
        api.delete_cluster_custom_object(GROUP, "v1", "deviceclasses", "gpu.example.com")
        self.assertEqual(api.list_cluster_custom_object(GROUP, "v1", "deviceclasses")["items"], [])

    def test_json_patch_and_deletecollection(self):
        api = self.custom()
        name = api.create_cluster_custom_object(GROUP, "v1", "resourceslices", slice_body())["metadata"]["name"]
        code, p = self.api.http("PATCH", "/apis/resource.k8s.io/v1/resourceslices/" + name,
                                body=[{"op": "replace", "path": "/spec/pool/generation", "value": 7},
                                      {"op": "remove", "path": "/spec/devices/1"},
                                      {"op": "add", "path": "/metadata/labels", "value": {"x": "y"}}],
                                content_type="application/json-patch+json")
        self.assertEqual(code, 200, p)
        self.assertEqual((p["spec"]["pool"]["generation"], len(p["spec"]["devices"]), p["metadata"]["labels"]),
                         (7, 1, {"x": "y"}))
        code, st = self.api.http("PATCH", "/apis/resource.k8s.io/v1/resourceslices/" + name, body={},
                                 content_type="application/apply-patch+yaml")
        self.assertEqual((code, st["reason"]), (415, "UnsupportedMediaType"))
        api.create_cluster_custom_object(GROUP, "v1", "resourceslices", slice_body(node="node-b"))
        api.create_cluster_custom_object(GROUP, "v1", "resourceslices", slice_body(node="node-c"))
        code, lst = self.api.http("DELETE", "/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName%3Dnode-b")
        self.assertEqual(code, 200)
        self.assertEqual([x["spec"]["nodeName"] for x in lst["items"]], ["node-b"])
        self.assertEqual(sorted(s["spec"]["nodeName"] for s in self.api.slices()), ["node-a", "node-c"])
        # delete preconditions
        code, st = self.api.http("DELETE", "/apis/resource.k8s.io/v1/resourceslices/" + name,
                                 body={"preconditions": {"resourceVersion": "1"}})
        self.assertEqual((code, st["reason"]), (409, "Conflict"))
        self.assertIn("Precondition failed", st["message"])

    def test_unknown_fields(self):
        """A device written in v1beta1's shape to v1: "basic" is an unknown
        field, dropped with a warning (or refused with Strict)."""
        b = slice_body(name="x", version="v1beta1")
        b["apiVersion"] = "resource.k8s.io/v1"
        b["spec"]["pool"]["resourceSliceCunt"] = 1
        code, hdrs, obj = self.api.http("POST", "/apis/resource.k8s.io/v1/resourceslices", body=b, headers=True)
        self.assertEqual(code, 201, obj)
        self.assertEqual(obj["spec"]["devices"], [{"name": "gpu0"}, {"name": "gpu1"}])
        self.assertEqual(hdrs.get_all("Warning"), ['299 - "unknown field \\"spec.devices[0].basic\\""',
                                                   '299 - "unknown field \\"spec.devices[1].basic\\""',
                                                   '299 - "unknown field \\"spec.pool.resourceSliceCunt\\""'])
        b["metadata"]["name"] = "y"
        code, st = self.api.http("POST", "/apis/resource.k8s.io/v1/resourceslices?fieldValidation=Strict", body=b)
        self.assertEqual((code, st["reason"]), (400, "BadRequest"))
        self.assertTrue(st["message"].startswith('strict decoding error: unknown field "spec.devices[0].basic"'),
                        st["message"])
        code, hdrs, obj = self.api.http("POST", "/apis/resource.k8s.io/v1/resourceslices?fieldValidation=Ignore",
                                        body=b, headers=True)
        self.assertEqual((code, hdrs.get_all("Warning")), (201, None))
        # kubectl shows the warning; the patch changed nothing
        r = self.kubectl("patch", "resourceslice", "x", "--type=merge", "-p", '{"spec":{"foo":1}}')
        self.assertIn('Warning: unknown field "spec.foo"', r.stderr)
        self.assertIn("resourceslice.resource.k8s.io/x patched (no change)", r.stdout)

    def test_list_pagination(self):
        api = self.custom()
        for i in range(5):
            api.create_cluster_custom_object(GROUP, "v1", "resourceslices", slice_body(name="s%d" % i))
        names, cont = [], None
        while True:
            kw = {"limit": 2}
            if cont:
                kw["_continue"] = cont
            page = api.list_cluster_custom_object(GROUP, "v1", "resourceslices", **kw)
            names += [x["metadata"]["name"] for x in page["items"]]
            cont = page["metadata"].get("continue")
            if not cont:
                break
        self.assertEqual(names, ["s0", "s1", "s2", "s3", "s4"])


class PoolSelector(ApiTest):

    def setUp(self):
        super().setUp()
        self.api.stop()
        self.api = self.start_proc(ApiServer(self.path("api2"), nodes=self.NODES, args=["-pool-field-selector"]))

    def test_pool_field_selector(self):
        api = self.custom()
        for node in ("node-a", "node-b"):
            api.create_cluster_custom_object(GROUP, "v1", "resourceslices", slice_body(node=node))
        got = api.list_cluster_custom_object(GROUP, "v1", "resourceslices", field_selector="spec.pool.name=node-b")
        self.assertEqual([x["spec"]["nodeName"] for x in got["items"]], ["node-b"])


class Watches(ApiTest):

    def collect(self, api, n, **kw):
        """The first n events of a watch of resourceslices (bounded by
        timeout_seconds, so a 410 raises instead of being retried)."""
        w = kwatch.Watch()
        out = []
        kw.setdefault("timeout_seconds", 10)
        for ev in w.stream(api.list_cluster_custom_object, GROUP, "v1", "resourceslices", **kw):
            out.append((ev["type"], ev["object"]))
            if len(out) >= n:
                w.stop()
                break
        return out

    def test_watch_resume_and_selectors(self):
        api = self.custom()
        a = api.create_cluster_custom_object(GROUP, "v1", "resourceslices", slice_body())
        rv = api.list_cluster_custom_object(GROUP, "v1", "resourceslices")["metadata"]["resourceVersion"]
        name = a["metadata"]["name"]
        a["spec"]["pool"]["generation"] = 2
        api.replace_cluster_custom_object(GROUP, "v1", "resourceslices", name, a)
        api.create_cluster_custom_object(GROUP, "v1", "resourceslices", slice_body(node="node-b"))
        api.delete_cluster_custom_object(GROUP, "v1", "resourceslices", name)
        evs = self.collect(api, 3, resource_version=rv)
        self.assertEqual([t for t, _ in evs], ["MODIFIED", "ADDED", "DELETED"])
        self.assertEqual(evs[0][1]["spec"]["pool"]["generation"], 2)
        self.assertEqual(evs[1][1]["spec"]["nodeName"], "node-b")
        self.assertEqual(evs[0][1]["kind"], "ResourceSlice")
        # the same, selected by node: node-b's slice is not there
        evs = self.collect(api, 2, resource_version=rv, field_selector="spec.nodeName=node-a")
        self.assertEqual([t for t, _ in evs], ["MODIFIED", "DELETED"])
        # from "0": the current objects as ADDED, then live events
        got = []
        t = threading.Thread(target=lambda: got.extend(self.collect(api, 2, resource_version="0")))
        mark = self.api.mark()
        t.start()
        self.api.wait_event("watch_open", since=mark, resource="resourceslices")
        api.create_cluster_custom_object(GROUP, "v1", "resourceslices", slice_body(node="node-c"))
        t.join(15)
        self.assertEqual([(t, o["spec"]["nodeName"]) for t, o in got], [("ADDED", "node-b"), ("ADDED", "node-c")])
        ev = self.api.wait_event("watch_closed", since=mark)
        self.assertEqual(ev["reason"], "client gone")
        # a label change that leaves a label selector: DELETED for that watch
        s = api.create_cluster_custom_object(GROUP, "v1", "resourceslices", slice_body(node="node-d",
                                                                                      labels={"app": "kdp"}))
        rv2 = s["metadata"]["resourceVersion"]
        api.patch_cluster_custom_object(GROUP, "v1", "resourceslices", s["metadata"]["name"],
                                        {"metadata": {"labels": {"app": None}}})
        evs = self.collect(api, 1, resource_version=rv2, label_selector="app=kdp")
        self.assertEqual(evs[0][0], "DELETED")

    def test_410_after_compact_and_window(self):
        api = self.custom()
        rv = api.create_cluster_custom_object(GROUP, "v1", "resourceslices", slice_body())["metadata"]["resourceVersion"]
        api.create_cluster_custom_object(GROUP, "v1", "resourceslices", slice_body(node="node-b"))
        self.api.ok("compact")
        with self.assertRaises(ApiException) as cm:
            self.collect(api, 1, resource_version=rv)
        self.assertEqual(cm.exception.status, 410)
        self.assertIn("Expired: too old resource version: %s" % rv, cm.exception.reason)
        ev = self.api.wait_event("watch_expired")
        self.assertIn("too old resource version", ev["message"])
        # the raw stream: one ERROR line holding a 410 Status, then the end
        code, body = self.api.http("GET", "/apis/resource.k8s.io/v1/resourceslices?watch=true&resourceVersion=" + rv)
        self.assertEqual(code, 200)
        line = json.loads(body.strip().splitlines()[0] if isinstance(body, str) else json.dumps(body))
        self.assertEqual(line["type"], "ERROR")
        self.assertEqual((line["object"]["kind"], line["object"]["code"], line["object"]["reason"]),
                         ("Status", 410, "Expired"))
        # a small window: old resourceVersions fall out of it by themselves
        self.api.stop()
        self.api = self.start_proc(ApiServer(self.path("api2"), nodes=self.NODES, window=3))
        api = self.custom()
        rv = api.create_cluster_custom_object(GROUP, "v1", "resourceslices", slice_body())["metadata"]["resourceVersion"]
        for n in ("b", "c", "d", "e"):
            api.create_cluster_custom_object(GROUP, "v1", "resourceslices", slice_body(node="node-" + n))
        with self.assertRaises(ApiException) as cm:
            self.collect(api, 1, resource_version=rv)
        self.assertEqual(cm.exception.status, 410)

    def test_expire_watches_down_up_and_bookmarks(self):
        api = self.custom()
        api.create_cluster_custom_object(GROUP, "v1", "resourceslices", slice_body())
        rv = api.list_cluster_custom_object(GROUP, "v1", "resourceslices")["metadata"]["resourceVersion"]
        errors = []

        def watch_until_410():
            try:
                self.collect(api, 100, resource_version=rv, timeout_seconds=20)
            except ApiException as e:
                errors.append(e.status)

        mark = self.api.mark()
        t = threading.Thread(target=watch_until_410)
        t.start()
        self.api.wait_event("watch_open", since=mark)
        r = self.api.ok("expire-watches 410")
        self.assertEqual(r["watches"], 1)
        t.join(15)
        self.assertEqual(errors, [410])
        self.assertEqual(self.api.wait_event("watch_closed", since=mark)["reason"], "expired")
        self.assertEqual(self.api.stats()["watches_open"], 0)

        # down: every connection dropped, watches included; up: same port
        done = []

        def raw_watch():
            try:
                done.append(self.api.http("GET", "/apis/resource.k8s.io/v1/resourceslices?watch=1&resourceVersion="
                                          + rv, timeout=15))
            except OSError as e:  # http.client's IncompleteRead is not one
                done.append(e)
            except Exception as e:  # noqa: BLE001 - the stream cut short is the point
                done.append(e)

        t = threading.Thread(target=raw_watch)
        mark = self.api.mark()
        t.start()
        self.api.wait_event("watch_open", since=mark)
        self.api.ok("down")
        t.join(15)
        self.assertFalse(t.is_alive())
        self.assertEqual(len(done), 1)
        self.assertEqual(self.api.wait_event("watch_closed", since=mark)["reason"], "down")
        with self.assertRaises(OSError):
            socket.create_connection((self.api.host, self.api.port), timeout=2).close()
        self.api.ok("up")
        self.assertEqual(api.list_cluster_custom_object(GROUP, "v1", "resourceslices")["kind"], "ResourceSliceList")

        # bookmarks: a BOOKMARK with the current resourceVersion
        self.api.stop()
        self.api = self.start_proc(ApiServer(self.path("api2"), nodes=self.NODES, bookmark_interval=0.2))
        api = self.custom()
        w = kwatch.Watch()
        kinds = []
        for ev in w.stream(api.list_cluster_custom_object, GROUP, "v1", "resourceslices",
                           allow_watch_bookmarks=True, timeout_seconds=5):
            kinds.append(ev["type"])
            if ev["type"] == "BOOKMARK":
                self.assertTrue(ev["raw_object"]["metadata"]["resourceVersion"])
                w.stop()
                break
        self.assertEqual(kinds, ["BOOKMARK"])


    def test_initial_events_claims_and_faults(self):
        api = self.custom()
        api.create_cluster_custom_object(GROUP, "v1", "resourceslices", slice_body())
        # sendInitialEvents: the objects, then the annotated BOOKMARK
        code, body = self.api.http("GET", "/apis/resource.k8s.io/v1/resourceslices?watch=1&sendInitialEvents=true"
                                   "&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=1")
        lines = [json.loads(x) for x in body.strip().splitlines()]
        self.assertEqual([x["type"] for x in lines], ["ADDED", "BOOKMARK"])
        self.assertEqual(lines[1]["object"]["metadata"]["annotations"], {"k8s.io/initial-events-end": "true"})
        # a namespaced watch of claims sees its namespace only
        rv = api.list_namespaced_custom_object(GROUP, "v1", "ns1", "resourceclaims")["metadata"]["resourceVersion"]
        self.api.create_claim("ns2", "other", DRIVER, NODE, "gpu", ["gpu0"])
        uid = self.api.create_claim("ns1", "mine", DRIVER, NODE, "gpu", ["gpu1"])
        self.api.ok("delete-claim ns1 mine")
        w = kwatch.Watch()
        got = []
        for ev in w.stream(api.list_namespaced_custom_object, GROUP, "v1", "ns1", "resourceclaims",
                           resource_version=rv, timeout_seconds=5):
            got.append((ev["type"], ev["object"]["metadata"]["uid"]))
            if len(got) == 3:
                w.stop()
                break
        # created, its status set (the allocation), deleted
        self.assertEqual(got, [("ADDED", uid), ("MODIFIED", uid), ("DELETED", uid)])
        # an injected failure refuses the watch itself
        self.api.ok("fail 1 503 watch resourceslices")
        with self.assertRaises(ApiException) as cm:
            Watches.collect(self, api, 1, resource_version=rv)
        self.assertEqual(cm.exception.status, 503)


class Faults(ApiTest):

    def test_fail_conflict_stats(self):
        api = self.custom()
        self.api.ok("fail 2 503 list resourceslices")
        for _ in range(2):
            st = self.raises(503, api.list_cluster_custom_object, GROUP, "v1", "resourceslices")
            self.assertEqual(st["reason"], "ServiceUnavailable")
        api.list_cluster_custom_object(GROUP, "v1", "resourceslices")
        self.api.ok("fail 1 429")
        code, st = self.api.http("GET", "/apis")
        self.assertEqual((code, st["reason"], st["details"]["retryAfterSeconds"]), (429, "TooManyRequests", 1))
        self.api.ok("fail 1 500 * discovery")
        self.assertEqual(self.api.http("GET", "/api/v1/nodes")[0], 200)
        self.assertEqual(self.api.http("GET", "/apis")[0], 500)
        name = api.create_cluster_custom_object(GROUP, "v1", "resourceslices", slice_body())["metadata"]["name"]
        self.api.ok("conflict 2")
        for _ in range(2):
            st = self.raises(409, api.patch_cluster_custom_object, GROUP, "v1", "resourceslices", name,
                             {"metadata": {"labels": {"a": "b"}}})
            self.assertEqual(st["reason"], "Conflict")
            self.assertIn("the object has been modified", st["message"])
        api.patch_cluster_custom_object(GROUP, "v1", "resourceslices", name, {"metadata": {"labels": {"a": "b"}}})
        s = self.api.stats()
        self.assertEqual(s["conflicts"], 2)
        self.assertEqual(s["requests"]["create resourceslices"], 1)
        self.assertEqual(s["requests"]["patch resourceslices"], 3)
        self.assertEqual(s["writes"], 2)
        self.assertEqual(s["codes"]["503"], 2)

    def test_someone_else_edits_and_deletes(self):
        api = self.custom()
        s = api.create_cluster_custom_object(GROUP, "v1", "resourceslices", slice_body())
        name = s["metadata"]["name"]
        rv = s["metadata"]["resourceVersion"]
        self.api.ok("edit %s" % name)
        got = api.get_cluster_custom_object(GROUP, "v1", "resourceslices", name)
        self.assertEqual((got["spec"]["pool"]["generation"], got["metadata"]["generation"]), (2, 2))
        self.api.ok("edit %s drop-device" % name)
        self.assertEqual(len(api.get_cluster_custom_object(GROUP, "v1", "resourceslices", name)["spec"]["devices"]), 1)
        # our stale copy now conflicts
        self.raises(409, api.replace_cluster_custom_object, GROUP, "v1", "resourceslices", name, s)
        self.api.ok("delete %s" % name)
        self.raises(404, api.get_cluster_custom_object, GROUP, "v1", "resourceslices", name)
        evs = Watches.collect(self, api, 3, resource_version=rv)
        self.assertEqual([t for t, _ in evs], ["MODIFIED", "MODIFIED", "DELETED"])
        r = self.api.command("delete %s" % name)
        self.assertEqual((r["ok"], r["code"]), (False, "NotFound"))

    def test_node_deletion_collects_owned_slices(self):
        api = self.custom()
        node = self.api.http("GET", "/api/v1/nodes/" + NODE)[1]
        body = slice_body()
        body["metadata"]["ownerReferences"][0]["uid"] = node["metadata"]["uid"]
        api.create_cluster_custom_object(GROUP, "v1", "resourceslices", body)
        api.create_cluster_custom_object(GROUP, "v1", "resourceslices", slice_body(node="node-b"))
        r = self.api.ok("delete-node " + NODE)
        self.assertEqual(len(r["collected"]), 1)
        self.assertEqual([s["spec"]["nodeName"] for s in self.api.slices()], ["node-b"])
        self.assertEqual(self.api.http("GET", "/api/v1/nodes/" + NODE)[0], 404)


class OlderVersions(ApiTest):
    """-versions v1beta1 alone (a 1.32/1.33 cluster): v1 is not served and
    devices nest under "basic"."""

    VERSIONS = "v1beta1"

    def test_v1beta1_alone(self):
        code, g = self.api.http("GET", "/apis/resource.k8s.io")
        self.assertEqual([v["version"] for v in g["versions"]], ["v1beta1"])
        self.assertEqual(g["preferredVersion"]["version"], "v1beta1")
        self.assertEqual(self.api.http("GET", "/apis/resource.k8s.io/v1/resourceslices")[0], 404)
        api = self.custom()
        c = api.create_cluster_custom_object(GROUP, "v1beta1", "resourceslices", slice_body(version="v1beta1"))
        self.assertEqual(c["apiVersion"], "resource.k8s.io/v1beta1")
        self.assertEqual(c["spec"]["devices"][0]["basic"]["attributes"]["index"], {"int": 0})
        self.assertNotIn("attributes", c["spec"]["devices"][0])
        # stored as v1
        self.assertEqual(self.api.slices()[0]["spec"]["devices"][0]["attributes"]["index"], {"int": 0})
        # merge patch in v1beta1 terms
        p = api.patch_cluster_custom_object(GROUP, "v1beta1", "resourceslices", c["metadata"]["name"],
                                            {"spec": {"devices": [{"name": "g", "basic": {"attributes": {
                                                "x": {"bool": True}}}}]}})
        self.assertEqual(p["spec"]["devices"], [{"name": "g", "basic": {"attributes": {"x": {"bool": True}}}}])
        # validation paths are the internal (flat) ones
        b = slice_body(version="v1beta1", name="bad")
        b["spec"]["devices"][0]["basic"]["attributes"]["v"] = {"version": "x"}
        st = self.raises(422, api.create_cluster_custom_object, GROUP, "v1beta1", "resourceslices", b)
        self.assertIn("spec.devices[0].attributes[v].version", [x["field"] for x in st["details"]["causes"]])
        # claims in v1beta1: requests without "exactly"
        self.api.create_claim("default", "c1", DRIVER, NODE, "gpu", ["gpu0"])
        cl = api.get_namespaced_custom_object(GROUP, "v1beta1", "default", "resourceclaims", "c1")
        self.assertEqual(cl["spec"]["devices"]["requests"][0]["deviceClassName"], "kdp-test")
        self.assertNotIn("exactly", cl["spec"]["devices"]["requests"][0])
        # kubectl finds v1beta1 through discovery
        r = self.kubectl("get", "resourceslices", "-o", "yaml")
        self.assertIn("apiVersion: resource.k8s.io/v1beta1", r.stdout)
        self.assertIn("basic:", r.stdout)
        r = self.kubectl("api-resources", "--api-group=resource.k8s.io")
        self.assertIn("resource.k8s.io/v1beta1", r.stdout)


class AllVersions(ApiTest):
    """-versions v1,v1beta2,v1beta1: one object, three shapes."""

    VERSIONS = "v1,v1beta2,v1beta1"

    def test_conversion(self):
        code, g = self.api.http("GET", "/apis/resource.k8s.io")
        self.assertEqual([v["version"] for v in g["versions"]], ["v1", "v1beta2", "v1beta1"])
        self.assertEqual(g["preferredVersion"]["version"], "v1")
        api = self.custom()
        c = api.create_cluster_custom_object(GROUP, "v1beta1", "resourceslices", slice_body(version="v1beta1"))
        name = c["metadata"]["name"]
        for v in ("v1", "v1beta2"):
            o = api.get_cluster_custom_object(GROUP, v, "resourceslices", name)
            self.assertEqual(o["apiVersion"], "resource.k8s.io/" + v)
            self.assertEqual(o["spec"]["devices"][0]["attributes"]["model"], {"string": "X0"})
            self.assertEqual(o["spec"]["devices"][0]["capacity"]["memory"], {"value": "16Gi"})
            self.assertNotIn("basic", o["spec"]["devices"][0])
        o = api.get_cluster_custom_object(GROUP, "v1beta1", "resourceslices", name)
        self.assertEqual(o["spec"]["devices"][1]["basic"]["attributes"]["driverVersion"], {"version": "1.2.1"})
        # an update in v1 is seen by a v1beta1 watch
        rv = o["metadata"]["resourceVersion"]
        cur = api.get_cluster_custom_object(GROUP, "v1", "resourceslices", name)
        cur["spec"]["devices"][0]["attributes"]["model"] = {"string": "Y"}
        api.replace_cluster_custom_object(GROUP, "v1", "resourceslices", name, cur)
        w = kwatch.Watch()
        for ev in w.stream(api.list_cluster_custom_object, GROUP, "v1beta1", "resourceslices",
                           resource_version=rv, timeout_seconds=5):
            self.assertEqual(ev["type"], "MODIFIED")
            self.assertEqual(ev["object"]["apiVersion"], "resource.k8s.io/v1beta1")
            self.assertEqual(ev["object"]["spec"]["devices"][0]["basic"]["attributes"]["model"], {"string": "Y"})
            w.stop()
            break
        r = self.kubectl("get", "resourceslices", "-o", "jsonpath={.items[0].apiVersion}")
        self.assertEqual(r.stdout, "resource.k8s.io/v1")


def tearDownModule():
    print_figures()


if __name__ == "__main__":
    # python3-kubernetes leaves a stopped watch's connection to the pool
    warnings.simplefilter("ignore", ResourceWarning)
    log("kubectl: %s, python3-kubernetes: %s" % (KUBECTL, getattr(kubernetes, "__version__", None)))
    unittest.main()
