"""Real plugin processes (kdp's examples, kdp-test-plugin, kdp-generic)
against the kubelet emulator: the base of the integration, robustness and
kdp-generic tests.

    class MyTest(PluginTest):
        def test_x(self):
            kl = self.kubelet()                               # emulator on self.dir
            pl = self.start_test_plugin("--devices", "a,b")   # kdp-test-plugin on self.dir
            kl.wait_event("registered", T, resource=pl.resources[0])
            pl.wait_log(r"registered with the kubelet", T)
            self.assertStopsCleanly(pl)                       # SIGTERM -> exit 0

self.dir is the device-plugin directory: the test's own files go in
subdirectories (self.file(), self.subdir()). Every process is stopped when
the test ends, plugins before the kubelet (ProcTest).
"""

import os

from .kubelet import Kubelet
from .proc import T, Proc, ProcTest, binary


def socket_for(resource):
    """kdp-test-plugin's socket name for a resource (see tests/plugin/test_plugin.c)."""
    return "".join(c if (c.islower() or c.isdigit()) and c.isascii() else "-"
                   for c in resource) + ".sock"


def env_name_for(resource):
    """kdp's default env var of the default allocation (kdp.h, kdp_config.env_name)."""
    return "KDP_DEVICES_" + "".join(c.upper() if c.isalnum() and c.isascii() else "_"
                                    for c in resource)


class PluginProc(Proc):
    """A plugin process serving `socket` (a name in `dir`, or None) for
    `resources`. Its stderr is kdp's log (wait_log()); kdp-test-plugin
    acknowledges each stdin command on stdout (`command "LINE" on RES: rc`):
    command() sends one and returns {resource: rc}."""

    def __init__(self, argv, name, dir, socket, resources, env=None):
        super().__init__(argv, name=name, env=env)
        self.dir = dir
        self.socket_name = socket
        self.socket = os.path.join(dir, socket) if socket else None
        self.lock = self.socket + ".lock" if socket else None
        self.resources = list(resources)

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


class PluginTest(ProcTest):
    """ProcTest with the kubelet emulator and plugin processes on self.dir."""

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
        return self.start_proc(Kubelet(dir or self.dir, legacy=legacy, **kw))

    def plugin(self, exe, args, socket, resources, name=None, dir=None, env=None):
        """Starts the plugin binary exe (no wait)."""
        argv = [binary(exe)] + list(args)
        return self.start_proc(PluginProc(argv, name or exe, dir or self.dir, socket, resources,
                                          env=env))

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
        """The emulator's reply succeeded; returns its response."""
        self.assertTrue(reply.get("ok"), "RPC failed: %s" % reply)
        return reply["response"]

    def assertFailed(self, reply, code, *needles):
        """The emulator's reply failed with code, its message holding every needle."""
        self.assertFalse(reply.get("ok"), "RPC succeeded, expected %s: %s" % (code, reply))
        self.assertEqual(reply.get("code"), code, reply)
        for n in needles:
            self.assertIn(n, reply.get("message", ""), reply)

    def assertStopsCleanly(self, p, timeout=T):
        """SIGTERM (via stop()): exit code 0."""
        rc = p.stop(timeout)
        self.assertEqual(rc, 0, "%s exited with %s after SIGTERM%s" % (p.name, rc, p.diagnostics()))
        return rc
