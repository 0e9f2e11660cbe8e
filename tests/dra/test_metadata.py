#!/usr/bin/python3
"""Device metadata (KEP-5304) end to end: kdp-test-dra-driver with
--device-metadata between the kubelet emulator and kdpctl's API server. The
files are read as the Go helper k8s.io/dynamic-resource-allocation/
devicemetadata reads them: a JSON stream, the first object of a known
version taken.

usage: KDP_BIN_DIR=<build>/bin /usr/bin/python3 test_metadata.py [-v]
"""

import json
import os
import sys
import time
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_dra import DRV, NODE, Base, TestDriver  # noqa: E402
from kdptest import T  # noqa: E402

CONTAINER_DIR = "/var/run/kubernetes.io/dra-device-attributes"


def read_stream(path):
    """Every object of the file's JSON stream, in order."""
    with open(path) as f:
        text = f.read()
    dec = json.JSONDecoder()
    objs = []
    i = 0
    while i < len(text):
        if text[i].isspace():
            i += 1
            continue
        o, i = dec.raw_decode(text, i)
        objs.append(o)
    return objs


class Metadata(Base):
    def md_path(self, name, uid, request):
        return self.path("root", "plugins", DRV, "dra-device-metadata",
                         "default_%s_%s" % (name, uid), request, "metadata.json")

    def spec_devices(self):
        files = self.cdi_files()
        self.assertEqual(len(files), 1, files)
        with open(self.path("cdi", files[0])) as f:
            return {d["name"]: d["containerEdits"] for d in json.load(f)["devices"]}

    def wait_generation(self, path, gen):
        deadline = time.time() + T
        while time.time() < deadline:
            docs = read_stream(path)
            if docs[0]["metadata"]["generation"] == gen:
                return docs
            time.sleep(0.05)
        self.fail("generation %d never came: %s" % (gen, read_stream(path)))

    def test_files_mounts_generation_and_removal(self):
        """At prepare: one file per request, v1beta1 then v1alpha1 in one
        stream, the claim, the devices with their attributes and network
        data, mounted read-only through the claim's CDI spec with the CDI ID
        on the request's first device; a change of network data bumps the
        generation, another status does not; written again after a wipe;
        removed at unprepare."""
        api = self.api()
        kl = self.kubelet()
        fw = self.path("fw", "version")
        os.makedirs(os.path.dirname(fw))
        with open(fw, "w") as f:
            f.write("1.2\n")
        upd = self.path("fw", "statuses")  # one directory watched for both
        args = ["--device-metadata", "--describe-file", fw, "--status", "good",
                "--status-update-file", upd]
        drv = self.start_proc(TestDriver(self, api, args))
        kl.wait_dra_registered(DRV, T)
        self.wait_slices(api, 4)
        uid = api.create_claim("default", "c1", DRV, NODE, "gpu", ["dev-0", "dev-1"])
        r = kl.dra_prepare(DRV, ["default/c1/" + uid])
        self.assertEqual(r["by_uid"][uid]["result"], "prepared", r)
        md_id = "k8s.%s/claim=%s_metadata_gpu" % (DRV, uid)
        ids = {d["device"]: d["cdi_device_ids"] for d in r["by_uid"][uid]["devices"]}
        self.assertIn(md_id, ids["dev-0"])
        self.assertNotIn(md_id, ids["dev-1"])  # the request's first device only
        host = self.md_path("c1", uid, "gpu")
        self.assertEqual(self.spec_devices()[uid + "_metadata_gpu"], {
            "mounts": [{"hostPath": host,
                        "containerPath": "%s/resourceclaims/c1/gpu/%s-metadata.json"
                                         % (CONTAINER_DIR, DRV),
                        "options": ["ro", "nosuid", "nodev", "bind"]}]})
        self.assertEqual(os.stat(host).st_mode & 0o777, 0o644)
        docs = read_stream(host)
        self.assertEqual([d["apiVersion"] for d in docs],
                         ["metadata.resource.k8s.io/v1beta1", "metadata.resource.k8s.io/v1alpha1"])
        self.assertEqual(docs[0]["kind"], "DeviceMetadata")
        self.assertEqual(docs[0]["metadata"],
                         {"name": "c1", "namespace": "default", "uid": uid, "generation": 1})
        self.assertNotIn("podClaimName", docs[0])
        self.assertEqual(docs[1]["metadata"], docs[0]["metadata"])
        self.assertEqual(docs[1]["requests"], docs[0]["requests"])
        (req,) = docs[0]["requests"]
        self.assertEqual(req["name"], "gpu")
        self.assertEqual(req["devices"], [
            {"driver": DRV, "pool": NODE, "name": "dev-%d" % i,
             "attributes": {"firmware": {"string": "1.2"}},
             "networkData": {"interfaceName": "net%d" % i, "ips": ["10.0.0.%d/24" % (i + 1)],
                             "hardwareAddress": "02:00:00:00:00:01"}} for i in range(2)])
        # the network data changes: one generation up, the new address in
        tmp = self.path("upd.tmp")
        with open(tmp, "w") as f:
            f.write("%s dev-1 Moved 10.1.0.9/16\n" % uid)
        os.rename(tmp, upd)
        docs = self.wait_generation(host, 2)
        self.assertEqual(docs[0]["requests"][0]["devices"][1]["networkData"],
                         {"interfaceName": "net0", "ips": ["10.1.0.9/16"]})
        self.assertEqual(docs[1]["metadata"]["generation"], 2)
        # another status, the same network data: the same generation
        with open(tmp, "w") as f:
            f.write("%s dev-1 Cooled 10.1.0.9/16\n" % uid)
        mark = drv.log_mark()
        os.rename(tmp, upd)
        drv.wait_log(r"status update dev-1: 0$", T, since=mark)
        self.assertEqual(read_stream(host)[0]["metadata"]["generation"], 2)
        # the CDI directory and the metadata wiped: the kubelet's prepare
        # again writes both from the checkpoint
        for f in self.cdi_files():
            os.unlink(self.path("cdi", f))
        os.unlink(host)
        r = kl.dra_prepare(DRV, ["default/c1/" + uid])
        self.assertEqual(r["by_uid"][uid]["result"], "prepared", r)
        self.assertIn(uid + "_metadata_gpu", self.spec_devices())
        self.assertEqual(read_stream(host)[0]["metadata"]["generation"], 2)
        # a restart keeps it: the record holds the generation and the
        # attributes
        self.assertEqual(drv.stop(), 0)
        mark = kl.mark()
        drv = self.start_proc(TestDriver(self, api, args))
        kl.wait_event("dra_registered", T, since=mark, driver=DRV)
        r = kl.dra_prepare(DRV, ["default/c1/" + uid])
        self.assertIn(md_id, r["by_uid"][uid]["devices"][0]["cdi_device_ids"])
        # unprepare: the claim's directory and spec gone
        r = kl.dra_unprepare(DRV, ["default/c1/" + uid])
        self.assertEqual(r["by_uid"][uid]["result"], "unprepared", r)
        self.assertFalse(os.path.exists(os.path.dirname(os.path.dirname(host))))
        self.assertEqual(self.cdi_files(), [])

    def test_claim_from_a_template(self):
        """A claim the ResourceClaim controller made from a template (its
        pod-claim-name annotation): the container path under
        resourceclaimtemplates/<the pod's name for it>, podClaimName in the
        document; a bad annotation refused at prepare, naming it."""
        api = self.api()
        kl = self.kubelet()
        self.start_proc(TestDriver(self, api, ["--device-metadata"]))
        kl.wait_dra_registered(DRV, T)
        self.wait_slices(api, 4)
        path = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/"
        uids = {}
        for name, ann in (("pod-a-gpu-x7k2p", "gpu"), ("pod-b-gpu-q9z", "../../etc")):
            uids[name] = api.create_claim("default", name, DRV, NODE, "gpu", ["dev-2"])
            code, body = api.http("PATCH", path + name, {"metadata": {"annotations": {
                "resource.kubernetes.io/pod-claim-name": ann}}},
                content_type="application/merge-patch+json")
            self.assertEqual(code, 200, body)
        uid = uids["pod-a-gpu-x7k2p"]
        r = kl.dra_prepare(DRV, ["default/pod-a-gpu-x7k2p/" + uid])
        self.assertEqual(r["by_uid"][uid]["result"], "prepared", r)
        host = self.md_path("pod-a-gpu-x7k2p", uid, "gpu")
        mounts = self.spec_devices()[uid + "_metadata_gpu"]["mounts"]
        self.assertEqual(mounts[0]["containerPath"],
                         "%s/resourceclaimtemplates/gpu/gpu/%s-metadata.json"
                         % (CONTAINER_DIR, DRV))
        doc = read_stream(host)[0]
        self.assertEqual(doc["podClaimName"], "gpu")
        self.assertEqual(doc["metadata"]["name"], "pod-a-gpu-x7k2p")
        self.assertEqual(doc["requests"][0]["devices"], [{"driver": DRV, "pool": NODE,
                                                          "name": "dev-2"}])
        r = kl.dra_unprepare(DRV, ["default/pod-a-gpu-x7k2p/" + uid])
        self.assertEqual(r["by_uid"][uid]["result"], "unprepared", r)
        bad = uids["pod-b-gpu-q9z"]
        r = kl.dra_prepare(DRV, ["default/pod-b-gpu-q9z/" + bad])
        self.assertIn("cannot write the claim's device metadata: its metadata.annotations"
                      "[resource.kubernetes.io/pod-claim-name] is not a DNS label",
                      r["by_uid"][bad]["error"])
        self.assertEqual(os.listdir(self.path("root", "plugins", DRV, "dra-device-metadata")), [])

    def test_off_by_default(self):
        """Without the switch: no file, no mount, no CDI ID."""
        api = self.api()
        kl = self.kubelet()
        self.start_proc(TestDriver(self, api))
        kl.wait_dra_registered(DRV, T)
        self.wait_slices(api, 4)
        uid = api.create_claim("default", "c1", DRV, NODE, "gpu", ["dev-0"])
        r = kl.dra_prepare(DRV, ["default/c1/" + uid])
        self.assertEqual(r["by_uid"][uid]["devices"][0]["cdi_device_ids"],
                         ["k8s.%s/claim=%s-dev-0" % (DRV, uid)])
        self.assertFalse(os.path.exists(self.path("root", "plugins", DRV, "dra-device-metadata")))


if __name__ == "__main__":
    unittest.main()
