"""Helpers for kdpctl's tests: kdpctl against real plugins (kdp's examples,
kdp-test-plugin, and kdp-go-testplugin, a grpc-go peer). Python 3 stdlib
only; run with /usr/bin/python3.

    class T(harness.Base):
        def test_x(self):
            kl = self.kubelet()                     # kdpctl kubelet --json on self.dp
            self.gopher("g1", "g2")                 # kdp-example-gopher
            kl.wait_event("registered", resource="example.com/gopher")
            r = self.kdpctl("list", "gopher.sock")  # CompletedProcess, bounded
            self.assertEqual(r.returncode, 0, r)

Each test gets a fresh directory (mkdtemp under /tmp with a short name: unix
socket paths must stay under 107 bytes) holding the device-plugin dir
(self.dp). Every process a test starts is stopped when it ends, pass or fail
(SIGTERM, then SIGKILL of its process group), and its stderr is checked for
sanitizer reports. Every wait is bounded, and a per-test watchdog kills every
process past TEST_BOUND so that no wait can hang.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest

# REPO and bin_dir are re-exported for the tests.
from kdptest.proc import REPO, bin_dir, binary, log, sanitizer_report  # noqa: F401

T = 10.0            # bound of one wait
TEST_BOUND = 90.0   # bound of one test


class Proc:
    """A background process in its own process group. Stdout lines are kept
    (and parsed as JSON objects when they are), stderr too; both are read by
    threads, so waits never block on a full pipe."""

    def __init__(self, argv, name, env=None, stdin=False):
        self.argv = [str(a) for a in argv]
        self.name = name
        self.env = env
        self.want_stdin = stdin
        self.proc = None
        self.out = []
        self.err = []
        self.cond = threading.Condition()
        self.eof = False

    def start(self):
        log("+ " + " ".join(self.argv))
        self.proc = subprocess.Popen(
            self.argv, stdin=subprocess.PIPE if self.want_stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
            env=self.env)
        for stream, sink in ((self.proc.stdout, self.out), (self.proc.stderr, self.err)):
            t = threading.Thread(target=self._read, args=(stream, sink), daemon=True)
            t.start()
        return self

    def _read(self, stream, sink):
        for raw in stream:
            with self.cond:
                sink.append(raw.decode("utf-8", errors="replace").rstrip("\n"))
                self.cond.notify_all()
        with self.cond:
            if sink is self.out:
                self.eof = True
            self.cond.notify_all()

    def write(self, line):
        self.proc.stdin.write((line + "\n").encode())
        self.proc.stdin.flush()

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig):
        if self.alive():
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass

    def stop(self, timeout=T):
        """SIGTERM, a bounded wait, then SIGKILL of the group. Returns the
        exit code (negative: killed by that signal). Idempotent."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                log("%s: no exit %.0f s after SIGTERM: SIGKILL" % (self.name, timeout))
                self.signal(signal.SIGKILL)
                self.proc.wait(timeout)
        self.wait_eof(2.0)
        return self.proc.returncode

    def wait_exit(self, timeout=T):
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError("%s did not exit within %.1f s%s"
                                 % (self.name, timeout, self.diagnostics()))

    def wait_eof(self, timeout):
        deadline = time.monotonic() + timeout
        with self.cond:
            while not self.eof and time.monotonic() < deadline:
                self.cond.wait(0.05)

    def mark(self):
        with self.cond:
            return len(self.out)

    def events(self, since=0):
        evs = []
        with self.cond:
            lines = list(self.out[since:])
        for line in lines:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if isinstance(ev, dict):
                evs.append(ev)
        return evs

    def _wait(self, match, timeout, since, what):
        deadline = time.monotonic() + timeout
        with self.cond:
            i = since
            while True:
                while i < len(self.out):
                    found = match(self.out[i])
                    i += 1
                    if found is not None:
                        return found
                left = deadline - time.monotonic()
                if left <= 0 or (self.eof and i >= len(self.out)):
                    break
                self.cond.wait(min(left, 0.1))
        raise AssertionError("%s: no %s within %.1f s%s"
                             % (self.name, what, timeout, self.diagnostics()))

    def wait_line(self, pattern, timeout=T, since=0):
        rx = re.compile(pattern)
        return self._wait(lambda line: line if rx.search(line) else None, timeout, since,
                          "line matching %r" % pattern)

    def wait_event(self, name, timeout=T, since=0, **fields):
        def match(line):
            try:
                ev = json.loads(line)
            except ValueError:
                return None
            if not isinstance(ev, dict) or ev.get("event") != name:
                return None
            return ev if all(ev.get(k) == v for k, v in fields.items()) else None
        return self._wait(match, timeout, since, "event %s %s" % (name, fields or ""))

    def stderr_text(self):
        with self.cond:
            return "\n".join(self.err)

    def diagnostics(self):
        with self.cond:
            out = self.out[-25:]
            err = self.err[-25:]
        return ("\n--- %s stdout (last lines) ---\n%s\n--- %s stderr (last lines) ---\n%s"
                % (self.name, "\n".join(out), self.name, "\n".join(err)))


class Base(unittest.TestCase):
    """A test with its own directory, processes and watchdog."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="kc-", dir="/tmp")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.dp = os.path.join(self.dir, "dp")
        os.mkdir(self.dp)
        self.procs = []
        self.watchdog = threading.Timer(TEST_BOUND, self._overrun)
        self.watchdog.daemon = True
        self.watchdog.start()
        self.addCleanup(self.watchdog.cancel)

    def _overrun(self):
        log("*** WATCHDOG: %s exceeded %.0f s: killing its processes" % (self.id(), TEST_BOUND))
        for p in self.procs:
            p.signal(signal.SIGKILL)

    def env(self, **extra):
        env = dict(os.environ)
        env["KDP_DEVICE_PLUGIN_DIR"] = self.dp
        env.update(extra)
        return env

    def start(self, argv, name, stdin=False, env=None):
        p = Proc(argv, name, env=env or self.env(), stdin=stdin)
        self.procs.append(p)
        self.addCleanup(self._finish, p)
        return p.start()

    def _finish(self, p):
        p.stop()
        if sanitizer_report(p.stderr_text()):
            self.fail("sanitizer report from %s:\n%s" % (p.name, p.stderr_text()))

    # -- kdpctl --------------------------------------------------------------

    def kdpctl(self, *args, timeout=T, env=None, exe=None, **kw):
        """Runs kdpctl (or the copy exe) to completion (bounded); returns the
        CompletedProcess (text). Fails the test on a sanitizer report or a hang."""
        argv = [exe or binary("kdpctl")] + [str(a) for a in args]
        log("+ " + " ".join(argv))
        try:
            r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                               timeout=timeout, env=env or self.env(), **kw)
        except subprocess.TimeoutExpired as e:
            raise AssertionError("kdpctl %s: no exit within %.0f s (stdout %r, stderr %r)"
                                 % (" ".join(args), timeout, e.stdout, e.stderr))
        if sanitizer_report(r.stderr):
            self.fail("sanitizer report from kdpctl %s:\n%s" % (" ".join(args), r.stderr))
        return r

    def ok(self, *args, **kw):
        r = self.kdpctl(*args, **kw)
        self.assertEqual(r.returncode, 0, "kdpctl %s: %r" % (" ".join(args), r))
        return r

    def json_lines(self, r):
        return [json.loads(line) for line in r.stdout.splitlines() if line.strip()]

    def kubelet(self, *args, json_out=True, wait=True):
        argv = [binary("kdpctl"), "kubelet", "--device-plugin-dir", self.dp] + list(args)
        if json_out:
            argv.append("--json")
        p = self.start(argv, "kdpctl-kubelet")
        if wait:
            if json_out:
                p.wait_event("ready")
            else:
                p.wait_line(r"kubelet: listening on")
        return p

    # -- plugins ---------------------------------------------------------------

    def wait_socket(self, name, proc=None, timeout=T):
        path = os.path.join(self.dp, name)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if os.path.exists(path) and self._accepts(path):
                return path
            if proc is not None and not proc.alive():
                break
            time.sleep(0.02)
        raise AssertionError("no socket %s within %.0f s%s"
                             % (path, timeout, proc.diagnostics() if proc else ""))

    @staticmethod
    def _accepts(path):
        """The socket is listening (the file appears at bind(), before listen())."""
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect(path)
            return True
        except OSError:
            return False
        finally:
            s.close()

    def gopher(self, *devices):
        gdir = os.path.join(self.dir, "gophers")
        os.makedirs(gdir, exist_ok=True)
        for d in devices:
            with open(os.path.join(gdir, d), "w") as f:
                f.write("gopher\n")
        p = self.start([binary("kdp-example-gopher"), "--devices-dir", gdir,
                        "--device-plugin-dir", self.dp], "gopher")
        p.devices_dir = gdir
        self.wait_socket("gopher.sock", p)
        return p

    def superdisk(self, *images):
        ddir = os.path.join(self.dir, "disks")
        os.makedirs(ddir, exist_ok=True)
        for d in images:
            with open(os.path.join(ddir, d), "wb") as f:
                f.write(b"\0" * 512)
        p = self.start([binary("kdp-example-superdisk"), "--devices-dir", ddir,
                        "--device-plugin-dir", self.dp], "superdisk")
        p.devices_dir = ddir
        self.wait_socket("superdisk.sock", p)
        return p

    def simple(self, count=4):
        p = self.start([binary("kdp-example-simple"), "--count", str(count),
                        "--device-plugin-dir", self.dp], "simple")
        self.wait_socket("simple.sock", p)
        return p

    def knob_plugin(self, *args, socket="kt.sock", resource="example.com/x"):
        """kdp-test-plugin (tests/plugin/test_plugin.c): kdp with knobs
        (--slow-ms, --callback-timeout-ms, --die-id, --stop-id...). It serves
        its socket at once; with no kubelet it waits to register."""
        p = self.start([binary("kdp-test-plugin"), "--device-plugin-dir", self.dp,
                        "--socket", socket, "--resource", resource] + list(args),
                       "test-plugin:" + socket)
        self.wait_socket(socket, p)
        return p

    def goplugin(self, *args, socket="tp.sock", resource="example.com/dev"):
        """kdp-go-testplugin (grpc-go): stdin "set ID Healthy|Unhealthy";
        JSON events on stdout (serving, registered, register_failed...)."""
        p = self.start([binary("kdp-go-testplugin"), "-dir", self.dp, "-socket", socket,
                        "-resource", resource] + list(args), "go-plugin:" + socket, stdin=True)
        p.wait_event("serving")
        return p


def main():
    unittest.main(verbosity=2)
