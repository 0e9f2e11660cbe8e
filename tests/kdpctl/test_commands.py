#!/usr/bin/python3
"""kdpctl's commands against one plugin socket (options, list, watch,
allocate, preferred, prestart), end to end against kdp's examples
(kdp-example-gopher, -superdisk, -simple, kdp-test-plugin) and a grpc-go
plugin (kdp-go-testplugin): tables, --json, errors and their hints, usage.

usage: KDP_BIN_DIR=<build>/bin /usr/bin/python3 test_commands.py [-v] [Class.test ...]
"""

import json
import os
import pwd
import shutil
import signal
import socket
import sys
import time
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from kdptest import T, binary  # noqa: E402
from kdptest.kdpctl import KdpctlTest  # noqa: E402


class Gopher(KdpctlTest):
    """kdp-example-gopher: simple list + allocate op, no preferred/prestart."""

    def setUp(self):
        super().setUp()
        self.g = self.gopher("g1", "g2")

    def test_options_table_and_json(self):
        r = self.ok("options", "gopher.sock")
        self.assertRegex(r.stdout, r"pre_start_required\s+false")
        self.assertRegex(r.stdout, r"get_preferred_allocation_available\s+false")
        j = self.json_lines(self.ok("options", "gopher.sock", "--json"))
        self.assertEqual(j, [{"pre_start_required": False,
                              "get_preferred_allocation_available": False}])

    def test_list_table_and_json(self):
        r = self.ok("list", "gopher.sock")
        lines = r.stdout.splitlines()
        self.assertRegex(lines[0], r"^ID\s+HEALTH\s+NUMA$")
        self.assertRegex(lines[1], r"^g1\s+Healthy\s+-$")
        self.assertRegex(lines[2], r"^g2\s+Healthy\s+-$")
        self.assertEqual(lines[3], "2 devices: 2 healthy, 0 unhealthy")
        j = self.json_lines(self.ok("--json", "list", "gopher.sock"))
        self.assertEqual(len(j), 1)
        self.assertEqual(j[0]["n"], 2)
        self.assertEqual(j[0]["healthy"], 2)
        self.assertEqual([d["id"] for d in j[0]["devices"]], ["g1", "g2"])
        self.assertEqual(j[0]["devices"][0], {"id": "g1", "health": "Healthy", "numa": []})

    def test_socket_forms(self):
        """A name is looked up in --device-plugin-dir, else $KDP_DEVICE_PLUGIN_DIR;
        anything with a '/' is a path."""
        path = os.path.join(self.dp, "gopher.sock")
        for r in (self.ok("list", path, env=self.env(KDP_DEVICE_PLUGIN_DIR="/nonexistent")),
                  self.ok("list", "gopher.sock", "--device-plugin-dir", self.dp,
                          env=self.env(KDP_DEVICE_PLUGIN_DIR="/nonexistent")),
                  self.ok("list", "gopher.sock"),  # from the environment
                  self.ok("list", "./gopher.sock", cwd=self.dp)):
            # each one reached the gopher: its two devices
            self.assertRegex(r.stdout, r"\ng1\s+Healthy\s+-\ng2\s+Healthy\s+-\n")
            self.assertIn("2 devices: 2 healthy, 0 unhealthy", r.stdout)

    def test_watch_hotplug_and_health(self):
        w = self.start([binary("kdpctl"), "watch", "gopher.sock", "--json",
                        "--count", "4", "--timeout", "20s"], "watch")
        first = w.wait_event("devices", seq=1)
        self.assertEqual([c["change"] for c in first["changes"]], ["added", "added"])
        with open(os.path.join(self.g.devices_dir, "g3"), "w") as f:
            f.write("new\n")
        ev = w.wait_event("devices", seq=2)
        self.assertEqual(ev["changes"], [{"id": "g3", "change": "added", "health": "Healthy",
                                          "numa": []}])
        with open(os.path.join(self.g.devices_dir, "g1"), "w") as f:
            f.write("unhealthy\n")
        ev = w.wait_event("devices", seq=3)
        self.assertEqual(len(ev["changes"]), 1)
        ch = ev["changes"][0]
        self.assertEqual((ch["id"], ch["change"], ch["old_health"], ch["health"]),
                         ("g1", "changed", "Healthy", "Unhealthy"))
        self.assertEqual((ev["healthy"], ev["unhealthy"]), (2, 1))
        os.unlink(os.path.join(self.g.devices_dir, "g2"))
        ev = w.wait_event("devices", seq=4)
        self.assertEqual([(c["id"], c["change"]) for c in ev["changes"]], [("g2", "removed")])
        self.assertEqual(w.wait_exit(T), 0, w.diagnostics())

    def test_watch_human(self):
        w = self.start([binary("kdpctl"), "watch", "gopher.sock", "--count", "2"],
                       "watch")
        w.wait_line(r"#1 2 devices: 2 healthy, 0 unhealthy")
        w.wait_line(r"^\s+added\s+g1\s+Healthy$")
        with open(os.path.join(self.g.devices_dir, "g1"), "w") as f:
            f.write("unhealthy\n")
        w.wait_line(r"#2 2 devices: 1 healthy, 1 unhealthy")
        w.wait_line(r"^\s+health\s+g1\s+Healthy -> Unhealthy$")
        self.assertEqual(w.wait_exit(T), 0, w.diagnostics())

    def test_watch_timeout(self):
        """--timeout alone: watch for that long, exit 0; with --count not
        reached by then: DEADLINE_EXCEEDED, exit 1."""
        # 2 s: long enough for the first message on a loaded machine or
        # under a sanitizer (nothing else changes the devices meanwhile).
        t0 = time.monotonic()
        r = self.ok("watch", "gopher.sock", "--timeout", "2s")
        self.assertGreaterEqual(time.monotonic() - t0, 1.9)
        self.assertIn("added", r.stdout)
        r = self.kdpctl("watch", "gopher.sock", "--timeout", "2s", "--count", "3")
        self.assertEqual(r.returncode, 1, r)
        self.assertIn("DEADLINE_EXCEEDED", r.stderr)
        self.assertIn("1 of 3 ListAndWatch messages within 2s", r.stderr)
        self.assertIn("hint: kdpctl's --timeout fired: a plugin sends a new device list only "
                      "when its devices change", r.stderr)

    def test_watch_sigint_exits_0(self):
        w = self.start([binary("kdpctl"), "watch", "gopher.sock"], "watch")
        w.wait_line(r"#1 2 devices: 2 healthy, 0 unhealthy")
        w.signal(signal.SIGINT)
        self.assertEqual(w.wait_exit(T), 0, w.diagnostics())

    def test_allocate_one_container(self):
        r = self.ok("allocate", "gopher.sock", "g1", "g2")
        self.assertEqual(r.stdout.splitlines()[0], "container 1: g1, g2")
        self.assertRegex(r.stdout, r"\n\s+env\s+GOPHER=g1,g2\n")
        j = self.json_lines(self.ok("allocate", "gopher.sock", "g2", "--json"))
        self.assertEqual(j, [{"containers": [{
            "ids": ["g2"], "envs": {"GOPHER": "g2"}, "mounts": [], "devices": [],
            "annotations": {}, "cdi_devices": []}]}])

    def test_allocate_several_containers(self):
        j = self.json_lines(self.ok("allocate", "gopher.sock", "--container", "g1,g2",
                                    "--container", "g2", "--json"))
        cs = j[0]["containers"]
        self.assertEqual([c["ids"] for c in cs], [["g1", "g2"], ["g2"]])
        self.assertEqual([c["envs"]["GOPHER"] for c in cs], ["g1,g2", "g2"])
        r = self.ok("allocate", "gopher.sock", "--container=g1", "--container=g2")
        self.assertIn("container 1: g1\n", r.stdout)
        self.assertIn("container 2: g2\n", r.stdout)
        r = self.kdpctl("allocate", "gopher.sock", "g1", "--container", "g2")
        self.assertEqual(r.returncode, 2, r)

    def test_allocate_unknown_id(self):
        r = self.kdpctl("allocate", "gopher.sock", "g1", "nope")
        self.assertEqual(r.returncode, 1, r)
        self.assertIn("INVALID_ARGUMENT", r.stderr)
        self.assertIn('"nope"', r.stderr)
        self.assertIn("hint: `kdpctl list gopher.sock` shows", r.stderr)
        r = self.kdpctl("allocate", "gopher.sock", "nope", "--json")
        self.assertEqual(r.returncode, 1, r)
        err = self.json_lines(r)[0]
        self.assertEqual((err["error"], err["code"]), ("INVALID_ARGUMENT", 3))
        self.assertIn("nope", err["message"])

    def test_allocate_unhealthy_id(self):
        with open(os.path.join(self.g.devices_dir, "g2"), "w") as f:
            f.write("unhealthy\n")
        w = self.start([binary("kdpctl"), "watch", "gopher.sock", "--json"], "watch")
        deadline = time.monotonic() + T
        while time.monotonic() < deadline:
            if any(e.get("unhealthy") == 1 for e in w.events()):
                break
            time.sleep(0.05)
        r = self.kdpctl("allocate", "gopher.sock", "g2")
        self.assertEqual(r.returncode, 1, r)
        self.assertIn("INVALID_ARGUMENT", r.stderr)
        self.assertIn("Unhealthy", r.stderr)

    def test_preferred_unimplemented(self):
        r = self.kdpctl("preferred", "gopher.sock", "--available", "g1,g2", "--size", "1")
        self.assertEqual(r.returncode, 1, r)
        self.assertIn("UNIMPLEMENTED", r.stderr)
        self.assertIn("hint: the plugin does not offer preferred allocations "
                      "(get_preferred_allocation_available is false)", r.stderr)
        err = self.json_lines(self.kdpctl("preferred", "gopher.sock", "--available", "g1",
                                          "--size", "1", "--json"))[0]
        self.assertEqual(err["error"], "UNIMPLEMENTED")
        self.assertIn("get_preferred_allocation_available is false", err["hint"])

    def test_prestart_not_required(self):
        """kdp answers PreStartContainer OK without a prestart op (IDs checked)."""
        r = self.ok("prestart", "gopher.sock", "g1")
        self.assertIn("PreStartContainer OK for 1 device", r.stdout)
        self.assertEqual(self.json_lines(self.ok("prestart", "gopher.sock", "g1", "g2",
                                                 "--json")),
                         [{"ok": True, "ids": ["g1", "g2"]}])
        r = self.kdpctl("prestart", "gopher.sock", "zz")
        self.assertEqual(r.returncode, 1, r)
        self.assertIn("INVALID_ARGUMENT", r.stderr)


class Superdisk(KdpctlTest):
    """kdp-example-superdisk: flexible mode with prestart and preferred."""

    def setUp(self):
        super().setUp()
        self.s = self.superdisk("b.img", "a.img", "c.img")

    def test_options(self):
        self.assertEqual(self.json_lines(self.ok("options", "superdisk.sock", "--json")),
                         [{"pre_start_required": True,
                           "get_preferred_allocation_available": True}])

    def test_preferred(self):
        r = self.ok("preferred", "superdisk.sock", "--available", "c.img,b.img,a.img",
                    "--size", "2")
        self.assertEqual(r.stdout, "preferred: a.img, b.img\n")
        j = self.json_lines(self.ok("preferred", "superdisk.sock", "--available",
                                    "c.img,b.img,a.img", "--must-include", "c.img",
                                    "--size", "2", "--json"))
        self.assertEqual(j, [{"preferred": ["c.img", "a.img"]}])

    def test_prestart_formats(self):
        r = self.ok("prestart", "superdisk.sock", "a.img", "c.img")
        self.assertIn("PreStartContainer OK for 2 devices", r.stdout)
        for name in ("a.img", "c.img"):
            with open(os.path.join(self.s.devices_dir, name), "rb") as f:
                self.assertTrue(f.read(64).startswith(b"SUPERDISK v1 formatted " +
                                                      name.encode()))

    def test_allocate_mounts(self):
        r = self.ok("allocate", "superdisk.sock", "a.img")
        host = os.path.join(self.s.devices_dir, "a.img")
        self.assertRegex(r.stdout, r"\n\s+env\s+SUPERDISK_MOUNT=/superdisk\n")
        self.assertRegex(r.stdout, r"\n\s+mount\s+/superdisk/a.img <- %s \(rw\)\n" % host)
        c = self.json_lines(self.ok("allocate", "superdisk.sock", "a.img", "b.img",
                                    "--json"))[0]["containers"][0]
        self.assertEqual(c["mounts"][0], {"container_path": "/superdisk/a.img",
                                          "host_path": host, "read_only": False})
        self.assertEqual(len(c["mounts"]), 2)


class Simple(KdpctlTest):
    """kdp-example-simple: simple mode, the default allocation."""

    def test_list_and_default_allocate(self):
        self.simple(3)
        r = self.ok("list", "simple.sock")
        self.assertIn("3 devices: 3 healthy, 0 unhealthy", r.stdout)
        for i in range(3):
            self.assertRegex(r.stdout, r"\ndev-%d\s+Healthy\s+-\n" % i)
        j = self.json_lines(self.ok("allocate", "simple.sock", "dev-0", "dev-2", "--json"))
        self.assertEqual(j[0]["containers"][0]["envs"],
                         {"KDP_DEVICES_EXAMPLE_COM_SIMPLE": "dev-0,dev-2"})


class GoPlugin(KdpctlTest):
    """kdp-go-testplugin (grpc-go): every field of a response, and IDs that
    need escaping."""

    def setUp(self):
        super().setUp()
        self.p = self.goplugin("-devices", 'd0,q"x,b\\y', "-unhealthy", "u1", "-numa", "1",
                               "-preferred", "-prestart")

    def test_options(self):
        self.assertEqual(self.json_lines(self.ok("options", "tp.sock", "--json")),
                         [{"pre_start_required": True,
                           "get_preferred_allocation_available": True}])

    def test_list(self):
        r = self.ok("list", "tp.sock")
        self.assertRegex(r.stdout, r"\nu1\s+Unhealthy\s+1\n")
        self.assertRegex(r.stdout, r'\nq"x\s+Healthy\s+1\n')
        self.assertIn("4 devices: 3 healthy, 1 unhealthy", r.stdout)
        j = self.json_lines(self.ok("list", "tp.sock", "--json"))[0]
        self.assertEqual(sorted(d["id"] for d in j["devices"]), ['b\\y', "d0", 'q"x', "u1"])
        self.assertTrue(all(d["numa"] == [1] for d in j["devices"]))

    def test_allocate_every_field(self):
        r = self.ok("allocate", "tp.sock", "d0", 'q"x')
        for want in ('env         TESTPLUGIN_DEVICES=d0,q"x',
                     "mount       /dev/testplugin <- /dev/null (ro)",
                     "device      /dev/tp0 <- /dev/null (rw)",
                     "annotation  example.com/testplugin=1",
                     'cdi         example.com/dev=d0_q"x'):
            self.assertIn(want, r.stdout)
        c = self.json_lines(self.ok("allocate", "tp.sock", "--container", "d0",
                                    "--container", 'b\\y', "--json"))[0]["containers"]
        self.assertEqual(c[1], {
            "ids": ["b\\y"], "envs": {"TESTPLUGIN_DEVICES": "b\\y"},
            "mounts": [{"container_path": "/dev/testplugin", "host_path": "/dev/null",
                        "read_only": True}],
            "devices": [{"container_path": "/dev/tp0", "host_path": "/dev/null",
                         "permissions": "rw"}],
            "annotations": {"example.com/testplugin": "1"},
            "cdi_devices": ["example.com/dev=b\\y"]})
        r = self.kdpctl("allocate", "tp.sock", "zz")
        self.assertEqual(r.returncode, 1)
        self.assertIn('INVALID_ARGUMENT: unknown device "zz"', r.stderr)

    def test_preferred_and_prestart(self):
        j = self.json_lines(self.ok("preferred", "tp.sock", "--available", "d0,u1",
                                    "--must-include", "u1", "--size", "2", "--json"))
        self.assertEqual(j, [{"preferred": ["u1", "d0"]}])
        self.ok("prestart", "tp.sock", "d0")
        self.p.wait_event("prestart", ids=["d0"])


class Errors(KdpctlTest):
    def test_no_such_socket(self):
        r = self.kdpctl("list", "nope.sock")
        self.assertEqual(r.returncode, 1, r)
        self.assertIn("UNAVAILABLE", r.stderr)
        self.assertIn("hint: no such socket: is the plugin running? dir is %s" % self.dp,
                      r.stderr)
        for cmd in (["options"], ["allocate", "x"], ["prestart", "x"],
                    ["preferred", "--available", "x", "--size", "1"], ["watch"]):
            r = self.kdpctl(cmd[0], "nope.sock", *cmd[1:], "--json")
            self.assertEqual(r.returncode, 1, r)
            err = self.json_lines(r)[0]
            self.assertEqual(err["error"], "UNAVAILABLE", r)
            self.assertIn("no such socket", err["hint"])

    def test_nothing_listening(self):
        path = os.path.join(self.dp, "stale.sock")
        s = socket.socket(socket.AF_UNIX)
        s.bind(path)  # bound, never listening: what a crashed plugin leaves
        self.addCleanup(s.close)
        r = self.kdpctl("options", "stale.sock")
        self.assertEqual(r.returncode, 1, r)
        self.assertIn("hint: nothing listens on %s" % path, r.stderr)

    def test_not_a_socket(self):
        with open(os.path.join(self.dp, "file.sock"), "w"):
            pass
        r = self.kdpctl("options", "file.sock")
        self.assertEqual(r.returncode, 1, r)
        self.assertIn("is not a unix socket", r.stderr)

    @unittest.skipUnless(os.geteuid() == 0, "needs root to run kdpctl as another user")
    def test_permission_denied(self):
        self.gopher("g1")
        os.chmod(self.dir, 0o755)
        os.chmod(self.dp, 0o755)
        nobody = pwd.getpwnam("nobody")
        # A copy nobody can execute: the build tree may sit under a 0700
        # directory (a clone in `mktemp -d`).
        exe = os.path.join(self.dir, "kdpctl")
        shutil.copy(binary("kdpctl"), exe)
        os.chmod(exe, 0o755)

        def drop():
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
        r = self.kdpctl("options", "gopher.sock", preexec_fn=drop, exe=exe)
        self.assertEqual(r.returncode, 1, r)
        self.assertIn("hint: permission denied: run as root or check the socket's owner",
                      r.stderr)

    def test_deadline(self):
        """A socket that accepts and never answers: DEADLINE_EXCEEDED at
        --timeout, kdpctl's own (for a call and for the first device list)."""
        path = os.path.join(self.dp, "mute.sock")
        s = socket.socket(socket.AF_UNIX)
        s.bind(path)
        s.listen(4)
        self.addCleanup(s.close)
        t0 = time.monotonic()
        r = self.kdpctl("options", "mute.sock", "--timeout", "300ms")
        self.assertLess(time.monotonic() - t0, 5)
        self.assertEqual(r.returncode, 1, r)
        self.assertIn("DEADLINE_EXCEEDED", r.stderr)
        self.assertIn("hint: no answer within 300ms (kdpctl's --timeout): the socket took the "
                      "connection but nothing answered", r.stderr)
        r = self.kdpctl("list", "mute.sock", "--timeout", "300ms")
        self.assertEqual(r.returncode, 1, r)
        self.assertIn("DEADLINE_EXCEEDED: 0 of 1 ListAndWatch message within 300ms", r.stderr)
        self.assertIn("hint: kdpctl's --timeout fired before the plugin sent a device list",
                      r.stderr)

    def test_usage(self):
        """Exit 2 and a line saying what is wrong with the command line."""
        for args, says in (
                ([], "usage: kdpctl "),
                (["frob"], 'kdpctl: unknown command "frob"'),
                (["list"], "kdpctl list: missing arguments"),
                (["list", "a", "b"], 'kdpctl list: unexpected argument "b"'),
                (["list", "x", "--timeout", "5"], "kdpctl list: --timeout wants a duration"),
                (["options", "x", "--count", "2"], "--count is not an option of this command"),
                (["preferred", "x", "--available", "a"], "kdpctl preferred: --size N is required"),
                (["preferred", "x", "--size", "1"], "--available ID,ID... is required"),
                (["watch", "x", "--count", "0"], '--count wants a number >= 1, not "0"'),
                (["allocate", "x"], "kdpctl allocate: no device IDs"),
                (["list", "x", "--bogus"], "kdpctl list: unknown option --bogus"),
                (["help", "frob"], "kdpctl: no such command: frob")):
            r = self.kdpctl(*args)
            self.assertEqual(r.returncode, 2, "%s: %r" % (args, r))
            self.assertIn(says, r.stderr, args)

    def test_help(self):
        r = self.ok("--help")
        for cmd in ("kubelet", "options", "list", "watch", "allocate", "preferred", "prestart"):
            self.assertIn("  %s " % cmd, r.stdout)
            for args in ([cmd, "--help"], [cmd, "-h"], ["help", cmd]):
                h = self.ok(*args)
                self.assertTrue(h.stdout.startswith("usage: kdpctl %s" % cmd), h.stdout)
        self.assertIn("--container", self.ok("help", "allocate").stdout)
        self.assertIn("SIGHUP", self.ok("help", "kubelet").stdout)
        self.assertRegex(self.ok("--version").stdout, r"^kdpctl \(kdp\) \d+\.\d+\.\d+\n$")


class Hints(KdpctlTest):
    """Each failure's hint says what really happened, against real plugin
    processes: whose deadline fired, a plugin that died or was stopped in the
    middle of a call, a directory or socket that is not there, a socket that
    is not a plugin's, a full listen queue, a limit of the plugin's own."""

    def err(self, r):
        """The JSON error line of a failed `kdpctl --json` run."""
        self.assertEqual(r.returncode, 1, r)
        return self.json_lines(r)[-1]

    def wait_stderr(self, proc, text):
        deadline = time.monotonic() + T
        while text not in proc.log_text() and time.monotonic() < deadline:
            time.sleep(0.02)
        return proc.log_text()

    def test_plugin_callback_deadline_is_not_kdpctl_timeout(self):
        """The plugin's own callback deadline (200 ms) fired, well before
        kdpctl's --timeout (10 s): the hint says so and names the callback;
        with a --timeout shorter than the plugin's, kdpctl's own fires."""
        self.knob_plugin("--devices", "a,slow", "--slow-ms", "3000",
                        "--callback-timeout-ms", "200")
        t0 = time.monotonic()
        r = self.kdpctl("allocate", "kt.sock", "slow")
        self.assertLess(time.monotonic() - t0, 5)
        self.assertEqual(r.returncode, 1, r)
        self.assertIn("DEADLINE_EXCEEDED: example.com/x: the allocate callback did not return "
                      "within 200 ms", r.stderr)
        self.assertIn("hint: the plugin's own callback deadline (200 ms) fired, not kdpctl's "
                      "--timeout (10s): example.com/x's allocate callback is slow or hung",
                      r.stderr)
        self.assertNotIn("no answer within", r.stderr)
        err = self.err(self.kdpctl("allocate", "kt.sock", "slow", "--timeout", "100ms",
                                   "--json"))
        self.assertEqual(err["error"], "DEADLINE_EXCEEDED")
        self.assertTrue(err["hint"].startswith("no answer within 100ms (kdpctl's --timeout"),
                        err)

    def test_plugin_died_mid_call(self):
        """The plugin process dies (SIGKILL) while it runs the allocate
        callback: the connection was lost mid-call, not a missing socket; the
        next call finds the stale socket it left."""
        p = self.knob_plugin("--devices", "a,boom", "--die-id", "boom")
        path = os.path.join(self.dp, "kt.sock")
        r = self.kdpctl("allocate", "kt.sock", "boom")
        self.assertEqual(r.returncode, 1, r)
        self.assertIn("UNAVAILABLE: connection closed before the response", r.stderr)
        self.assertIn("hint: the connection was lost mid-call and nothing listens on %s any "
                      "more: the plugin process exited or crashed during the call; check its "
                      "logs" % path, r.stderr)
        self.assertEqual(p.wait_exit(T), -signal.SIGKILL)
        r = self.kdpctl("options", "kt.sock")
        self.assertEqual(r.returncode, 1, r)
        self.assertIn("UNAVAILABLE: connect %s: Connection refused" % path, r.stderr)
        self.assertIn("hint: nothing listens on %s: the plugin has exited and left its socket "
                      "behind" % path, r.stderr)

    def test_plugin_stopped_mid_call(self):
        """The plugin is stopped (as by SIGTERM) during the call: it answers
        UNAVAILABLE itself and removes its socket; not "no such socket"."""
        p = self.knob_plugin("--devices", "a,halt", "--stop-id", "halt", "--slow-ms", "300")
        r = self.kdpctl("allocate", "kt.sock", "halt")
        self.assertEqual(r.returncode, 1, r)
        self.assertIn("UNAVAILABLE: server is shutting down", r.stderr)
        self.assertIn("hint: the plugin answered UNAVAILABLE itself and its socket is gone now: "
                      "it was stopping (SIGTERM?) during the call; check its logs", r.stderr)
        self.assertNotIn("no such socket", r.stderr)
        self.assertEqual(p.wait_exit(T), 0)

    def test_watch_plugin_killed(self):
        """The plugin killed under an open ListAndWatch: the stream's
        connection was lost, not a socket stale from the start."""
        p = self.knob_plugin("--devices", "a,b")
        path = os.path.join(self.dp, "kt.sock")
        w = self.start([binary("kdpctl"), "watch", "kt.sock", "--json"], "watch")
        w.wait_event("devices", seq=1)
        p.signal(signal.SIGKILL)
        self.assertEqual(w.wait_exit(T), 1, w.diagnostics())
        err = json.loads(w.wait_line(r'^\{"error":'))
        self.assertEqual(err["error"], "UNAVAILABLE")
        self.assertTrue(err["message"].startswith("the ListAndWatch stream ended after 1 message: "
                                                  "connection closed before the response"), err)
        self.assertEqual(err["hint"], "the connection was lost mid-call and nothing listens on "
                         "%s any more: the plugin process exited or crashed during the call; "
                         "check its logs" % path)
        self.assertIn("hint: the connection was lost mid-call", self.wait_stderr(w, "hint:"))

    def test_not_a_plugin_socket(self):
        """UNIMPLEMENTED for a method every plugin serves: the wrong socket."""
        self.kubelet()
        r = self.kdpctl("options", "kubelet.sock")
        self.assertEqual(r.returncode, 1, r)
        self.assertIn("UNIMPLEMENTED", r.stderr)
        self.assertIn("hint: kubelet.sock is the kubelet's own socket (Registration), not a "
                      "plugin's: give the plugin's socket", r.stderr)
        other = os.path.join(self.dp, "other.sock")
        os.link(os.path.join(self.dp, "kubelet.sock"), other)  # the same server, another name
        r = self.kdpctl("allocate", "other.sock", "x")
        self.assertEqual(r.returncode, 1, r)
        self.assertIn("hint: %s does not serve this v1beta1 DevicePlugin method, which every "
                      "device plugin serves" % other, r.stderr)

    def test_missing_dir_and_the_sockets_there(self):
        nodir = os.path.join(self.dir, "nodir")
        r = self.kdpctl("list", "x.sock", "--device-plugin-dir", nodir)
        self.assertEqual(r.returncode, 1, r)
        self.assertIn("hint: the directory %s does not exist: a wrong --device-plugin-dir or "
                      "$KDP_DEVICE_PLUGIN_DIR?" % nodir, r.stderr)
        s = socket.socket(socket.AF_UNIX)
        s.bind(os.path.join(self.dp, "gpu.sock"))
        self.addCleanup(s.close)
        r = self.kdpctl("list", "gpus.sock")
        self.assertEqual(r.returncode, 1, r)
        self.assertIn("hint: no such socket: is the plugin running? dir is %s; sockets there: "
                      "gpu.sock\n" % self.dp, r.stderr)

    def test_full_listen_queue(self):
        """A listener that never accepts, its queue full: a hint, not a hang
        (the probe behind the hint never blocks)."""
        path = os.path.join(self.dp, "busy.sock")
        s = socket.socket(socket.AF_UNIX)
        s.bind(path)
        s.listen(0)
        self.addCleanup(s.close)
        for _ in range(64):
            c = socket.socket(socket.AF_UNIX)
            c.setblocking(False)
            self.addCleanup(c.close)
            try:
                c.connect(path)
            except BlockingIOError:
                break
        else:
            self.fail("the listen queue of %s never filled" % path)
        r = self.kdpctl("options", "busy.sock")
        self.assertEqual(r.returncode, 1, r)
        self.assertIn("hint: the listen queue of %s is full: the plugin does not accept "
                      "connections" % path, r.stderr)

    def test_plugin_resource_limit_is_not_the_4mib_limit(self):
        """RESOURCE_EXHAUSTED from the plugin itself (kdp's cap of 64
        ListAndWatch streams) is not the kubelet's 4 MiB message limit."""
        self.knob_plugin("--devices", "a")
        watches = [self.start([binary("kdpctl"), "watch", "kt.sock", "--json"],
                              "watch%d" % i) for i in range(64)]
        for w in watches:
            w.wait_event("devices", seq=1)
        r = self.kdpctl("list", "kt.sock")
        self.assertEqual(r.returncode, 1, r)
        self.assertIn("RESOURCE_EXHAUSTED: example.com/x: too many ListAndWatch streams open",
                      r.stderr)
        self.assertIn("hint: the plugin refused the call itself for lack of a resource of its "
                      "own: its message says which", r.stderr)
        self.assertNotIn("4 MiB", r.stderr)


class Info(KdpctlTest):
    """kdpctl info: GetInfo on a plugin-watcher registration socket."""

    def setUp(self):
        super().setUp()
        os.makedirs(self.reg)

    def test_gopher_table_and_json(self):
        self.gopher_watch("g1")
        sock = os.path.join(self.reg, "gopher.sock")
        for r in (self.ok("info", sock),
                  self.ok("info", "gopher.sock", "--kubelet-root", self.root),
                  self.ok("info", "gopher.sock", "--plugins-registry", self.reg),
                  self.ok("info", "gopher.sock", env=self.env(KDP_KUBELET_ROOT=self.root))):
            self.assertEqual(r.stdout.splitlines(), [
                "type                DevicePlugin",
                "name                example.com/gopher",
                'endpoint            "" (this socket serves DevicePlugin too)',
                "supported_versions  v1beta1",
                "kubelet             accepts it"])
        j = self.json_lines(self.ok("info", sock, "--json"))
        self.assertEqual(j, [{"socket": sock, "type": "DevicePlugin",
                              "name": "example.com/gopher", "endpoint": "",
                              "supported_versions": ["v1beta1"], "kubelet_accepts": True}])

    def test_test_plugin(self):
        self.kdp_watch_plugin(resource="example.com/kt")
        j = self.json_lines(self.ok("info", "kt.sock", "--plugins-registry", self.reg, "--json"))
        self.assertEqual((j[0]["name"], j[0]["kubelet_accepts"]), ("example.com/kt", True))

    def test_go_plugin_endpoint_and_refusals(self):
        dps = os.path.join(self.dp, "ok.sock")
        self.gowatch("-dp-socket", dps, reg_socket="ok.sock")
        r = self.ok("info", os.path.join(self.reg, "ok.sock"))
        self.assertRegex(r.stdout, r"\nendpoint\s+%s\n" % dps)
        cases = [
            ("t1.sock", ["-info-type", "CSIPlugin"],
             "no handler registered for plugin type: CSIPlugin at socket",
             'only type "DevicePlugin" goes to the kubelet\'s device manager'),
            ("t2.sock", ["-info-versions", "v1alpha1,v1"],
             "manager version, v1beta1, is not among plugin supported versions [v1alpha1 v1]",
             'supported_versions must contain "v1beta1"'),
            ("t3.sock", ["-info-name", "bad"],
             'invalid name of device plugin socket: the ResourceName "bad" is invalid',
             "name must be an extended resource name"),
        ]
        for name, args, why, hint in cases:
            self.gowatch(*args, reg_socket=name)
            r = self.kdpctl("info", name, "--plugins-registry", self.reg)
            self.assertEqual(r.returncode, 1, r)
            self.assertIn("kubelet             refuses it", r.stdout)
            self.assertIn("kdpctl info: the kubelet refuses it: RegisterPlugin error -- ",
                          r.stderr)
            self.assertIn(why, r.stderr)
            self.assertIn("hint: " + hint, r.stderr)
            r = self.kdpctl("info", name, "--plugins-registry", self.reg, "--json")
            self.assertEqual(r.returncode, 1, r)
            j = self.json_lines(r)
            self.assertFalse(j[0]["kubelet_accepts"])
            self.assertIn(why, j[1]["message"])
        self.gowatch("-info-endpoint", "rel.sock", reg_socket="rel.sock")
        r = self.ok("info", "rel.sock", "--plugins-registry", self.reg)
        self.assertIn("kdpctl info: warning: the endpoint rel.sock is relative", r.stderr)

    def test_kubelet_sock_plugin_unimplemented(self):
        self.gopher("g1")
        path = os.path.join(self.dp, "gopher.sock")
        r = self.kdpctl("info", path)
        self.assertEqual(r.returncode, 1, r)
        self.assertIn("kdpctl info: UNIMPLEMENTED", r.stderr)
        self.assertIn("hint: %s does not serve pluginregistration.Registration: a device plugin "
                      "that registers through kubelet.sock" % path, r.stderr)

    def test_missing_socket(self):
        r = self.kdpctl("info", "nope.sock", "--plugins-registry", self.reg)
        self.assertEqual(r.returncode, 1, r)
        self.assertIn("UNAVAILABLE", r.stderr)
        self.assertIn("hint: no such socket: is the plugin running? dir is %s" % self.reg,
                      r.stderr)
        r = self.kdpctl("info")
        self.assertEqual(r.returncode, 2, r)


if __name__ == "__main__":
    unittest.main(verbosity=2)
