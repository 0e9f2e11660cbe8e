#!/usr/bin/python3
"""Health checks (kdp_ops.probe) end to end: kdp-test-plugin's probe (which
reads what to answer for device x from PROBE_DIR/x) against the kubelet
emulator (kdp-test-kubelet, grpc-go): what the kubelet's ListAndWatch shows,
and when.

usage: KDP_BIN_DIR=<build>/bin /usr/bin/python3 test_probes.py [-v] [Test.name ...]

Assertions are about order and outcomes; measured times are printed
("FIGURE ..." lines), never asserted against a threshold. Every wait is
bounded (kdptest.T), every test too (PluginTest.TEST_BOUND).
"""

import json
import os
import sys
import time
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
import kdptest  # noqa: E402
from kdptest import T, figure  # noqa: E402
from kdptest.plugin import PluginTest  # noqa: E402

RES = "kdp.test/dev"
INTERVAL_MS = 200


def health_of(ev):
    """{id: health} of a devices event."""
    return {d["id"]: d["health"] for d in ev["devices"]}


def devices_where(cond, name):
    def pred(ev):
        return ev.get("event") == "devices" and ev.get("resource") == RES and cond(health_of(ev))
    pred.__name__ = name
    return pred


def tearDownModule():
    kdptest.print_figures()


class ProbeTest(PluginTest):
    def start(self, *args, devices="a,b", n=3, m=2, interval=INTERVAL_MS):
        self.probe_dir = self.subdir("probe")
        self.kl = self.kubelet()
        self.pl = self.start_test_plugin(
            "--devices", devices, "--probe-dir", self.probe_dir,
            "--probe-interval-ms", str(interval), "--probe-unhealthy-after", str(n),
            "--probe-healthy-after", str(m), *args)
        self.kl.wait_event("devices", T, resource=RES)
        return self.kl, self.pl

    def say(self, dev, what):
        """The probe of dev answers `what` from now on (None: healthy)."""
        path = os.path.join(self.probe_dir, dev)
        if what is None:
            os.unlink(path)
            return
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write(what + "\n")
        os.rename(tmp, path)

    def probes_of(self, dev):
        try:
            with open(os.path.join(self.probe_dir, "probes.log")) as f:
                return sum(1 for line in f if line.strip() == "probe " + dev)
        except FileNotFoundError:
            return 0

    def status(self):
        mark = self.pl.mark()
        self.pl.send("status")
        line = self.pl.wait_line(r"^status %s " % RES, T, since=mark)
        return json.loads(line.split(" ", 2)[2])

    def unhealthy_events(self, dev, since):
        return [e for e in self.kl.events_since(since, "devices", resource=RES)
                if health_of(e).get(dev) == "Unhealthy"]


class Hysteresis(ProbeTest):
    def test_unhealthy_after_n_back_after_m(self):
        kl, pl = self.start()
        mark = kl.mark()
        probes0 = self.probes_of("a")
        t0 = time.time_ns()
        self.say("a", "fail")
        ev = kl.wait_event(devices_where(lambda h: h.get("a") == "Unhealthy", "a Unhealthy"), T,
                           since=mark)
        self.assertEqual(health_of(ev)["b"], "Healthy")
        # The kubelet heard of it only once the third failure was counted.
        pl.wait_log(r"probe: kdp\.test/dev device a Unhealthy after 3 failures: "
                    r"device a: the test says it fails", T)
        self.assertGreaterEqual(self.probes_of("a") - probes0, 3)
        figure("probe failing -> kubelet sees Unhealthy (N=3, interval %d ms)" % INTERVAL_MS,
               "%.0f ms" % ((ev["t_ns"] - t0) / 1e6))
        st = self.status()
        self.assertEqual(st["probe_unhealthy"], 1)
        # An allocation of it is refused now.
        self.assertFailed(kl.command("allocate %s a" % RES), "InvalidArgument", '"a"')
        # Back after M = 2 successes.
        mark = kl.mark()
        t1 = time.time_ns()
        self.say("a", None)
        ev = kl.wait_event(devices_where(lambda h: h.get("a") == "Healthy", "a Healthy"), T,
                           since=mark)
        pl.wait_log(r"probe: kdp\.test/dev device a Healthy again after 2 successes", T)
        figure("probe passing again -> kubelet sees Healthy (M=2)",
               "%.0f ms" % ((ev["t_ns"] - t1) / 1e6))
        self.assertEqual(self.status()["probe_unhealthy"], 0)
        self.assertOk(kl.command("allocate %s a" % RES))
        self.assertStopsCleanly(pl)

    def test_flapping_never_flips(self):
        kl, pl = self.start(n=2, m=2)
        mark = kl.mark()
        probes0 = self.probes_of("a")
        self.say("a", "flap")
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:
            time.sleep(0.1)
        flaps = self.probes_of("a") - probes0
        self.assertGreaterEqual(flaps, 6, "too few probes to tell")
        self.assertEqual(self.unhealthy_events("a", mark), [])
        self.assertEqual(pl.count_log(r"device a Unhealthy"), 0)
        figure("flapping probe (fail/ok), N=M=2: probes without a flip", "%d" % flaps)
        self.assertStopsCleanly(pl)

    def test_hanging_probe_is_a_failure(self):
        kl, pl = self.start("--callback-timeout-ms", "300", n=2, m=2)
        mark = kl.mark()
        self.say("a", "hang")
        kl.wait_event(devices_where(lambda h: h.get("a") == "Unhealthy", "a Unhealthy"), T,
                      since=mark)
        pl.wait_log(r"device a Unhealthy after 2 failures: the probe did not answer within its "
                    r"deadline \(300 ms\)", T)
        # said as it is: the check counts as failed (not "its result will be dropped")
        pl.wait_log(r"the probe callback did not return within its deadline; the check counts "
                    r"as failed", T)
        # Each hung probe leaves its thread behind (it sleeps 60 s): at the cap
        # of stuck callbacks, rounds are skipped (said) rather than piled up.
        pl.wait_log(r"probe: kdp\.test/dev: a round of health checks skipped: 4 callbacks are "
                    r"stuck past their deadline \(the cap is 4\)", T)
        self.assertGreaterEqual(self.status()["stuck_callbacks"], 4)
        # The other device was never held Unhealthy.
        self.assertEqual(self.unhealthy_events("b", mark), [])
        self.assertStopsCleanly(pl)


class Down(ProbeTest):
    def test_down_marks_every_device_unhealthy(self):
        kl, pl = self.start(devices="a,b,c")
        mark = kl.mark()
        self.say("a", "down")
        # One message with every device Unhealthy, at the first DOWN answer.
        ev = kl.wait_event(devices_where(lambda h: set(h.values()) == {"Unhealthy"},
                                         "all Unhealthy"), T, since=mark)
        self.assertEqual(len(ev["devices"]), 3)
        pl.wait_log(r"probe: kdp\.test/dev: the health subsystem is down \(device a: the test's "
                    r"health subsystem is down\): every device Unhealthy \(3 turned so; policy: "
                    r"unhealthy\)", T)
        st = self.status()
        self.assertTrue(st["probe_down"])
        self.assertEqual(st["probe_unhealthy"], 3)
        # It answers again: every device back after its M successes.
        mark = kl.mark()
        self.say("a", None)
        kl.wait_event(devices_where(lambda h: set(h.values()) == {"Healthy"}, "all Healthy"), T,
                      since=mark)
        pl.wait_log(r"probe: kdp\.test/dev: the health subsystem answers again", T)
        st = self.status()
        self.assertFalse(st["probe_down"])
        self.assertEqual(st["probe_unhealthy"], 0)
        self.assertStopsCleanly(pl)

    def test_down_keep_policy(self):
        kl, pl = self.start("--probe-down", "keep", devices="a,b,c")
        self.say("b", "fail")
        kl.wait_event(devices_where(lambda h: h.get("b") == "Unhealthy", "b Unhealthy"), T)
        mark = kl.mark()
        for dev in "abc":
            self.say(dev, "down")
        pl.wait_log(r"the health subsystem is down .*keeping every device's last state", T)
        probes0 = self.probes_of("a")
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertGreaterEqual(self.probes_of("a") - probes0, 3)
        # Nothing changed for the kubelet while down: a and c Healthy, b Unhealthy.
        kl.assert_no_event("devices", within=0.1, since=mark)
        st = self.status()
        self.assertTrue(st["probe_down"])
        self.assertEqual(st["probe_unhealthy"], 1)
        r = self.assertOk(kl.command("allocate %s a" % RES))
        self.assertEqual(len(r["container_responses"]), 1)
        for dev in "abc":
            self.say(dev, None)
        kl.wait_event(devices_where(lambda h: h.get("b") == "Healthy", "b Healthy"), T,
                      since=mark)
        self.assertStopsCleanly(pl)


class Scheduling(ProbeTest):
    def test_allocate_during_a_slow_round(self):
        devs = ["s%d" % i for i in range(6)]
        kl, pl = self.start(devices=",".join(devs + ["x"]), interval=100)
        for d in devs:
            self.say(d, "slow 400")
        # Wait until a slow round runs (a probe of s2: the round is 2.4 s long).
        kdptest.proc.wait_for(lambda: self.probes_of("s2") >= 2, T, "a slow round")
        t0 = time.time_ns()
        r = kl.command("allocate %s x" % RES, T)
        self.assertOk(r)
        waited = (r["t_ns"] - t0) / 1e6
        figure("allocate during a round of 6 probes of 400 ms each",
               "answered in %.0f ms" % waited)
        # At most one probe (400 ms) ahead of it, never the round's 2.4 s.
        self.assertLess(waited, 2400)
        self.assertStopsCleanly(pl)


class Config(ProbeTest):
    def _refused(self, args, needle):
        pl = self.start_test_plugin("--devices", "a", "--probe-dir", self.subdir("probe"), *args)
        rc = pl.wait_exit(T)
        self.assertEqual(rc, 1)
        pl.wait_log(needle, T)

    def test_bad_settings_refused(self):
        self._refused(["--probe-interval-ms", "50"],
                      r"invalid kdp_config\.probe_interval_ms 50: 0 \(the default, 10000 ms\), "
                      r"or from 100 ms")
        self._refused(["--probe-unhealthy-after", "1001"],
                      r"invalid kdp_config\.probe_unhealthy_after 1001")
        self._refused(["--probe-healthy-after", "5000"],
                      r"invalid kdp_config\.probe_healthy_after 5000")
        self._refused(["--probe-down", "bad"], r"invalid kdp_config\.probe_down 99")


if __name__ == "__main__":
    unittest.main()
