#!/usr/bin/python3
"""Figures of the DRA driver (docs/dra.md, "How it works"): the gopher
example's DRA mode (kdp-example-gopher-dra) between the kubelet emulator and
the API-server emulator.

    KDP_BIN_DIR=build/bin /usr/bin/python3 tests/dra/measure.py [--idle 30] [--n 200]

Prints: time from exec to the first slice created (the API server's
request event), idle RSS (anonymous / file-backed) and threads 1 s after
the slices are published, voluntary context switches summed over the
threads over --idle seconds, then syscalls (strace -f -c) over another, and the
NodePrepareResources latency (one claim per call, as the kubelet emulator
measures it: median, p90) read from the API server and from the checkpoint.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from kdptest import T, Proc, binary, proc_status  # noqa: E402
from kdptest.apiserver import ApiServer  # noqa: E402
from kdptest.kubelet import Kubelet  # noqa: E402

DRV = "gopher.example.com"
NODE = "node-a"


def ctxt(pid):
    n = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        for line in open("/proc/%d/task/%s/status" % (pid, tid)):
            if line.startswith("voluntary_ctxt_switches"):
                n += int(line.split()[1])
    return n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--idle", type=float, default=30)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--devices", type=int, default=8)
    args = ap.parse_args()
    d = tempfile.mkdtemp(prefix="kdp-dra-measure-")
    procs = []
    try:
        for sub in ("root/device-plugins", "root/plugins_registry", "gophers", "cdi"):
            os.makedirs(os.path.join(d, sub))
        for i in range(args.devices):
            open(os.path.join(d, "gophers", "gopher-%d" % i), "w").close()
        api = ApiServer(os.path.join(d, "api"), nodes=[NODE])
        api.start()
        procs.append(api)
        kl = Kubelet(os.path.join(d, "root", "device-plugins"),
                     registry=os.path.join(d, "root", "plugins_registry"))
        kl.start()
        procs.append(kl)
        env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "NODE_NAME")}
        mark = api.mark()
        t0 = time.time_ns()
        drv = Proc([binary("kdp-example-gopher-dra"), "--devices-dir", os.path.join(d, "gophers"),
                    "--kubelet-root", os.path.join(d, "root"), "--dra", DRV, "--node", NODE,
                    "--cdi-dir", os.path.join(d, "cdi"), "--kubeconfig", api.kubeconfig_token],
                   name="gopher-dra", env=env)
        drv.start()
        procs.append(drv)
        ev = api.wait_event("request", T, since=mark, verb="create", resource="resourceslices",
                            code=201)
        print("exec -> first ResourceSlice created: %.1f ms" % ((ev["t_ns"] - t0) / 1e6))
        kl.wait_dra_registered(DRV, T)
        drv.wait_log("slices published", T)
        time.sleep(1)
        st = proc_status(drv.pid)
        print("idle RSS: %s (anonymous %s, file %s), threads %s" % (
            st["VmRSS"], st["RssAnon"], st["RssFile"], st["Threads"]))
        c0 = ctxt(drv.pid)
        time.sleep(args.idle)
        c1 = ctxt(drv.pid)
        print("idle %.0f s: %d voluntary context switches (all threads)" % (args.idle, c1 - c0))
        strace = None
        if shutil.which("strace"):  # a second window: strace's attach wakes threads itself
            strace = subprocess.Popen(["strace", "-f", "-c", "-p", str(drv.pid)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                      universal_newlines=True)
            time.sleep(args.idle)
        if strace:
            strace.send_signal(2)
            out = strace.communicate(timeout=30)[1]
            lines = [l for l in out.splitlines() if l.strip()]
            print("strace -f -c over the idle time:")
            print("\n".join("  " + l for l in lines[-8:]))
        lat_api, lat_ck = [], []
        for i in range(args.n):
            dev = "gopher-%d" % (i % args.devices)
            uid = api.create_claim("default", "c%d" % i, DRV, NODE, "gpu", [dev])
            r = kl.dra_prepare(DRV, ["default/c%d/%s" % (i, uid)])
            assert r["by_uid"][uid]["result"] == "prepared", r
            lat_api.append(r["elapsed_us"])
            r = kl.dra_prepare(DRV, ["default/c%d/%s" % (i, uid)])
            lat_ck.append(r["elapsed_us"])
            kl.dra_unprepare(DRV, ["default/c%d/%s" % (i, uid)])

        def q(v, p):
            return sorted(v)[min(len(v) - 1, int(len(v) * p))]
        print("NodePrepareResources, one claim, N=%d: from the API server median %d us (p90 %d); "
              "from the checkpoint median %d us (p90 %d)" % (
                  args.n, statistics.median(lat_api), q(lat_api, 0.9),
                  statistics.median(lat_ck), q(lat_ck, 0.9)))
        st = proc_status(drv.pid)
        print("RSS after %d prepares: %s, threads %s" % (args.n, st["VmRSS"], st["Threads"]))
    finally:
        for p in reversed(procs):
            p.stop()
        shutil.rmtree(d, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
