#!/usr/bin/python3
"""Pod identity end to end: the kubelet emulator's PodResources server
(grpc-go, tests/kubelet/podres.go) asked by a real plugin
(kdp_plugin_get_pods from a callback and an author thread,
kdp_plugin_query_pods on the loop) and by `kdpctl pods` (tables, --json,
filters, --allocatable, errors with their fix), a kubelet without Get, and a
stalled kubelet (every call bounded).

usage: KDP_BIN_DIR=<build>/bin /usr/bin/python3 test_podres.py [-v] [Test.name ...]
"""

import errno
import json
import os
import sys
import time
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from kdptest import T, binary, figure, print_figures, run  # noqa: E402
from kdptest.plugin import PluginTest  # noqa: E402

RES = "kdp.test/dev"


def held(ev):
    """[(ns/pod, container, id, physical)] of a plugin's "pods" line."""
    return [("%s/%s" % (d["ns"], d["pod"]), d["container"], d["id"], d["physical"])
            for d in ev["devices"]]


class PodresTest(PluginTest):
    def setUp(self):
        super().setUp()
        self.root = self.subdir("root")

    def start(self, *plugin_args, **kl_kw):
        kl = self.kubelet(kubelet_root=self.root, **kl_kw)
        self.assertEqual(kl.ready["pod_resources"], kl.pod_resources)
        pl = self.start_test_plugin("--kubelet-root", self.root, *plugin_args)
        kl.wait_event("registered", T, resource=RES)
        kl.wait_event("devices", T, resource=RES)
        return kl, pl

    def kdpctl(self, *args, rc=0):
        r = run([binary("kdpctl"), "pods", "--kubelet-root", self.root] + list(args), T)
        self.assertEqual(r.returncode, rc, r)
        return r

    def pods_line(self, pl, tag, mark):
        return pl.wait_event(lambda e: e.get("event") == "pods" and e.get("tag") == tag, T,
                             since=mark)


class Plugin(PodresTest):
    def test_prestart_callback_sees_its_pod(self):
        """The prestart op (on the worker) calls kdp_plugin_get_pods and sees
        the pod the emulator allocated the devices to."""
        kl, pl = self.start("--devices", "a@0,b@1,c", "--prestart-pods")
        kl.ok("allocate %s a,b;c pod=default/trainer container=main,side" % RES)
        mark = pl.mark()
        kl.ok("prestart %s a,b" % RES)
        ev = self.pods_line(pl, "prestart", mark)
        self.assertEqual(ev["rc"], 0, ev)
        self.assertEqual(held(ev), [("default/trainer", "main", "a", "a"),
                                    ("default/trainer", "main", "b", "b"),
                                    ("default/trainer", "side", "c", "c")])
        kl.wait_event("podres_call", T, method="List")

    def test_query_on_the_loop_and_author_thread_with_replicas(self):
        """kdp_plugin_query_pods answers on the loop thread (where the blocking
        call is refused: -EDEADLK); kdp_plugin_get_pods from the stdin thread;
        replica IDs resolved to the device's own ID; release-pod empties it."""
        kl, pl = self.start("--devices", "g0,g1", "--replicas", "2")
        kl.ok("allocate %s g0-1 pod=batch/job-7" % RES)
        kl.ok("allocate %s g1-0,g0-0 pod=ml/train container=w" % RES)
        mark = pl.mark()
        self.assertEqual(pl.command("query-pods"), {RES: 0})
        ev = self.pods_line(pl, "query", mark)
        self.assertEqual(ev["rc"], 0, ev)
        self.assertEqual(ev["deadlk"], -errno.EDEADLK)
        self.assertEqual(held(ev), [("batch/job-7", "c0", "g0-1", "g0"),
                                    ("ml/train", "w", "g1-0", "g1"),
                                    ("ml/train", "w", "g0-0", "g0")])
        pl.wait_log(r"kdp_plugin_get_pods\(\) from the thread running the context", T)
        r = kl.ok("release-pod ml/train")
        self.assertEqual(r["released"], 1)
        mark = pl.mark()
        self.assertEqual(pl.command("get-pods"), {RES: 0})
        ev = self.pods_line(pl, "get", mark)
        self.assertEqual(held(ev), [("batch/job-7", "c0", "g0-1", "g0")])

    def test_only_its_resource(self):
        kl = self.kubelet(kubelet_root=self.root)
        pl = self.start_test_plugin("--kubelet-root", self.root, "--devices", "x,y",
                                    resources=(RES, "kdp.test/other"))
        kl.wait_event("devices", T, resource="kdp.test/other", since=0)
        kl.wait_event("devices", T, resource=RES, since=0)
        kl.ok("allocate %s x pod=default/p" % RES)
        kl.ok("allocate kdp.test/other y pod=default/p")
        mark = pl.mark()
        pl.command("get-pods")
        got = {}
        for _ in range(2):
            ev = pl.wait_event(lambda e: e.get("event") == "pods" and e["resource"] not in got,
                               T, since=mark)
            got[ev["resource"]] = [d["id"] for d in ev["devices"]]
        self.assertEqual(got, {RES: ["x"], "kdp.test/other": ["y"]})

    def test_emulator_controls(self):
        """The emulator's pod controls: a bad pod= is a usage error, a failed
        Allocate gives the pod nothing, release-pod of an unknown pod drops
        nothing."""
        kl, pl = self.start("--devices", "a,b:unhealthy")
        r = kl.command("allocate %s a pod=nonamespace" % RES)
        self.assertEqual((r["ok"], r["code"]), (False, "Usage"), r)
        r = kl.command("allocate %s b pod=default/p" % RES)
        self.assertEqual((r["ok"], r["code"]), (False, "InvalidArgument"), r)
        self.assertEqual(kl.ok("release-pod default/p")["released"], 0)
        r = kl.command("release-pod nonamespace")
        self.assertEqual((r["ok"], r["code"]), (False, "Usage"), r)
        mark = pl.mark()
        pl.command("get-pods")
        self.assertEqual(self.pods_line(pl, "get", mark)["devices"], [])

    def test_stalled_kubelet_is_bounded(self):
        """A kubelet that never answers: the query fails with -ETIMEDOUT after
        the default 5 s deadline, and the emulator sees the call abandoned."""
        kl, pl = self.start("--devices", "a", podres_delay=60)
        mark = pl.mark()
        t0 = time.monotonic()
        pl.command("query-pods")
        ev = self.pods_line(pl, "query", mark)
        took = time.monotonic() - t0
        self.assertEqual(ev["rc"], -errno.ETIMEDOUT)
        self.assertGreater(took, 4.5)
        self.assertLess(took, 8.0)
        figure("query_pods_stalled_kubelet_s", took)
        kl.wait_event("podres_abandoned", T, method="List")
        pl.wait_log(r"PodResources List at .*: no answer in time", T)

    def test_no_socket(self):
        """No PodResources server: -ENOENT with the mount hint, at once."""
        kl = self.kubelet()  # without -kubelet-root
        pl = self.start_test_plugin("--kubelet-root", self.root, "--devices", "a")
        kl.wait_event("registered", T, resource=RES)
        mark = pl.mark()
        pl.command("get-pods")
        ev = self.pods_line(pl, "get", mark)
        self.assertEqual(ev["rc"], -errno.ENOENT)
        pl.wait_log(r"no socket at .*/root/pod-resources/kubelet\.sock: is the kubelet's "
                    r"pod-resources directory mounted", T)


class Kdpctl(PodresTest):
    def setUp(self):
        super().setUp()
        self.kl, self.pl = self.start("--devices", "a@0,b@1,c@1,d,e:unhealthy")
        self.kl.ok("allocate %s a,b;c pod=default/trainer container=main,side" % RES)
        self.kl.ok("allocate %s d pod=batch/job-7" % RES)

    def test_table_and_json(self):
        r = self.kdpctl()
        lines = r.stdout.splitlines()
        self.assertRegex(lines[0], r"^NAMESPACE\s+POD\s+CONTAINER\s+RESOURCE\s+DEVICES$")
        self.assertRegex(lines[1], r"^default\s+trainer\s+main\s+kdp\.test/dev\s+a,b$")
        self.assertRegex(lines[2], r"^default\s+trainer\s+side\s+kdp\.test/dev\s+c$")
        self.assertRegex(lines[3], r"^batch\s+job-7\s+c0\s+kdp\.test/dev\s+d$")
        self.assertEqual(len(lines), 4)
        j = [json.loads(x) for x in self.kdpctl("--json").stdout.splitlines()]
        self.assertEqual(j[0], {"namespace": "default", "pod": "trainer", "container": "main",
                                "resource": RES, "devices": ["a", "b"], "numa": [0, 1]})
        self.assertEqual(j[2]["numa"], [])
        self.assertEqual(len(j), 3)

    def test_filters(self):
        r = self.kdpctl("--device", "c")
        self.assertRegex(r.stdout, r"\ndefault\s+trainer\s+side\s+kdp\.test/dev\s+c\n$")
        r = self.kdpctl("--pod", "batch/job-7", "--json")
        self.assertEqual([json.loads(x)["devices"] for x in r.stdout.splitlines()], [["d"]])
        self.kl.wait_event("podres_call", T, method="Get")
        r = self.kdpctl("--resource", "kdp.test/none")
        self.assertEqual(r.stdout, "no devices held by pods of kdp.test/none\n")
        r = self.kdpctl("--pod", "default/nobody", rc=1)
        self.assertIn("no pod default/nobody known to the kubelet", r.stderr)
        r = self.kdpctl("--pod", "nobody", rc=2)
        self.assertIn("--pod wants NAMESPACE/NAME", r.stderr)

    def test_allocatable(self):
        """Every device the plugin streams, the unhealthy one included (#104122)."""
        r = self.kdpctl("--allocatable")
        lines = r.stdout.splitlines()
        self.assertRegex(lines[0], r"^RESOURCE\s+DEVICE\s+NUMA$")
        self.assertEqual([x.split()[1:] for x in lines[1:]],
                         [["a", "0"], ["b", "1"], ["c", "1"], ["d", "-"], ["e", "-"]])
        j = [json.loads(x) for x in self.kdpctl("--allocatable", "--json", "--device", "b")
             .stdout.splitlines()]
        self.assertEqual(j, [{"resource": RES, "device": "b", "numa": [1]}])

    def test_socket_flag_and_errors(self):
        sock = os.path.join(self.root, "pod-resources", "kubelet.sock")
        r = run([binary("kdpctl"), "pods", "--socket", sock, "--device", "a"], T)
        self.assertEqual(r.returncode, 0, r)
        self.assertRegex(r.stdout, r"\ndefault\s+trainer\s+main\s+kdp\.test/dev\s+a\n$")
        r = run([binary("kdpctl"), "pods", "--kubelet-root", self.path("elsewhere")], T)
        self.assertEqual(r.returncode, 1, r)
        self.assertIn("no socket at %s/elsewhere/pod-resources/kubelet.sock" % self.dir, r.stderr)
        self.assertIn("hint: run on the node, mount /var/lib/kubelet/pod-resources, or pass "
                      "--kubelet-root", r.stderr)
        r = run([binary("kdpctl"), "pods", "--json", "--socket", "/nonexistent/k.sock"], T)
        self.assertEqual(r.returncode, 1, r)
        self.assertIn("no socket at /nonexistent/k.sock", json.loads(r.stdout)["message"])


class WithoutGet(PodresTest):
    def check(self, get, needle):
        kl, pl = self.start("--devices", "a", podres_get=get)
        kl.ok("allocate %s a pod=default/p" % RES)
        r = self.kdpctl("--pod", "default/p")
        self.assertIn(needle, r.stderr)
        self.assertIn("; using List", r.stderr)
        self.assertRegex(r.stdout, r"\ndefault\s+p\s+c0\s+kdp\.test/dev\s+a\n")

    def test_gate_off(self):
        """The kubelet's words with its gate off (code Unknown)."""
        self.check("off", "KubeletPodResourcesGet feature gate is off")

    def test_kubelet_before_get(self):
        """A kubelet before 1.27: Unimplemented."""
        self.check("absent", "the kubelet does not serve it")


def podres_pb2(tmp):
    """podresources_pb2 from proto/podresources.proto (protoc --python_out)."""
    import importlib
    import subprocess
    proto = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "proto")
    subprocess.run(["protoc", "--proto_path=" + proto, "--python_out=" + tmp,
                    "podresources.proto"], check=True, timeout=60)
    sys.path.insert(0, tmp)
    try:
        return importlib.import_module("podresources_pb2")
    finally:
        sys.path.remove(tmp)


class Grpcio(PodresTest):
    """The emulator's PodResources server, checked by an independent client:
    grpcio (Python, the C-core gRPC) with protoc-generated messages, against
    what kdp's client (kdpctl) reads from the same server."""

    def test_list_get_allocatable(self):
        try:
            import grpc
        except ImportError:
            self.skipTest("python3-grpcio is not installed")
        pb = podres_pb2(self.subdir("pb2"))
        kl, pl = self.start("--devices", "a@0,b@1,c:unhealthy")
        kl.ok("allocate %s a;b pod=default/trainer container=main,side" % RES)
        ch = grpc.insecure_channel("unix:" + kl.pod_resources)
        self.addCleanup(ch.close)

        def call(method, req, resp):
            return ch.unary_unary("/v1.PodResourcesLister/" + method,
                                  request_serializer=req.SerializeToString,
                                  response_deserializer=resp.FromString)(req, timeout=T)

        listed = call("List", pb.ListPodResourcesRequest(), pb.ListPodResourcesResponse)
        got = [(p.namespace, p.name, c.name, d.resource_name, list(d.device_ids),
                [n.ID for n in d.topology.nodes])
               for p in listed.pod_resources for c in p.containers for d in c.devices]
        self.assertEqual(got, [("default", "trainer", "main", RES, ["a"], [0]),
                               ("default", "trainer", "side", RES, ["b"], [1])])
        ours = [json.loads(x) for x in self.kdpctl("--json").stdout.splitlines()]
        self.assertEqual([(j["namespace"], j["pod"], j["container"], j["resource"], j["devices"],
                           j["numa"]) for j in ours], got)
        one = call("Get", pb.GetPodResourcesRequest(pod_name="trainer", pod_namespace="default"),
                   pb.GetPodResourcesResponse)
        self.assertEqual([c.name for c in one.pod_resources.containers], ["main", "side"])
        with self.assertRaises(grpc.RpcError) as cm:
            call("Get", pb.GetPodResourcesRequest(pod_name="x", pod_namespace="y"),
                 pb.GetPodResourcesResponse)
        self.assertEqual(cm.exception.details(), "pod x in namespace y not found")
        alloc = call("GetAllocatableResources", pb.AllocatableResourcesRequest(),
                     pb.AllocatableResourcesResponse)
        self.assertEqual([(d.resource_name, list(d.device_ids)) for d in alloc.devices],
                         [(RES, ["a"]), (RES, ["b"]), (RES, ["c"])])


class Stalled(PodresTest):
    def test_kdpctl_timeout(self):
        self.start("--devices", "a", podres_delay=60)
        t0 = time.monotonic()
        r = self.kdpctl("--timeout", "300ms", rc=1)
        took = time.monotonic() - t0
        self.assertIn("no answer from %s/pod-resources/kubelet.sock in time" % self.root, r.stderr)
        self.assertLess(took, 3.0)
        figure("kdpctl_pods_timeout_300ms_s", took)


if __name__ == "__main__":
    try:
        unittest.main(verbosity=2)
    finally:
        print_figures()
