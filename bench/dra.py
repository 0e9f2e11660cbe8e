#!/usr/bin/python3
"""The DRA driver side by side (`make bench`, after bench.py): kdp's example
driver (kdp-example-gopher-dra, C, libkdp-dra) and the project's grpc-go test
driver (kdp-go-testdra: grpc-go for the kubelet's side, net/http and
encoding/json for its slices), each between the same emulators
(kdp-test-apiserver, kdp-test-kubelet), one after the other in one run.

    bench/dra.py --bin BUILD/bin [--out DIR] [--quick]

What each driver does per prepare is not the same, and the table says so:
kdp reads the claim from the API server, checks its devices, writes a CDI
spec and a checkpoint record (fsync) and answers; the Go driver answers from
memory. Figures: start (exec) to slices published; idle RSS (anonymous,
file-backed), threads, shared libraries loaded and the biggest of them in
RSS; NodePrepareResources p50/p99 of one claim a call and of 16 claims in one
call (as the kubelet emulator times them); RSS after N prepare/unprepare
cycles; start to 1,000 devices published. Each claim has a device of its
own (16 devices, 16 claims). Writes DIR/dra.json and
DIR/dra.md and prints the table. --quick: tiny counts (the harness only).
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "pylib"))
from kdptest import T, Proc, percentile, proc_status  # noqa: E402
from kdptest.proc import wait_for  # noqa: E402
from kdptest.apiserver import ApiServer  # noqa: E402
from kdptest.kubelet import Kubelet  # noqa: E402

NODE = "node-a"
DRV = "gopher.example.com"


def kb(v):
    return int(v.split()[0])


def libraries(pid):
    """(count, [(name, rss_kb)] biggest first) of the shared objects mapped."""
    rss = {}
    cur = None
    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            parts = line.split()
            if "-" in parts[0] and len(parts) >= 5 and ":" not in parts[0]:
                path = parts[5] if len(parts) > 5 else ""
                cur = path if ".so" in os.path.basename(path) else None
                if cur:
                    rss.setdefault(cur, 0)
            elif cur and parts[0] == "Rss:":
                rss[cur] += int(parts[1])
    top = sorted(((os.path.basename(p), v) for p, v in rss.items()), key=lambda x: -x[1])
    return len(rss), top


class Bench:
    def __init__(self, args, kind):
        self.args = args
        self.kind = kind
        self.dir = tempfile.mkdtemp(prefix="kdp-bench-dra-")
        self.procs = []

    def path(self, *p):
        return os.path.join(self.dir, *p)

    def start(self, p):
        p.start()
        self.procs.append(p)
        return p

    def stop(self):
        for p in reversed(self.procs):
            p.stop()
        self.procs = []
        shutil.rmtree(self.dir, ignore_errors=True)

    def emulators(self):
        for sub in ("root/device-plugins", "root/plugins_registry", "gophers", "cdi"):
            os.makedirs(self.path(sub), exist_ok=True)
        self.api = self.start(ApiServer(self.path("api"), nodes=[NODE]))
        self.kl = self.start(Kubelet(self.path("root", "device-plugins"),
                                     registry=self.path("root", "plugins_registry")))

    def driver(self, n_devices):
        """Starts the driver with n devices; returns (proc, exec time ns)."""
        env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "NODE_NAME")}
        if self.kind == "kdp":
            for i in range(n_devices):
                open(self.path("gophers", "gopher-%d" % i), "w").close()
            argv = [os.path.join(self.args.bin, "kdp-example-gopher-dra"), "--devices-dir",
                    self.path("gophers"), "--kubelet-root", self.path("root"), "--dra", DRV,
                    "--node", NODE, "--cdi-dir", self.path("cdi"), "--kubeconfig",
                    self.api.kubeconfig_token]
        else:
            argv = [os.path.join(self.args.bin, "kdp-go-testdra"), "-registry",
                    self.path("root", "plugins_registry"), "-driver", DRV, "-pool", NODE,
                    "-node", NODE, "-device-count", str(n_devices),
                    "-versions", "v1.DRAPlugin,v1beta1.DRAPlugin,v1.DRAResourceHealth",
                    "-publish-api", self.api.url, "-publish-ca", self.path("api", "ca.crt"),
                    "-publish-token", self.path("api", "token")]
        t0 = time.time_ns()
        return self.start(Proc(argv, name=self.kind, env=env)), t0

    def published_ms(self, t0, mark, n_slices):
        """exec to the n-th slice created (the API server's request events)."""
        def created():
            evs = self.api.events_since(mark, event="request", verb="create",
                                        resource="resourceslices", code=201)
            return evs[n_slices - 1] if len(evs) >= n_slices else None
        ev = wait_for(created, T, "%d slices created" % n_slices)
        return (ev["t_ns"] - t0) / 1e6

    def claims(self, n):
        dev = "gopher-%d" if self.kind == "kdp" else "dev-%d"
        out = []
        for i in range(n):
            uid = self.api.create_claim("default", "c%d" % i, DRV, NODE, "gpu", [dev % (i % 16)])
            out.append("default/c%d/%s" % (i, uid))
        return out

    def prepare(self, claims):
        r = self.kl.dra_prepare(DRV, claims)
        bad = [c for c in r.get("claims", []) if c["result"] != "prepared"]
        if not r.get("ok") or bad:
            raise AssertionError("prepare failed: %s" % (bad[:1] or r))
        return r["elapsed_us"]

    def unprepare(self, claims):
        r = self.kl.dra_unprepare(DRV, claims)
        if not r.get("ok"):
            raise AssertionError("unprepare failed: %s" % r)

    def run(self):
        a = self.args
        res = {}
        self.emulators()
        mark = self.api.mark()
        drv, t0 = self.driver(16)
        res["start_to_published_ms"] = self.published_ms(t0, mark, 1)
        self.kl.wait_dra_registered(DRV, T)
        time.sleep(1.0)
        st = proc_status(drv.pid)
        n_libs, top = libraries(drv.pid)
        res["idle"] = {"rss_kb": kb(st["VmRSS"]), "rss_anon_kb": kb(st["RssAnon"]),
                       "rss_file_kb": kb(st["RssFile"]), "threads": int(st["Threads"]),
                       "shared_libs": n_libs, "top_libs": top[:6]}
        pool = self.claims(16)
        lat = []
        for i in range(a.n1):
            c = [pool[i % 16]]
            lat.append(self.prepare(c))
            self.unprepare(c)
        res["prepare_1"] = {"n": a.n1, "p50_us": percentile(lat, 50),
                            "p99_us": percentile(lat, 99)}
        lat = []
        for i in range(a.n16):
            lat.append(self.prepare(pool))
            self.unprepare(pool)
        res["prepare_16"] = {"n": a.n16, "p50_us": percentile(lat, 50),
                             "p99_us": percentile(lat, 99)}
        for i in range(a.cycles):
            c = [pool[i % 16]]
            self.prepare(c)
            self.unprepare(c)
        st = proc_status(drv.pid)
        res["after_cycles"] = {"cycles": a.cycles + a.n1 + 16 * a.n16,
                               "rss_kb": kb(st["VmRSS"]), "rss_anon_kb": kb(st["RssAnon"])}
        self.stop()
        # 1,000 devices: 8 slices of 128 and one of 104
        self.emulators()
        mark = self.api.mark()
        drv, t0 = self.driver(1000)
        res["publish_1000_ms"] = self.published_ms(t0, mark, 8)
        self.stop()
        return res


def bind_figures(args):
    """kdp only: kdp-test-dra-driver with a bind op (binding conditions) in a
    cluster of other drivers' claims: the claim watch's memory, the time
    from an allocation to the driver's status write that makes it ready."""
    b = Bench(args, "kdp")
    res = {}
    try:
        b.emulators()
        others = 200 if args.quick else 2000
        for i in range(others):
            b.api.create_claim("default", "o%d" % i, "other.example.com", "node-z", "r",
                               ["d%d" % (i % 8)])
        env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "NODE_NAME")}
        base = [os.path.join(args.bin, "kdp-test-dra-driver"), "--kubelet-root",
                b.path("root"), "--kubeconfig", b.api.kubeconfig_token, "--driver", DRV,
                "--node", NODE, "--cdi-dir", b.path("cdi"), "--binding-conditions",
                "example.com/attached", "--binding-failure-conditions", "example.com/failed"]
        for mode in ("without", "with"):
            mark = b.api.mark()
            kmark = b.kl.mark()
            drv = b.start(Proc(base + (["--bind", "ok"] if mode == "with" else []),
                               name="bind-" + mode, env=env))
            b.kl.wait_event("dra_registered", T, since=kmark, driver=DRV)
            if mode == "with":  # the claims listed, the watch open
                b.api.wait_event("request", T, since=mark, verb="watch", resource="resourceclaims")
            time.sleep(1.0)
            st = proc_status(drv.pid)
            res["rss_anon_kb_" + mode] = kb(st["RssAnon"])
            if mode == "without":
                drv.stop()
                b.procs.remove(drv)
        lat = []
        for i in range(20 if args.quick else 200):
            mark = b.api.mark()
            b.api.create_claim("default", "b%d" % i, DRV, NODE, "gpu", ["dev-%d" % (i % 4)],
                               binding_conditions=["example.com/attached"],
                               binding_failure_conditions=["example.com/failed"])
            created = b.api.events_since(mark, event="reply", cmd="create-claim")[0]["t_ns"]
            ev = b.api.wait_event("request", T, since=mark, verb="update",
                                  resource="resourceclaims/status", code=200)
            lat.append((ev["t_ns"] - created) / 1e3)
        res["others"] = others
        res["allocated_to_ready"] = {"n": len(lat), "p50_us": percentile(lat, 50),
                                     "p99_us": percentile(lat, 99)}
    finally:
        b.stop()
    return res


def fmt_libs(top):
    return ", ".join("%s %.1f" % (n.split(".so")[0], v / 1024) for n, v in top[:4])


def table(res, machine):
    k, g = res["kdp"], res["go"]
    rows = [
        ("start (exec) to slices published, 16 devices", "%.0f ms" % k["start_to_published_ms"],
         "%.0f ms" % g["start_to_published_ms"]),
        ("start to 1,000 devices published (8 slices)", "%.0f ms" % k["publish_1000_ms"],
         "%.0f ms" % g["publish_1000_ms"]),
        ("idle RSS (anonymous + file-backed)",
         "%.1f MB (%.1f + %.1f)" % (k["idle"]["rss_kb"] / 1024, k["idle"]["rss_anon_kb"] / 1024,
                                    k["idle"]["rss_file_kb"] / 1024),
         "%.1f MB (%.1f + %.1f)" % (g["idle"]["rss_kb"] / 1024, g["idle"]["rss_anon_kb"] / 1024,
                                    g["idle"]["rss_file_kb"] / 1024)),
        ("threads", str(k["idle"]["threads"]), str(g["idle"]["threads"])),
        ("shared libraries loaded (biggest in RSS, MB)",
         "%d (%s)" % (k["idle"]["shared_libs"], fmt_libs(k["idle"]["top_libs"])),
         "%d" % g["idle"]["shared_libs"]),
        ("NodePrepareResources, 1 claim, p50 / p99",
         "%.2f / %.2f ms" % (k["prepare_1"]["p50_us"] / 1e3, k["prepare_1"]["p99_us"] / 1e3),
         "%.2f / %.2f ms" % (g["prepare_1"]["p50_us"] / 1e3, g["prepare_1"]["p99_us"] / 1e3)),
        ("NodePrepareResources, 16 claims in one call, p50 / p99",
         "%.2f / %.2f ms" % (k["prepare_16"]["p50_us"] / 1e3, k["prepare_16"]["p99_us"] / 1e3),
         "%.2f / %.2f ms" % (g["prepare_16"]["p50_us"] / 1e3, g["prepare_16"]["p99_us"] / 1e3)),
        ("RSS after %d prepare/unprepare cycles (anonymous)" % k["after_cycles"]["cycles"],
         "%.1f MB (%.1f)" % (k["after_cycles"]["rss_kb"] / 1024,
                             k["after_cycles"]["rss_anon_kb"] / 1024),
         "%.1f MB (%.1f)" % (g["after_cycles"]["rss_kb"] / 1024,
                             g["after_cycles"]["rss_anon_kb"] / 1024)),
    ]
    bd = res.get("bind")
    if bd:
        rows.append(("binding conditions (kdp only): the claim watch with %d other claims "
                     "in the cluster, RSS anonymous without / with a bind op" % bd["others"],
                     "%.1f / %.1f MB" % (bd["rss_anon_kb_without"] / 1024,
                                         bd["rss_anon_kb_with"] / 1024), "-"))
        rows.append(("binding conditions (kdp only): an allocation to the bind op's status "
                     "written, p50 / p99",
                     "%.2f / %.2f ms" % (bd["allocated_to_ready"]["p50_us"] / 1e3,
                                         bd["allocated_to_ready"]["p99_us"] / 1e3), "-"))
    out = ["DRA driver, %s:" % machine, "",
           "| figure | kdp (C, libkdp-dra) | Go (grpc-go, net/http) |", "|---|---|---|"]
    out += ["| %s | %s | %s |" % r for r in rows]
    out += ["", "Per prepare, kdp reads the claim from the API server, checks its devices, "
                "writes a CDI spec and a checkpoint record (fsync) and answers; the Go driver "
                "answers from memory."]
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--out", default=None)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    args.bin = os.path.abspath(args.bin)
    os.environ["KDP_BIN_DIR"] = args.bin
    args.n1, args.n16, args.cycles = (5, 2, 10) if args.quick else (300, 50, 3000)
    res = {}
    for kind in ("kdp", "go"):
        b = Bench(args, kind)
        try:
            res[kind] = b.run()
        finally:
            b.stop()
    res["bind"] = bind_figures(args)
    cpu = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    machine = "%d CPUs (%s)" % (os.cpu_count(), cpu)
    md = table(res, machine)
    print(md)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "dra.json"), "w") as f:
            json.dump(res, f, indent=1)
        with open(os.path.join(args.out, "dra.md"), "w") as f:
            f.write(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
