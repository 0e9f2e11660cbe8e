"""kdpctl against real plugins (kdp's examples, kdp-test-plugin, and
kdp-go-testplugin, a grpc-go peer): the base of tests/kdpctl.

    class T(KdpctlTest):
        def test_x(self):
            kl = self.kubelet()                     # kdpctl kubelet --json on self.dp
            self.gopher("g1", "g2")                 # kdp-example-gopher
            kl.wait_event("registered", resource="example.com/gopher")
            r = self.kdpctl("list", "gopher.sock")  # CompletedProcess, bounded
            self.assertEqual(r.returncode, 0, r)

self.dp is the device-plugin dir (self.dir/dp; $KDP_DEVICE_PLUGIN_DIR of
every process the test starts); the test's own files go in self.dir.
self.root is a kubelet root for the plugin-watcher tests (created by
whoever uses it first), self.reg its plugins_registry.
"""

import json
import os
import socket
import time

from .proc import T, Proc, ProcTest, binary, run, sanitizer_report


def socket_accepts(path):
    """The unix socket at path is listening (its file appears at bind(),
    before listen())."""
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


class KdpctlTest(ProcTest):
    """ProcTest with kdpctl, its kubelet and plugins on self.dp."""

    TEST_BOUND = 90.0

    def setUp(self):
        super().setUp()
        self.dp = os.path.join(self.dir, "dp")
        os.mkdir(self.dp)
        self.root = os.path.join(self.dir, "root")
        self.reg = os.path.join(self.root, "plugins_registry")

    def env(self, **extra):
        env = dict(os.environ)
        env["KDP_DEVICE_PLUGIN_DIR"] = self.dp
        env.update(extra)
        return env

    def start(self, argv, name, stdin=False, env=None):
        """Starts argv (no wait), to be stopped when the test ends."""
        return self.start_proc(Proc(argv, name, env=env or self.env(), stdin=stdin))

    # -- kdpctl --------------------------------------------------------------

    def kdpctl(self, *args, timeout=T, env=None, exe=None, **kw):
        """Runs kdpctl (or the copy exe) to completion (bounded); returns the
        CompletedProcess (text). Fails the test on a sanitizer report or a hang."""
        r = run([exe or binary("kdpctl")] + list(args), timeout, env=env or self.env(), **kw)
        if sanitizer_report(r.stderr):
            self.fail("sanitizer report from kdpctl %s:\n%s" % (" ".join(args), r.stderr))
        return r

    def ok(self, *args, **kw):
        """kdpctl() that must exit 0."""
        r = self.kdpctl(*args, **kw)
        self.assertEqual(r.returncode, 0, "kdpctl %s: %r" % (" ".join(args), r))
        return r

    def json_lines(self, r):
        return [json.loads(line) for line in r.stdout.splitlines() if line.strip()]

    def kubelet(self, *args, json_out=True, wait=True):
        """`kdpctl kubelet` on self.dp; waits until it listens (wait)."""
        argv = [binary("kdpctl"), "kubelet", "--device-plugin-dir", self.dp] + list(args)
        if json_out:
            argv.append("--json")
        p = Proc(argv, "kdpctl-kubelet", env=self.env(), stdin=False)
        p.stop_last = True
        self.start_proc(p)
        if wait:
            if json_out:
                p.wait_event("ready", since=0)
            else:
                p.wait_line(r"kubelet: listening on", since=0)
        return p

    # -- plugins ---------------------------------------------------------------

    def wait_socket(self, name, proc=None, timeout=T):
        """self.dp/name once it listens (AssertionError if proc exits first)."""
        path = os.path.join(self.dp, name)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if os.path.exists(path) and socket_accepts(path):
                return path
            if proc is not None and not proc.alive():
                break
            time.sleep(0.02)
        raise AssertionError("no socket %s within %.0f s%s"
                             % (path, timeout, proc.diagnostics() if proc else ""))

    def gopher(self, *devices):
        """kdp-example-gopher with a device file per name, in self.dir/gophers."""
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
        """kdp-example-superdisk with a 512-byte image per name, in self.dir/disks."""
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

    # -- plugins registering through the plugin watcher -----------------------

    def wait_reg_socket(self, name, proc):
        """self.reg/name once it listens (AssertionError if proc exits first)."""
        path = os.path.join(self.reg, name)
        deadline = time.monotonic() + T
        while time.monotonic() < deadline:
            if os.path.exists(path) and socket_accepts(path):
                return path
            if not proc.alive():
                break
            time.sleep(0.02)
        raise AssertionError("no socket %s%s" % (path, proc.diagnostics()))

    def gowatch(self, *args, reg_socket="tp-reg.sock", resource="example.com/dev"):
        """kdp-go-testplugin in watcher mode (-registry self.reg, which must
        exist): events get_info, notify; stdin "unlink", "relisten", "set ID
        HEALTH"."""
        p = self.start([binary("kdp-go-testplugin"), "-registry", self.reg,
                        "-reg-socket", reg_socket, "-resource", resource] + list(args),
                       "go-watch:" + reg_socket, stdin=True)
        p.wait_event("serving")
        return p

    def kdp_watch_plugin(self, *args, socket="kt.sock", resource="example.com/x"):
        """kdp-test-plugin registering through the plugin watcher (its
        socket: self.reg/socket)."""
        p = self.start([binary("kdp-test-plugin"), "--kubelet-root", self.root,
                        "--registration", "watcher", "--socket", socket,
                        "--resource", resource] + list(args), "test-plugin:" + socket)
        self.wait_reg_socket(socket, p)
        return p

    def gopher_watch(self, *devices):
        """kdp-example-gopher in watcher mode (self.reg/gopher.sock)."""
        gdir = os.path.join(self.dir, "gophers")
        os.makedirs(gdir, exist_ok=True)
        for d in devices:
            with open(os.path.join(gdir, d), "w") as f:
                f.write("gopher\n")
        p = self.start([binary("kdp-example-gopher"), "--devices-dir", gdir,
                        "--kubelet-root", self.root, "--registration", "watcher"], "gopher")
        p.devices_dir = gdir
        self.wait_reg_socket("gopher.sock", p)
        return p
