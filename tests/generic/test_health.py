#!/usr/bin/python3
"""kdp-generic's health: section end to end (docs/generic.md), on the fake
host of test_generic.py against the kubelet emulator: a device node removed
turns Unhealthy after unhealthyAfter rounds and back when restored; a file
check; the command check (exit 0/1/2, a timeout: killed, reaped, nothing
left behind) with a tiny shell script; config errors naming file, line, key.

usage: KDP_BIN_DIR=<build>/bin /usr/bin/python3 test_health.py [-v] [Test.name ...]
"""

import os
import shutil
import signal
import stat
import subprocess
import sys
import time
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "pylib"))
sys.path.insert(0, HERE)
import kdptest  # noqa: E402
from kdptest import T, binary, figure  # noqa: E402
from kdptest.plugin import PluginProc  # noqa: E402
from test_generic import GenericTest, sock_for  # noqa: E402  (the fixture only: no test of its own)

SERIAL = "example.com/serial"

CHECK = """#!/bin/sh
# The health command of the tests: what to do for device $1 is in $2/$1.
what=$(cat "$2/$1" 2>/dev/null || echo 0)
case "$what" in
  hang) echo "checking $1 takes forever"; sleep 30 & wait ;;
  *) echo "check of $1 says $what"; exit "$what" ;;
esac
"""


def health_of(ev):
    return {d["id"]: d["health"] for d in ev["devices"]}


def where(cond, name):
    def pred(ev):
        return ev.get("event") == "devices" and ev.get("resource") == SERIAL and cond(health_of(ev))
    pred.__name__ = name
    return pred


def children_of(pid):
    """(pid, state, cmdline) of every process whose parent is pid."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open("/proc/%s/cmdline" % entry, "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append((int(entry), fields[0], cmd))
    return out


def processes_running(needle):
    n = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/cmdline" % entry, "rb") as f:
                    n += needle.encode() in f.read()
            except OSError:
                pass
    return n


def tearDownModule():
    kdptest.print_figures()


class Health(GenericTest):
    def serial(self, health):
        return ("resources:\n"
                "  - name: example.com/serial\n"
                "    devices:\n"
                "      - path: /dev/ttyUSB*\n"
                "    health:\n" + "".join("      %s\n" % line for line in health))

    def test_node_removed_unhealthy_after_n_and_back(self):
        kl, pl, evs = self.start(self.serial(["interval: 200ms", "unhealthyAfter: 3",
                                              "healthyAfter: 2"]), [SERIAL])
        self.assertEqual(health_of(evs[SERIAL]), {"ttyUSB0": "Healthy", "ttyUSB1": "Healthy"})
        mark = kl.mark()
        t0 = time.time_ns()
        self.host.rm("/dev/ttyUSB0")
        ev = kl.wait_event(where(lambda h: h.get("ttyUSB0") == "Unhealthy", "ttyUSB0 Unhealthy"),
                           T, since=mark)
        # The device stayed listed (no capacity drop), Unhealthy after 3 rounds.
        self.assertEqual(health_of(ev), {"ttyUSB0": "Unhealthy", "ttyUSB1": "Healthy"})
        for e in kl.events_since(mark, "devices", resource=SERIAL):
            self.assertEqual(sorted(health_of(e)), ["ttyUSB0", "ttyUSB1"])
        pl.wait_log(r"probe: example\.com/serial device ttyUSB0 Unhealthy after 3 failures: "
                    r"device node /dev/ttyUSB0 is missing", T)
        figure("kdp-generic: node removed -> Unhealthy (interval 200 ms, N=3)",
               "%.0f ms" % ((ev["t_ns"] - t0) / 1e6))
        self.assertFailed(kl.command("allocate %s ttyUSB0" % SERIAL), "InvalidArgument",
                          "ttyUSB0")
        # Restored: Healthy again after 2 successes.
        mark = kl.mark()
        self.host.node("/dev/ttyUSB0")
        kl.wait_event(where(lambda h: h.get("ttyUSB0") == "Healthy", "ttyUSB0 Healthy"), T,
                      since=mark)
        pl.wait_log(r"device ttyUSB0 Healthy again after 2 successes", T)
        self.container(kl, SERIAL, "ttyUSB0")
        self.assertStopsCleanly(pl)

    def test_without_health_a_removed_node_leaves(self):
        kl, pl, evs = self.start("resources:\n  - name: example.com/serial\n    devices:\n"
                                 "      - path: /dev/ttyUSB*\n", [SERIAL])
        mark = kl.mark()
        self.host.rm("/dev/ttyUSB0")
        ev = kl.wait_event("devices", T, since=mark, resource=SERIAL)
        self.assertEqual(health_of(ev), {"ttyUSB1": "Healthy"})
        self.assertStopsCleanly(pl)

    def test_file_check(self):
        os.makedirs(self.host.p("/run/ok"))
        for dev in ("ttyUSB0", "ttyUSB1"):
            open(self.host.p("/run/ok/" + dev), "w").close()
        kl, pl, evs = self.start(self.serial(["interval: 200ms", "unhealthyAfter: 2",
                                              "file: /run/ok/{name}"]), [SERIAL])
        mark = kl.mark()
        os.remove(self.host.p("/run/ok/ttyUSB1"))
        kl.wait_event(where(lambda h: h.get("ttyUSB1") == "Unhealthy", "ttyUSB1 Unhealthy"), T,
                      since=mark)
        pl.wait_log(r"device ttyUSB1 Unhealthy after 2 failures: health file /run/ok/ttyUSB1 "
                    r"is missing", T)
        self.assertEqual(len(kl.events_since(mark, "devices", resource=SERIAL,)), 1)
        self.assertStopsCleanly(pl)

    def test_command(self):
        state = self.subdir("state")
        script = self.file("check.sh")
        with open(script, "w") as f:
            f.write(CHECK)
        os.chmod(script, stat.S_IRWXU)
        kl, pl, evs = self.start(self.serial([
            "interval: 200ms", "unhealthyAfter: 2", "healthyAfter: 2", "timeout: 300ms",
            "nodeExists: false", 'command: ["%s", "{id}", "%s"]' % (script, state)]), [SERIAL])

        def say(dev, what):
            with open(os.path.join(state, dev + ".tmp"), "w") as f:
                f.write(what + "\n")
            os.rename(os.path.join(state, dev + ".tmp"), os.path.join(state, dev))

        # exit 1: Unhealthy after 2, with the command's first line as the reason
        mark = kl.mark()
        say("ttyUSB1", "1")
        kl.wait_event(where(lambda h: h.get("ttyUSB1") == "Unhealthy", "ttyUSB1 Unhealthy"), T,
                      since=mark)
        pl.wait_log(r"device ttyUSB1 Unhealthy after 2 failures: health command %s exited "
                    r"with 1: check of ttyUSB1 says 1" % script, T)
        say("ttyUSB1", "0")
        kl.wait_event(where(lambda h: h.get("ttyUSB1") == "Healthy", "ttyUSB1 Healthy"), T,
                      since=mark)
        # exit 2: the health subsystem is down: every device Unhealthy at once
        mark = kl.mark()
        say("ttyUSB0", "2")
        kl.wait_event(where(lambda h: set(h.values()) == {"Unhealthy"}, "all Unhealthy"), T,
                      since=mark)
        pl.wait_log(r"the health subsystem is down \(device ttyUSB0: health command .* exited "
                    r"with 2 \(the health subsystem is down\): check of ttyUSB0 says 2\): every "
                    r"device Unhealthy", T)
        mark = kl.mark()
        say("ttyUSB0", "0")
        kl.wait_event(where(lambda h: set(h.values()) == {"Healthy"}, "all Healthy"), T,
                      since=mark)
        # past its deadline: killed (its child too), reaped, a failure
        mark = kl.mark()
        say("ttyUSB0", "hang")
        kl.wait_event(where(lambda h: h.get("ttyUSB0") == "Unhealthy", "ttyUSB0 Unhealthy"), T,
                      since=mark)
        pl.wait_log(r"device ttyUSB0 Unhealthy after 2 failures: health command .* did not "
                    r"finish within 300 ms: killed: checking ttyUSB0 takes forever", T)
        say("ttyUSB0", "0")
        kl.wait_event(where(lambda h: h.get("ttyUSB0") == "Healthy", "ttyUSB0 Healthy"), T,
                      since=mark)
        # no zombie, nothing left running: every check reaped, every sleep killed
        zombies = [c for c in children_of(pl.pid) if c[1] == "Z"]
        self.assertEqual(zombies, [])
        kdptest.wait_for(lambda: processes_running(script) == 0, T, "the checks to be gone")
        self.assertStopsCleanly(pl)


    def test_command_as_pid_1_reaps_what_it_left(self):
        """kdp-generic as a container's entrypoint (PID 1): what a check left
        running is killed, re-parented to it, and reaped: no zombie."""
        unshare = shutil.which("unshare")
        if not unshare or subprocess.run([unshare, "--pid", "--fork", "--map-root-user", "true"],
                                         capture_output=True).returncode != 0:
            self.skipTest("no PID namespace here (unshare --pid --fork --map-root-user)")
        script = self.file("leave.sh")
        with open(script, "w") as f:
            f.write("#!/bin/sh\nsleep 30 &\nsleep 30 &\necho fine\n")
        os.chmod(script, stat.S_IRWXU)
        kl = self.kubelet()
        cfg = self.config(self.serial(["interval: 100ms", "nodeExists: false",
                                       'command: ["%s"]' % script]))
        argv = [unshare, "--pid", "--fork", "--kill-child", "--map-root-user",
                binary("kdp-generic"), "--config", cfg, "--device-plugin-dir", self.dir]
        pl = self.start_proc(PluginProc(argv, "kdp-generic-pid1", self.dir, sock_for(SERIAL),
                                        [SERIAL]))
        kl.wait_event("registered", T, since=0, resource=SERIAL)
        gen = [c[0] for c in children_of(pl.pid) if "kdp-generic" in c[2]]
        self.assertEqual(len(gen), 1)
        time.sleep(2)  # some 20 checks, each leaving two sleeps behind
        kdptest.wait_for(lambda: not [c for c in children_of(gen[0]) if c[1] == "Z"], 2,
                         "no zombie under kdp-generic (PID 1)")
        os.kill(gen[0], signal.SIGTERM)  # unshare does not pass SIGTERM on
        self.assertEqual(pl.stop(), 0)

# (text, the line, the key, a phrase of the message)
BAD = [
    ("    health: true\n", 5, "resources[0].health", "must be a mapping"),
    ("    health:\n      interval: 10\n", 6, "resources[0].health.interval",
     "must be a duration: a whole number with ms, s or m"),
    ("    health:\n      interval: 50ms\n", 6, "resources[0].health.interval",
     "must be from 100ms to 24h"),
    ("    health:\n      unhealthyAfter: 0\n", 6, "resources[0].health.unhealthyAfter",
     "must be a positive integer"),
    ("    health:\n      healthyAfter: 1001\n", 6, "resources[0].health.healthyAfter",
     "must be at most 1000"),
    ("    health:\n      onProbeDown: ignore\n", 6, "resources[0].health.onProbeDown",
     'must be "unhealthy"'),
    ("    health:\n      nodeExists: maybe\n", 6, "resources[0].health.nodeExists", "true"),
    ("    health:\n      nodeExists: false\n", 6, "resources[0].health",
     "checks nothing: keep nodeExists"),
    ("    health:\n      file: /sys/{bus}\n", 6, "resources[0].health.file",
     "unknown placeholder: use {path}"),
    ("    health:\n      file: sys/x\n", 6, "resources[0].health.file",
     "must be an absolute path"),
    ("    health:\n      command: /bin/check\n", 6, "resources[0].health.command",
     "must be a list: the program and its arguments, no shell"),
    ("    health:\n      command: [check, '{path}']\n", 6, "resources[0].health.command[0]",
     "must be the program's absolute path"),
    ("    health:\n      command: [/bin/check, '{dev}']\n", 6,
     "resources[0].health.command[1]", "unknown placeholder"),
    ("    health:\n      command: []\n", 6, "resources[0].health.command", "at least 1 item"),
    ("    health:\n      timeout: 1s\n", 6, "resources[0].health.timeout",
     "is the command's deadline: set command too"),
    ("    health:\n      command: [/bin/true]\n      timeout: 10s\n", 7,
     "resources[0].health.timeout", "must be from 100ms to 9s"),
    ("    health:\n      intervall: 1s\n", 6, "resources[0].health.intervall", "unknown key"),
]


class HealthConfig(GenericTest):
    def test_bad_health_sections(self):
        for tail, line, key, phrase in BAD:
            with self.subTest(key=key, phrase=phrase):
                text = ("resources:\n  - name: example.com/x\n    devices: [/dev/x]\n"
                        "    count: 1\n" + tail)
                cfg = self.raw_config(text, "bad.yaml")
                out = kdptest.run([binary("kdp-generic"), "--config", cfg, "--check",
                                   "--device-plugin-dir", self.dir], T)
                self.assertEqual(out.returncode, 1, out)
                self.assertIn("%s:%d: %s: " % (cfg, line, key), out.stderr)
                self.assertIn(phrase, out.stderr)

    def test_good_health_section(self):
        cfg = self.raw_config("resources:\n  - name: example.com/x\n    devices: [/dev/x]\n"
                              "    health:\n      interval: 1m\n      unhealthyAfter: 5\n"
                              "      healthyAfter: 1\n      onProbeDown: keep\n"
                              "      file: /sys/class/tty/{name}/device\n"
                              "      command: [/usr/local/bin/check, '{path}', '{id}']\n"
                              "      timeout: 2s\n", "good.yaml")
        out = kdptest.run([binary("kdp-generic"), "--config", cfg, "--check",
                           "--device-plugin-dir", self.dir], T)
        self.assertEqual(out.returncode, 0, out.stderr)


if __name__ == "__main__":
    unittest.main()
