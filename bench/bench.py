#!/usr/bin/python3
"""kdp side by side with the Go way, and with the physical floor.

    bench/bench.py --bin BUILD/bin --tools TOOLS_DIR --out OUT_DIR [--quick]

Runs kdp-example-gopher (BUILD/bin) and the Go reference plugin
(TOOLS_DIR/kdp-bench-goplugin) under kdp-bench-driver (a grpc-go kubelet), in
the same run and interleaved (A B A B ...: every figure is gathered in rounds
that alternate between the two plugins, so both share the machine's noise),
plus kdp-bench-floor. Writes OUT_DIR/results.json, OUT_DIR/results.md (the
table), and the latency samples (OUT_DIR/samples/*.txt, one value in us per
line) for bench/plot.gp. --quick: tiny counts (the ctest smoke run).

Not a test of the figures' values: they depend on the machine.
"""
import argparse
import datetime
import json
import os
import platform
import queue
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

PLUGINS = ("kdp", "go")

FULL = dict(starts=20, warmup=500, alloc_lat=10000, alloc_total=100000, rounds=5,
            updates=200, restarts=20, idle_s=30.0, list_sizes=(10000, 100000), list_rounds=2,
            floor_n=20000)
QUICK = dict(starts=2, warmup=20, alloc_lat=200, alloc_total=400, rounds=2,
             updates=4, restarts=2, idle_s=1.0, list_sizes=(100, 1000), list_rounds=1,
             floor_n=1000)

KUBELET_MAX = 4 * 1024 * 1024


def log(msg):
    print("bench: " + msg, file=sys.stderr, flush=True)


def pct(values, p):
    v = sorted(values)
    if not v:
        return None
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


def read_samples(path):
    try:
        with open(path) as f:
            return [float(x) for x in f if x.strip()]
    except FileNotFoundError:
        return []


class Driver:
    """One kdp-bench-driver process (one plugin); commands in, JSON lines out."""

    def __init__(self, name, tools, root, argv, devices, pin=False, max_msg=None):
        self.name = name
        self.dir = os.path.join(root, "dp")
        os.makedirs(self.dir, exist_ok=True)
        self.log_path = os.path.join(root, "plugin.log")
        cmd = ["taskset", "-c", "0"] if pin else []
        cmd += [os.path.join(tools, "kdp-bench-driver"), "-dir", self.dir, "-devices", devices,
                "-log", self.log_path]
        if max_msg:
            cmd += ["-max-msg", str(max_msg)]
        cmd += ["--"] + argv
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=open(os.path.join(root, "driver.log"), "a"),
                                     text=True, bufsize=1)
        self.lines = queue.Queue()
        threading.Thread(target=self._reader, daemon=True).start()
        self.read(30)  # ready

    def _reader(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def send(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def read(self, timeout=600):
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise RuntimeError("%s: no answer from the driver within %ss" % (self.name, timeout))
        if line is None:
            raise RuntimeError("%s: the driver exited (see driver.log)" % self.name)
        r = json.loads(line)
        if r.get("ok") is False:
            raise RuntimeError("%s: %s: %s (plugin log: %s)" % (self.name, r.get("cmd"),
                                                                r.get("error"), self.log_path))
        return r

    def cmd(self, line, timeout=600):
        self.send(line)
        return self.read(timeout)

    def close(self):
        try:
            self.send("quit")
            self.proc.wait(20)
        except Exception:  # noqa: BLE001
            self.proc.kill()
            self.proc.wait()


def both(drivers, line, timeout=600):
    """Sends line to every driver at once, then collects every answer."""
    for d in drivers.values():
        d.send(line)
    return {k: d.read(timeout) for k, d in drivers.items()}


def make_devices(path, ids, shuffle):
    os.makedirs(path, exist_ok=True)
    ids = list(ids)
    if shuffle:
        random.Random(5).shuffle(ids)
    for i in ids:
        with open(os.path.join(path, i), "w") as f:
            f.write("gopher\n")


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True,
                              timeout=20).stdout.strip()
    except Exception:  # noqa: BLE001
        return ""


def machine(bin_dir):
    lscpu = sh("lscpu")
    get = lambda k: (re.search(r"^%s:\s*(.*)$" % re.escape(k), lscpu, re.M) or [None, ""])[1]  # noqa: E731
    mem = sh("awk '/MemTotal/ {printf \"%.1f GiB\", $2/1048576}' /proc/meminfo")
    cache = os.path.join(os.path.dirname(os.path.abspath(bin_dir)), "CMakeCache.txt")
    build_type = ""
    cflags = ""
    if os.path.exists(cache):
        with open(cache) as f:
            c = f.read()
        m = re.search(r"^CMAKE_BUILD_TYPE:\w+=(.*)$", c, re.M)
        # empty in the cache: the project's default (CMakeLists.txt)
        build_type = (m.group(1) if m else "") or "RelWithDebInfo"
        m = re.search(r"^CMAKE_C_FLAGS_%s:\w+=(.*)$" % build_type.upper(), c, re.M)
        cflags = m.group(1) if m else ""
    dpkg = lambda p: sh("dpkg-query -W -f='${Version}' %s 2>/dev/null" % p)  # noqa: E731
    return {
        "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "cpu": "%s, %s CPUs (%s)" % (get("Model name"), get("CPU(s)"),
                                      get("Hypervisor vendor") or "bare metal"),
        "memory": mem,
        "kernel": platform.release(),
        "os": sh(". /etc/os-release && echo $PRETTY_NAME"),
        "load_before": open("/proc/loadavg").read().split()[:3],
        "cc": sh("cc --version | head -1"),
        "go": sh("go version"),
        "nghttp2": dpkg("libnghttp2-dev"),
        "protobuf-c": dpkg("libprotobuf-c-dev"),
        "grpc-go": dpkg("golang-google-grpc-dev"),
        "protobuf-go": dpkg("golang-google-protobuf-dev"),
        "build_type": build_type,
        "cflags": cflags,
    }


def static_figures(binaries, tmp):
    out = {}
    for k, path in binaries.items():
        stripped = os.path.join(tmp, "stripped-" + k)
        subprocess.run(["strip", "-o", stripped, path], check=True)
        ldd = subprocess.run(["ldd", path], capture_output=True, text=True)
        libs = [l for l in ldd.stdout.splitlines() if l.strip() and "linux-vdso" not in l
                and "not a dynamic" not in l] if ldd.returncode == 0 else []
        out[k] = {"size": os.path.getsize(path), "stripped": os.path.getsize(stripped),
                  "shared_libs": len(libs), "libs": [l.split()[0] for l in libs]}
    return out


def run(args):
    cfg = QUICK if args.quick else FULL
    t_start = time.time()
    out = os.path.abspath(args.out)
    samples = os.path.join(out, "samples")
    shutil.rmtree(samples, ignore_errors=True)
    os.makedirs(samples)
    tmp = tempfile.mkdtemp(prefix="kdp-bench-")
    res = {"machine": machine(args.bin), "quick": args.quick, "config": cfg, "kdp": {}, "go": {},
           "command": os.environ.get("KDP_BENCH_COMMAND", " ".join(sys.argv))}
    R = {"kdp": res["kdp"], "go": res["go"]}
    argv = {
        "kdp": [os.path.join(args.bin, "kdp-example-gopher"), "--device-plugin-dir", "{dir}",
                "--devices-dir", "{devices}"],
        "go": [os.path.join(args.tools, "kdp-bench-goplugin"), "-device-plugin-dir", "{dir}",
               "-devices-dir", "{devices}"],
    }
    for k in PLUGINS:
        if not os.access(argv[k][0], os.X_OK):
            raise SystemExit("bench: %s missing: build it first" % argv[k][0])
    ids8 = ["g%d" % i for i in range(8)]

    def sessions(tag, devices=None, pin=False, max_msg=None, ids=ids8):
        ds = {}
        for k in PLUGINS:
            root = os.path.join(tmp, "%s-%s" % (k, tag))
            dev = devices or os.path.join(root, "devices")
            if not devices:
                make_devices(dev, ids, shuffle=False)
            ds[k] = Driver(k, args.tools, root, argv[k], dev, pin=pin, max_msg=max_msg)
        return ds

    try:
        # --- the floor ---
        log("floor: raw unix-socket round trip")
        floor = os.path.join(args.tools, "kdp-bench-floor")
        res["floor"] = {}
        for name, c, s in (("same_core", 0, 0), ("cross_core", 0, 1)):
            p = subprocess.run([floor, "-n", str(cfg["floor_n"]), "-cpu-client", str(c),
                                "-cpu-server", str(s)], capture_output=True, text=True, check=True)
            res["floor"][name] = json.loads(p.stdout)

        # the memory floor: a dynamically linked C program that does nothing
        sl = subprocess.Popen(["sleep", "60"])
        time.sleep(0.5)
        with open("/proc/%d/status" % sl.pid) as f:
            stat = dict(l.split(":", 1) for l in f if ":" in l)
        res["floor"]["sleep_rss_kb"] = int(stat["VmRSS"].split()[0])
        res["floor"]["sleep_rss_file_kb"] = int(stat["RssFile"].split()[0])
        sl.kill()
        sl.wait()

        # --- binaries ---
        st = static_figures({"kdp": argv["kdp"][0], "go": argv["go"][0]}, tmp)
        for k in PLUGINS:
            R[k]["binary"] = st[k]

        # --- exec -> Register, A B A B, and the floor's canned Register ---
        log("exec -> Register: %d starts each (and the floor)" % cfg["starts"])
        ds = sessions("start")
        froot = os.path.join(tmp, "floor-start")
        fd = Driver("floor", args.tools, froot, ["/bin/true"], froot)
        starts = {k: [] for k in PLUGINS}
        fstarts = []
        for _ in range(cfg["starts"]):
            r = fd.cmd("execreg %s -register {dir}/kubelet.sock" % floor, 60)
            fstarts.append(r["exec_to_register_us"] / 1000.0)
            for k in PLUGINS:
                r = ds[k].cmd("start", 180)
                starts[k].append(r["exec_to_register_us"] / 1000.0)
                ds[k].cmd("stop")
        fd.close()
        res["floor"]["exec_to_register_ms"] = {"p50": pct(fstarts, 50), "min": min(fstarts),
                                               "max": max(fstarts), "samples": fstarts}
        for k in PLUGINS:
            ds[k].close()
            R[k]["exec_to_register_ms"] = {"p50": pct(starts[k], 50), "min": min(starts[k]),
                                           "max": max(starts[k]), "samples": starts[k]}

        # --- one session each: idle, Allocate, updates, restarts ---
        log("idle: RSS, threads, %.0f s of CPU ticks and wakeups (both at once)" % cfg["idle_s"])
        ds = sessions("main")
        # kdp with its metrics endpoint on (no client scrapes it), idle at the same time
        mroot = os.path.join(tmp, "kdp-metrics-idle")
        make_devices(os.path.join(mroot, "devices"), ids8, shuffle=False)
        dm = Driver("kdp-metrics", args.tools, mroot,
                    argv["kdp"] + ["--metrics-address", "127.0.0.1:0"],
                    os.path.join(mroot, "devices"))
        ds3 = dict(ds, kdp_metrics=dm)
        both(ds3, "start", 180)
        time.sleep(1.0)
        st = both(ds3, "status")
        for k in PLUGINS:
            pr = st[k]["proc"]
            R[k]["idle"] = {key: pr[key] for key in ("rss_kb", "rss_anon_kb", "rss_file_kb",
                                                     "pss_kb", "uss_kb", "threads")}
        idle = both(ds3, "idle %g" % cfg["idle_s"], cfg["idle_s"] + 60)
        for k in PLUGINS:
            R[k]["idle"].update({"seconds": cfg["idle_s"], "cpu_ticks": idle[k]["cpu_ticks"],
                                 "wakeups": idle[k]["wakeups"], "run_ns": idle[k]["run_ns"]})
        R["kdp"]["idle_metrics"] = {"seconds": cfg["idle_s"],
                                    "cpu_ticks": idle["kdp_metrics"]["cpu_ticks"],
                                    "wakeups": idle["kdp_metrics"]["wakeups"],
                                    "rss_kb": st["kdp_metrics"]["proc"]["rss_kb"],
                                    "threads": st["kdp_metrics"]["proc"]["threads"]}
        dm.cmd("stop")
        dm.close()

        def allocate_rounds(ds, total, file_tag):
            """total Allocates each, in cfg rounds, alternating; CPU ticks summed."""
            per = max(1, total // cfg["rounds"])
            ticks = {k: 0 for k in PLUGINS}
            run_ns = {k: 0 for k in PLUGINS}
            for _ in range(cfg["rounds"]):
                for k in PLUGINS:
                    f = os.path.join(samples, "%s_%s.txt" % (file_tag, k)) if file_tag else ""
                    r = ds[k].cmd("allocate %d g0 %s" % (per, f))
                    ticks[k] += r["cpu_ticks"]
                    run_ns[k] += r["run_ns"]
            return per * cfg["rounds"], ticks, run_ns

        log("Allocate: %d calls each for latency, %d in all (unpinned)" %
            (cfg["alloc_lat"], cfg["alloc_total"]))
        for k in PLUGINS:
            ds[k].cmd("allocate %d g0" % cfg["warmup"])
        n, ticks, run_ns = allocate_rounds(ds, cfg["alloc_lat"], "alloc")
        rest = cfg["alloc_total"] - n - cfg["warmup"]
        if rest > 0:
            allocate_rounds(ds, rest, None)
        st = both(ds, "status")
        hz = os.sysconf("SC_CLK_TCK")
        for k in PLUGINS:
            lat = read_samples(os.path.join(samples, "alloc_%s.txt" % k))
            R[k]["allocate"] = {"n": len(lat), "p50_us": pct(lat, 50), "p99_us": pct(lat, 99),
                                "cpu_ms_per_10k": ticks[k] * 1000.0 / hz * 10000 / n,
                                "run_ms_per_10k": run_ns[k] / 1e6 * 10000 / n}
            R[k]["rss_after_allocates_kb"] = st[k]["proc"]["rss_kb"]
            R[k]["allocates_done"] = cfg["alloc_total"]

        log("update latency: %d trials each" % cfg["updates"])
        per = max(1, cfg["updates"] // cfg["rounds"])
        for _ in range(cfg["rounds"]):
            for k in PLUGINS:
                ds[k].cmd("update %d %s" % (per, os.path.join(samples, "update_%s.txt" % k)))
        for k in PLUGINS:
            lat = read_samples(os.path.join(samples, "update_%s.txt" % k))
            R[k]["update"] = {"n": len(lat), "p50_us": pct(lat, 50), "p99_us": pct(lat, 99)}

        log("re-registration: %d kubelet restarts each" % cfg["restarts"])
        rr = {k: [] for k in PLUGINS}
        extra = {k: 0 for k in PLUGINS}
        per = max(1, cfg["restarts"] // cfg["rounds"])
        for _ in range(cfg["rounds"]):
            for k in PLUGINS:
                r = ds[k].cmd("restart %d" % per, 300)
                extra[k] += r["extra_registers"]
                rr[k].append(r)
        for k in PLUGINS:
            # per-round summaries: p50 of the round p50s, worst max
            R[k]["reregister"] = {
                "n": per * cfg["rounds"],
                "p50_ms": pct([r["latency_us"]["p50"] for r in rr[k]], 50) / 1000.0,
                "max_ms": max(r["latency_us"]["max"] for r in rr[k]) / 1000.0,
                "to_first_list_p50_ms": pct([r["to_first_list_us"]["p50"] for r in rr[k]],
                                            50) / 1000.0,
                "extra_registers": extra[k]}
        for k in PLUGINS:
            ds[k].cmd("stop")
            ds[k].close()

        # --- everything on one core ---
        log("Allocate on one core (taskset -c 0): %d calls each" % cfg["alloc_lat"])
        ds = sessions("pinned", pin=True)
        both(ds, "start", 180)
        for k in PLUGINS:
            ds[k].cmd("allocate %d g0" % cfg["warmup"])
        # a plugin without an allocate op (kdp answers on its loop thread)
        simple = os.path.join(args.bin, "kdp-example-simple")
        os.makedirs(os.path.join(tmp, "default-pinned", "devices"))
        dflt = Driver("kdp-default", args.tools, os.path.join(tmp, "default-pinned"),
                      [simple, "--device-plugin-dir", "{dir}", "--count", "8"],
                      os.path.join(tmp, "default-pinned", "devices"), pin=True)
        dflt.cmd("start", 180)
        dflt.cmd("allocate %d dev-0" % cfg["warmup"])
        # kdp-example-gopher again with its metrics endpoint on: the cost of the counters
        mroot = os.path.join(tmp, "kdp-metrics-pinned")
        make_devices(os.path.join(mroot, "devices"), ids8, shuffle=False)
        dmet = Driver("kdp-metrics", args.tools, mroot,
                      argv["kdp"] + ["--metrics-address", "127.0.0.1:0"],
                      os.path.join(mroot, "devices"), pin=True)
        dmet.cmd("start", 180)
        dmet.cmd("allocate %d g0" % cfg["warmup"])
        met_ticks = 0
        echo_srv = os.path.join(args.bin, "kdp-echo-server")
        echo_cli = os.path.join(args.bin, "kdp-go-client")
        echo = None
        if os.access(echo_srv, os.X_OK) and os.access(echo_cli, os.X_OK):
            # the floor with this client: kdp's gRPC transport answering inline
            esock = os.path.join(tmp, "echo.sock")
            echo = subprocess.Popen(["taskset", "-c", "0", echo_srv, "--socket", esock],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for _ in range(100):
                if os.path.exists(esock):
                    break
                time.sleep(0.02)
        per = max(1, cfg["alloc_lat"] // cfg["rounds"])
        echo_p50 = []
        ticks = {k: 0 for k in PLUGINS}
        run_ns = {k: 0 for k in PLUGINS}
        for _ in range(cfg["rounds"]):
            for k in PLUGINS:
                f = os.path.join(samples, "alloc_pinned_%s.txt" % k)
                r = ds[k].cmd("allocate %d g0 %s" % (per, f))
                ticks[k] += r["cpu_ticks"]
                run_ns[k] += r["run_ns"]
            dflt.cmd("allocate %d dev-0 %s" % (per, os.path.join(samples, "alloc_pinned_default.txt")))
            r = dmet.cmd("allocate %d g0 %s" % (per, os.path.join(samples,
                                                                  "alloc_pinned_metrics.txt")))
            met_ticks += r["cpu_ticks"]
            if echo:
                p = subprocess.run(["taskset", "-c", "0", echo_cli, "-socket", esock, "-scenario",
                                    "bench", "-n", str(per), "-timeout", "120s"],
                                   capture_output=True, text=True)
                if p.returncode == 0:
                    echo_p50.append(json.loads(p.stdout)["p50_us"])
        n = per * cfg["rounds"]
        if echo:
            echo.terminate()
            echo.wait()
            if echo_p50:
                res["floor"]["echo_pinned_p50_us"] = pct(echo_p50, 50)
        for k in PLUGINS:
            lat = read_samples(os.path.join(samples, "alloc_pinned_%s.txt" % k))
            R[k]["allocate_pinned"] = {"n": len(lat), "p50_us": pct(lat, 50),
                                       "p99_us": pct(lat, 99),
                                       "cpu_ms_per_10k": ticks[k] * 1000.0 / hz * 10000 / n,
                                       "run_ms_per_10k": run_ns[k] / 1e6 * 10000 / n}
            ds[k].cmd("stop")
            ds[k].close()
        lat = read_samples(os.path.join(samples, "alloc_pinned_default.txt"))
        R["kdp"]["allocate_pinned_default"] = {"n": len(lat), "p50_us": pct(lat, 50),
                                               "p99_us": pct(lat, 99)}
        dflt.cmd("stop")
        dflt.close()
        lat = read_samples(os.path.join(samples, "alloc_pinned_metrics.txt"))
        R["kdp"]["allocate_pinned_metrics"] = {"n": len(lat), "p50_us": pct(lat, 50),
                                               "p99_us": pct(lat, 99),
                                               "cpu_ms_per_10k": met_ticks * 1000.0 / hz * 10000 / n}
        dmet.cmd("stop")
        dmet.close()

        # --- large device lists ---
        for size in cfg["list_sizes"]:
            log("ListAndWatch with %d devices (files created in random order)" % size)
            big = os.path.join(tmp, "devices-%d" % size)
            make_devices(big, ("gopher-%06d" % i for i in range(size)), shuffle=True)
            got = {k: [] for k in PLUGINS}
            for _ in range(cfg["list_rounds"]):
                for k in PLUGINS:
                    d = Driver(k, args.tools, os.path.join(tmp, "%s-list%d" % (k, size)), argv[k],
                               big, max_msg=64 << 20)
                    try:
                        s = d.cmd("start", 600)
                        r = d.cmd("list-large", 600)
                        r["exec_to_first_list_ms"] = s["exec_to_first_list_us"] / 1000.0
                        r["health_ms"] = d.cmd("health-large", 600)["ms"]
                        got[k].append(r)
                        d.cmd("stop")
                    finally:
                        d.close()
            for k in PLUGINS:
                rs = got[k]
                R[k]["list_and_watch_%d" % size] = {
                    "devices": rs[0]["devices"], "bytes": rs[0]["bytes"],
                    "over_kubelet_limit": rs[0]["bytes"] > KUBELET_MAX,
                    "update_ms": min(r["ms"] for r in rs),
                    "update_ms_all": [r["ms"] for r in rs],
                    "created_ms": [x for r in rs for x in r["created_ms"]],
                    "removed_ms": [x for r in rs for x in r["removed_ms"]],
                    "health_ms": [x for r in rs for x in r["health_ms"]],
                    "created_p50_ms": pct([x for r in rs for x in r["created_ms"]], 50),
                    "removed_p50_ms": pct([x for r in rs for x in r["removed_ms"]], 50),
                    "health_p50_ms": pct([x for r in rs for x in r["health_ms"]], 50),
                    "exec_to_first_list_ms": min(r["exec_to_first_list_ms"] for r in rs),
                    "rss_kb": max(r["proc"]["rss_kb"] for r in rs)}
            shutil.rmtree(big, ignore_errors=True)
    finally:
        # the plugins' and drivers' logs, for a figure that looks wrong
        logs = os.path.join(out, "logs")
        shutil.rmtree(logs, ignore_errors=True)
        for d in sorted(os.listdir(tmp)):
            for name in ("plugin.log", "driver.log"):
                src = os.path.join(tmp, d, name)
                if os.path.isfile(src):
                    os.makedirs(os.path.join(logs, d), exist_ok=True)
                    shutil.copy(src, os.path.join(logs, d, name))
        shutil.rmtree(tmp, ignore_errors=True)

    res["machine"]["load_after"] = open("/proc/loadavg").read().split()[:3]
    res["seconds"] = round(time.time() - t_start, 1)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(res, f, indent=1, sort_keys=True)
    table = render(res)
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(table)
    print(table, end="")
    return res


# --- the table ---

TARGETS = {
    "exec_to_register": ("<= 1 ms", lambda k, g: k <= 1.0),
    "idle_rss": ("<= 1.5 MiB", lambda k, g: k <= 1536),
    "alloc_pinned_p50": ("<= 15 us", lambda k, g: k <= 15.0),
    "update_p50": ("<= 150 us", lambda k, g: k <= 150.0),
    "rereg": ("<= 1 ms", lambda k, g: k <= 1.0),
    "idle_ticks": ("0 / 0", None),
    "cpu_per_alloc": ("Go/kdp >= 5", lambda k, g: k > 0 and g / k >= 5.0 or (k == 0 and g > 0)),
    "binary": ("<= 150 KB", lambda k, g: k <= 150000),
    "single_change_p50": ("<= 50 ms", lambda k, g: k <= 50.0),
}


def fmt(v, unit="", digits=None):
    if v is None:
        return "-"
    if isinstance(v, float):
        if digits is None:
            digits = 0 if abs(v) >= 100 else 1 if abs(v) >= 10 else 2
        s = "{:,.{d}f}".format(v, d=digits)
    else:
        s = "{:,}".format(v)
    return s + (" " + unit if unit else "")


def ratio(k, g):
    if k is None or g is None:
        return "-"
    if g == 0:
        return "=" if k == 0 else "inf"
    return "%.2f" % (k / g)


def render(res):
    K, G = res["kdp"], res["go"]
    rows = []

    def row(name, kv, gv, unit="", target=None, digits=None, ratio_str=None):
        met = ""
        if target:
            label, test = TARGETS[target]
            ok = test(kv, gv) if test else None
            if target == "idle_ticks":
                ok = K["idle"]["cpu_ticks"] == 0 and K["idle"]["wakeups"] == 0
            met = "%s: %s" % (label, "met" if ok else "**not met**")
        rows.append("| %s | %s | %s | %s | %s |" % (
            name, fmt(kv, unit, digits), fmt(gv, unit, digits),
            ratio_str if ratio_str is not None else ratio(kv, gv), met))

    def both_of(path, key):
        return K[path][key], G[path][key]

    row("exec -> Register, p50 of %d" % len(K["exec_to_register_ms"]["samples"]),
        *both_of("exec_to_register_ms", "p50"), "ms", "exec_to_register")
    row("idle RSS after registration", *both_of("idle", "rss_kb"), "kB", "idle_rss")
    row("idle RSS: anonymous part", *both_of("idle", "rss_anon_kb"), "kB")
    row("idle RSS: file-backed part (libraries, binary)", *both_of("idle", "rss_file_kb"), "kB")
    row("idle private memory (USS)", *both_of("idle", "uss_kb"), "kB")
    row("threads after registration", *both_of("idle", "threads"))
    row("RSS after %s Allocates" % fmt(K["allocates_done"]), K["rss_after_allocates_kb"],
        G["rss_after_allocates_kb"], "kB")
    n = K["allocate"]["n"]
    row("Allocate p50, unpinned (%s calls)" % fmt(n), *both_of("allocate", "p50_us"), "us")
    row("Allocate p99, unpinned", *both_of("allocate", "p99_us"), "us")
    row("Allocate p50, one core (taskset -c 0)", *both_of("allocate_pinned", "p50_us"), "us",
        "alloc_pinned_p50")
    row("Allocate p99, one core", *both_of("allocate_pinned", "p99_us"), "us")
    if "allocate_pinned_default" in K:
        kv = K["allocate_pinned_default"]["p50_us"]
        echo = res["floor"].get("echo_pinned_p50_us")
        ok = bool(kv and echo and kv <= 1.2 * echo)
        rows.append("| Allocate p50, one core, no allocate op (kdp-example-simple: kdp's default "
                    "answer, on the loop thread) | %s | | | <= 1.2x the echo floor (%s): %s |" % (
                        fmt(kv, "us"), fmt(echo, "us"), "met" if ok else "**not met**"))
    if "allocate_pinned_metrics" in K:
        m = K["allocate_pinned_metrics"]
        rows.append("| Allocate p50 / p99, one core, metrics endpoint on (`--metrics-address`; "
                    "off: the row above) | %s / %s | | | |" % (fmt(m["p50_us"], "us"),
                                                             fmt(m["p99_us"], "us")))
        rows.append("| plugin CPU per 10,000 Allocates, one core, metrics on (off: below) | %s "
                    "| | | |" % fmt(m["cpu_ms_per_10k"], "ms"))
    row("plugin CPU per 10,000 Allocates, unpinned (utime+stime)",
        *both_of("allocate", "cpu_ms_per_10k"), "ms", "cpu_per_alloc")
    row("plugin CPU per 10,000 Allocates, one core", *both_of("allocate_pinned", "cpu_ms_per_10k"),
        "ms")
    row("update latency p50 (file created -> list received, %d trials)" % K["update"]["n"],
        *both_of("update", "p50_us"), "us", "update_p50")
    row("update latency p99", *both_of("update", "p99_us"), "us")
    row("re-registration p50 (kubelet.sock back -> Register, %d restarts)" %
        K["reregister"]["n"], *both_of("reregister", "p50_ms"), "ms", "rereg", digits=2)
    row("re-registration max", *both_of("reregister", "max_ms"), "ms", digits=2)
    for key in sorted(k for k in K if k.startswith("list_and_watch_")):
        n = int(key[len("list_and_watch_"):])
        if "created_p50_ms" in K[key]:
            row("ListAndWatch, %s devices: a file added -> list received, p50 of %d" %
                (fmt(n), len(K[key]["created_ms"])), *both_of(key, "created_p50_ms"), "ms",
                "single_change_p50" if n == 100000 else None)
            row("ListAndWatch, %s devices: a file removed -> list received, p50" % fmt(n),
                *both_of(key, "removed_p50_ms"), "ms")
            row("ListAndWatch, %s devices: a device's health changed -> list received, p50 of %d"
                % (fmt(n), len(K[key]["health_ms"])), *both_of(key, "health_p50_ms"), "ms",
                "single_change_p50" if n == 100000 else None)
        else:
            row("ListAndWatch, %s devices: one file added -> list received" % fmt(n),
                *both_of(key, "update_ms"), "ms")
        row("ListAndWatch, %s devices: message size (kubelet limit 4 MiB)" % fmt(n),
            *both_of(key, "bytes"), "B")
        row("ListAndWatch, %s devices: exec -> first list" % fmt(n),
            *both_of(key, "exec_to_first_list_ms"), "ms")
        row("ListAndWatch, %s devices: RSS" % fmt(n), *both_of(key, "rss_kb"), "kB")
    row("binary size, stripped", K["binary"]["stripped"], G["binary"]["stripped"], "B", "binary")
    row("shared libraries (ldd, without vdso)", K["binary"]["shared_libs"],
        G["binary"]["shared_libs"])
    row("CPU ticks over %gs idle" % K["idle"]["seconds"], *both_of("idle", "cpu_ticks"),
        target="idle_ticks")
    row("wakeups (voluntary context switches) over %gs idle" % K["idle"]["seconds"],
        *both_of("idle", "wakeups"))
    if "idle_metrics" in K:
        m = K["idle_metrics"]
        rows.append("| CPU ticks / wakeups over %gs idle, metrics endpoint on, no client | %s / %s "
                    "| | | 0 / 0: %s |" % (m["seconds"], fmt(m["cpu_ticks"]), fmt(m["wakeups"]),
                                          "met" if m["cpu_ticks"] == 0 and m["wakeups"] == 0
                                          else "**not met**"))
    f = res["floor"]
    floor_rows = [
        "| floor: exec -> Register of a canned request (C, libc only), p50 | %s | | | |" %
        fmt(f["exec_to_register_ms"]["p50"], "ms"),
        "| floor: RSS of /bin/sleep (C, libc only, doing nothing); file-backed part | "
        "%s; %s | | | |" % (fmt(f.get("sleep_rss_kb"), "kB"), fmt(f.get("sleep_rss_file_kb"), "kB")),
        "| floor: unix-socket round trip p50, same core | %s | | | |" %
        fmt(f["same_core"]["p50"], "us"),
        "| floor: unix-socket round trip p50, cross core | %s | | | |" %
        fmt(f["cross_core"]["p50"], "us"),
        "| floor: grpc-go unary call to kdp's transport answering inline (echo), one core, p50 "
        "| %s | | | |" % fmt(f.get("echo_pinned_p50_us"), "us"),
    ]
    head = ("| figure | kdp-example-gopher | Go reference (grpc-go) | kdp/Go | target (kdp) |\n"
            "|---|---|---|---|---|\n")
    return head + "\n".join(rows + floor_rows) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=True, help="the build's bin dir (kdp-example-gopher)")
    ap.add_argument("--tools", required=True, help="where bench/build.sh put its tools")
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--quick", action="store_true", help="tiny counts (smoke run)")
    ap.add_argument("--render", action="store_true", help="only print the table of OUT/results.json")
    args = ap.parse_args()
    if args.render:
        with open(os.path.join(args.out, "results.json")) as f:
            print(render(json.load(f)), end="")
        return
    os.makedirs(args.out, exist_ok=True)
    run(args)


if __name__ == "__main__":
    main()
