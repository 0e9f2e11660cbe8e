#!/usr/bin/python3
"""Measures kdp-example-gopher against the grpc-go kubelet emulator.

    bench/plugin_figures.py [BIN_DIR]        (default: $KDP_BIN_DIR, else build/bin)

Figures (printed as a markdown table; not a test: they depend on the machine):
- exec -> Register: from just before the plugin is exec'd to the Register call
  arriving at the emulator (20 runs);
- idle RSS and threads of the plugin 1 s after registration, and its CPU ticks
  and voluntary context switches (wakeups) over 5 s idle;
- update latency: a device file created or deleted -> the ListAndWatch message
  received by the emulator (200 trials);
- re-registration: the emulator's simulated kubelet restart done -> Register
  received again (50 restarts).
"""
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "pylib"))
import kdptest  # noqa: E402
from kdptest import percentile  # noqa: E402
from kdptest.kubelet import Kubelet  # noqa: E402

RES = "example.com/gopher"


def status_field(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return -1


def cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


class Gopher(kdptest.Proc):
    def __init__(self, root):
        self.devices = os.path.join(root, "gophers")
        os.makedirs(self.devices, exist_ok=True)
        super().__init__([kdptest.binary("kdp-example-gopher"), "--device-plugin-dir", root,
                          "--devices-dir", self.devices], "gopher", stdin=False)
        self.start()
        self.t_exec = self.start_ns


def run():
    figures = []
    # exec -> Register
    samples = []
    for _ in range(20):
        root = tempfile.mkdtemp(prefix="kdp-bench-")
        try:
            with Kubelet(root) as kl:
                g = Gopher(root)
                try:
                    ev = kl.wait_event("registered", 10, resource=RES)
                    samples.append((ev["register_ns"] - g.t_exec) / 1e6)
                finally:
                    g.stop()
        finally:
            shutil.rmtree(root, ignore_errors=True)
    figures.append(("exec -> Register p50 / max (20 runs)",
                    "%.2f / %.2f ms" % (statistics.median(samples), max(samples))))

    root = tempfile.mkdtemp(prefix="kdp-bench-")
    try:
        with Kubelet(root) as kl:
            g = Gopher(root)
            try:
                kl.wait_event("registered", 10, resource=RES)
                time.sleep(1.0)
                pid = g.pid
                figures.append(("idle RSS", "%d kB" % status_field(pid, "VmRSS")))
                figures.append(("threads (main, inotify watcher, kdp worker)",
                                "%d" % status_field(pid, "Threads")))
                t0, w0 = cpu_ticks(pid), status_field(pid, "voluntary_ctxt_switches")
                time.sleep(5.0)
                t1, w1 = cpu_ticks(pid), status_field(pid, "voluntary_ctxt_switches")
                figures.append(("CPU ticks / wakeups over 5 s idle", "%d / %d" % (t1 - t0, w1 - w0)))

                lat = []
                for i in range(200):
                    path = os.path.join(g.devices, "g%d" % (i // 2))
                    mark = kl.mark()
                    t0 = time.time_ns()
                    if i % 2 == 0:
                        with open(path, "w") as f:
                            f.write("gopher\n")
                    else:
                        os.unlink(path)
                    ev = kl.wait_event("devices", 10, since=mark, resource=RES)
                    lat.append((ev["t_ns"] - t0) / 1e3)
                figures.append(("update latency p50 / p99 (file created or deleted -> "
                                "ListAndWatch message, 200 trials)",
                                "%.0f / %.0f us" % (percentile(lat, 50), percentile(lat, 99))))

                rereg = []
                for _ in range(50):
                    mark = kl.mark()
                    kl.ok("restart")
                    done = kl.wait_event(lambda e: e.get("event") == "restart"
                                         and e.get("phase") == "done", 10, since=mark)
                    ev = kl.wait_event("registered", 10, since=mark, resource=RES)
                    rereg.append((ev["register_ns"] - done["t_ns"]) / 1e6)
                figures.append(("re-registration after a kubelet restart p50 / max "
                                "(kubelet.sock back -> Register, 50 restarts)",
                                "%.2f / %.2f ms" % (statistics.median(rereg), max(rereg))))
                figures.append(("RSS after all that", "%d kB" % status_field(pid, "VmRSS")))
            finally:
                g.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print("| figure | kdp-example-gopher |\n|---|---|")
    for name, value in figures:
        print("| %s | %s |" % (name, value))


if __name__ == "__main__":
    if len(sys.argv) > 1:
        os.environ["KDP_BIN_DIR"] = os.path.abspath(sys.argv[1])
    run()
