"""Shared helpers for kdp's integration tests: real plugin processes (the
examples and kdp-test-plugin) against the kubelet emulator (kdp-test-kubelet,
driven through kdptest.kubelet). Python 3 stdlib only.

    class MyTest(harness.IntegrationTest):
        def test_x(self):
            kl = self.kubelet()                       # emulator on self.dir
            pl = self.start_test_plugin("--devices", "a,b") # kdp-test-plugin on self.dir
            kl.wait_event("registered", T, resource=pl.resources[0])
            pl.wait_log(r"registered with the kubelet", T)
            rc = pl.stop()                            # SIGTERM -> exit code

Each test gets a fresh device-plugin directory (mkdtemp under /tmp, prefix
"kdp-": unix socket paths must stay under 107 bytes). Every process a test
starts is stopped when the test ends, pass or fail (SIGTERM, then SIGKILL of
its process group), and the directory removed. Every wait is bounded; a
per-test watchdog kills every process past TEST_BOUND so that no wait can
hang. On failure, the last events and stderr of every process are printed.
"""

import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import unittest

from kdptest.kubelet import Kubelet
from kdptest.proc import SANITIZER_MARKS, JsonProc, binary, log

T = 10.0            # bound of one wait
TEST_BOUND = 120.0  # bound of one test: past it, every process is killed

_FIGURES = []

def figure(name, value):
    """Records a measured figure (printed at once and in the final summary)."""
    line = "%s: %s" % (name, value)
    _FIGURES.append(line)
    log("FIGURE " + line)


def print_figures():
    if _FIGURES:
        log("\n=== measured figures ===\n" + "\n".join(_FIGURES))


def percentile(values, p):
    """The p-th percentile (nearest rank) of a non-empty list."""
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(round(p / 100.0 * len(s) + 0.5)) - 1))
    return s[k]


def socket_for(resource):
    """kdp-test-plugin's socket name for a resource (see tests/plugin/test_plugin.c)."""
    return "".join(c if (c.islower() or c.isdigit()) and c.isascii() else "-"
                   for c in resource) + ".sock"


def env_name_for(resource):
    """kdp's default env var of the default allocation (kdp.h, kdp_config.env_name)."""
    return "KDP_DEVICES_" + "".join(c.upper() if c.isalnum() and c.isascii() else "_"
                                    for c in resource)


class PluginProc(JsonProc):
    """A plugin process: stdin piped, stdout lines kept as events (kdp-test-plugin
    acknowledges each stdin command there: `command "LINE" on RES: rc`, kept as
    {"event": "raw", "line": ...}), stderr (kdp's klog lines) kept whole and
    searchable with wait_log()."""

    def __init__(self, argv, name, dir, socket, resources, env=None):
        super().__init__(argv, name=name, env=env)
        self.dir = dir
        self.socket_name = socket
        self.socket = os.path.join(dir, socket) if socket else None
        self.lock = self.socket + ".lock" if socket else None
        self.resources = list(resources)
        self.start_ns = None
        self._log = []
        self._log_eof = False

    def start(self, ready=None, timeout=T):
        self.start_ns = time.time_ns()
        return super().start(ready, timeout)

    def _read_stderr(self):
        for raw in self.proc.stderr:
            line = raw.decode("utf-8", errors="replace").rstrip("\n")
            with self._cond:
                self._log.append(line)
                self._stderr.append(line)
                self._cond.notify_all()
        with self._cond:
            self._log_eof = True
            self._cond.notify_all()

    # -- stderr ------------------------------------------------------------

    def log_mark(self):
        with self._cond:
            return len(self._log)

    def log_lines(self, since=0):
        with self._cond:
            return list(self._log[since:])

    def log_text(self):
        return "\n".join(self.log_lines())

    def count_log(self, pattern, since=0):
        rx = re.compile(pattern)
        return sum(1 for line in self.log_lines(since) if rx.search(line))

    def wait_log(self, pattern, timeout=T, since=0):
        """The first stderr line from line `since` on that matches the regex;
        AssertionError on timeout or if stderr closes (the process exited)."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self._cond:
            i = since
            while True:
                while i < len(self._log):
                    if rx.search(self._log[i]):
                        return self._log[i]
                    i += 1
                left = deadline - time.monotonic()
                if self._log_eof or left <= 0:
                    break
                self._cond.wait(min(left, 0.5))
        why = "exited" if self._log_eof else "timed out after %.1f s" % timeout
        raise AssertionError("%s: no log line matching %r (%s)%s"
                             % (self.name, pattern, why, self.diagnostics()))

    # -- stdin commands (kdp-test-plugin) ----------------------------------

    def command(self, line, timeout=T):
        """Sends a stdin command and waits for its acknowledgement on every
        resource; returns {resource: rc}."""
        mark = self.mark()
        self.send(line)
        prefix = 'command "%s" on ' % line
        out = {}
        for _ in self.resources:
            ev = self.wait_event(lambda e: e.get("event") == "raw"
                                 and e.get("line", "").startswith(prefix)
                                 and e["line"][len(prefix):].split(":")[0] not in out,
                                 timeout, since=mark)
            res, rc = ev["line"][len(prefix):].rsplit(": ", 1)
            out[res] = int(rc)
        return out

    # -- exit --------------------------------------------------------------

    def wait_exit(self, timeout=T):
        """Waits (bounded) for the process to exit by itself; returns its exit
        code. AssertionError if it is still running after timeout."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError("%s: still running %.1f s later%s"
                                 % (self.name, timeout, self.diagnostics())) from None
        return self.stop()

    def diagnostics(self, n=25):
        evs = [e.get("line", e) for e in self.events()[-n:]]
        rc = self.proc.poll() if self.proc else None
        return ("\n--- %s: last %d stdout lines (exit %s) ---\n%s\n--- stderr (last 60 lines) ---\n%s"
                % (self.name, len(evs), rc, "\n".join(str(e) for e in evs),
                   "\n".join(self.log_lines()[-60:])))


class IntegrationTest(unittest.TestCase):
    """Base class: a fresh device-plugin dir per test, process helpers,
    everything stopped at the end (cleanups run even when the test fails)."""

    bin_dir = None  # None = $KDP_BIN_DIR

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="kdp-", dir="/tmp")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.procs = []
        self._problems0 = self._problems()
        self.watchdog = threading.Timer(TEST_BOUND, self._overrun)
        self.watchdog.daemon = True
        self.watchdog.start()
        self.addCleanup(self.watchdog.cancel)
        self.addCleanup(self._stop_all)

    def _overrun(self):
        log("*** WATCHDOG: %s exceeded %.0f s: killing its processes" % (self.id(), TEST_BOUND))
        for p in self.procs:
            p.signal(signal.SIGKILL)

    def _problems(self):
        """How many failures and errors the test result holds so far."""
        result = getattr(getattr(self, "_outcome", None), "result", None)
        return len(getattr(result, "failures", ())) + len(getattr(result, "errors", ()))

    def _stop_all(self):
        if self._problems() != self._problems0:
            log("\n*** %s failed: state of its processes ***" % self.id())
            for p in self.procs:
                log(p.diagnostics())
        # Plugins first (so that their exit is seen by a live kubelet), then the rest.
        for p in sorted(self.procs, key=lambda p: isinstance(p, Kubelet)):
            p.stop()
        # A sanitizer report in any plugin's stderr fails the test (ASan builds),
        # whether or not the test looked at that process's exit code.
        reports = []
        for p in self.procs:
            if isinstance(p, PluginProc):
                lines = p.log_lines()
                for i, line in enumerate(lines):
                    if any(m in line for m in SANITIZER_MARKS):
                        reports.append("%s (exit %s):\n%s" % (p.name, p.returncode,
                                                              "\n".join(lines[i:i + 40])))
                        break
        if reports:
            raise AssertionError("sanitizer report(s):\n" + "\n\n".join(reports))

    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    def dir_entries(self):
        """The device-plugin dir's entries other than directories (the test's
        own files live in subdirectories), sorted."""
        return sorted(e for e in os.listdir(self.dir)
                      if not os.path.isdir(os.path.join(self.dir, e)))

    def file(self, name):
        """A path for a test's own file, outside the device-plugin dir itself
        (which must hold nothing but what kdp and the kubelet put there)."""
        return os.path.join(self.subdir("files"), name)

    def subdir(self, name):
        d = self.path(name)
        os.makedirs(d, exist_ok=True)
        return d

    # -- processes ---------------------------------------------------------

    def kubelet(self, dir=None, legacy=False, **kw):
        """Starts kdp-test-kubelet on dir (default: the test's dir); waits for ready."""
        kl = Kubelet(self.bin_dir, dir or self.dir, legacy=legacy, **kw)
        self.procs.append(kl)
        kl.start(timeout=T)
        return kl

    def plugin(self, exe, args, socket, resources, name=None, dir=None, env=None):
        """Starts a plugin binary (no wait)."""
        dir = dir or self.dir
        argv = [binary(exe, self.bin_dir)] + list(args)
        p = PluginProc(argv, name or exe, dir, socket, resources, env=env)
        self.procs.append(p)
        p.start()
        return p

    def start_test_plugin(self, *args, resources=("kdp.test/dev",), dir=None, name=None):
        """kdp-test-plugin on dir (default the test's) with --resource for each
        of resources, plus args."""
        dir = dir or self.dir
        argv = ["--device-plugin-dir", dir]
        for r in resources:
            argv += ["--resource", r]
        argv += list(args)
        return self.plugin("kdp-test-plugin", argv, socket_for(resources[0]), resources,
                           name=name or "test-plugin", dir=dir)

    def gopher(self, devices_dir, resource="example.com/gopher"):
        return self.plugin("kdp-example-gopher",
                           ["--device-plugin-dir", self.dir, "--devices-dir", devices_dir,
                            "--resource", resource], "gopher.sock", [resource], name="gopher")

    def superdisk(self, devices_dir, resource="example.com/superdisk"):
        return self.plugin("kdp-example-superdisk",
                           ["--device-plugin-dir", self.dir, "--devices-dir", devices_dir,
                            "--resource", resource], "superdisk.sock", [resource],
                           name="superdisk")

    def simple(self, count, resource="example.com/simple"):
        return self.plugin("kdp-example-simple",
                           ["--device-plugin-dir", self.dir, "--count", str(count),
                            "--resource", resource], "simple.sock", [resource], name="simple")

    # -- assertions --------------------------------------------------------

    def assertOk(self, reply):
        self.assertTrue(reply.get("ok"), "RPC failed: %s" % reply)
        return reply["response"]

    def assertFailed(self, reply, code, *needles):
        self.assertFalse(reply.get("ok"), "RPC succeeded, expected %s: %s" % (code, reply))
        self.assertEqual(reply.get("code"), code, reply)
        for n in needles:
            self.assertIn(n, reply.get("message", ""), reply)

    def assertStopsCleanly(self, p, timeout=T):
        """SIGTERM (via stop()): exit code 0."""
        rc = p.stop(timeout)
        self.assertEqual(rc, 0, "%s exited with %s after SIGTERM%s" % (p.name, rc, p.diagnostics()))
        return rc
