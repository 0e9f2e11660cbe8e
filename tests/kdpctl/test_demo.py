#!/usr/bin/python3
"""scripts/demo.sh (what `make demo` runs, the README's first command): it
tells its story and exits 0 within its bound, with no stdin and CI=true, as
root or not; and when a step fails it says which, exits non-zero, still
within the bound, and leaves no process or directory behind.

usage: KDP_BIN_DIR=<build>/bin /usr/bin/python3 test_demo.py [-v]
"""

import os
import pwd
import re
import sys
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
import kdptest  # noqa: E402

DEMO = os.path.join(kdptest.REPO, "scripts", "demo.sh")
BOUND = 35.0


def leftovers(work):
    """Processes whose command line mentions the demo's directory."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                if work.encode() in f.read():
                    found.append(pid)
        except OSError:
            pass
    return found


class Demo(kdptest.ProcTest):
    TEST_BOUND = 2 * BOUND + 30

    def run_demo(self, bin_dir, **kw):
        env = dict(os.environ, CI="true")
        env.pop("KDP_DEVICE_PLUGIN_DIR", None)
        r = kdptest.run(["/bin/sh", DEMO, bin_dir], BOUND + 30, echo=False, env=env, **kw)
        kdptest.log(r.stdout + r.stderr)
        self.assertLess(r.elapsed, BOUND, "demo.sh took %.1f s" % r.elapsed)
        self.assertFalse(kdptest.sanitizer_report(r.stdout + r.stderr))
        work = re.search(r"(/tmp/kdp-demo\.\w+)", r.stdout)
        self.assertIsNotNone(work, r.stdout)
        self.assertFalse(os.path.exists(work.group(1)), "demo.sh left %s" % work.group(1))
        self.assertEqual(leftovers(work.group(1)), [], "demo.sh left processes behind")
        return r

    def check_story(self, r):
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        out = r.stdout
        for step in range(1, 17):  # 9-16: the DRA chapter
            self.assertIn("==> %d. " % step, out)
        for want in (r"kubelet: listening on",
                     r"example.com/gopher: registered \(endpoint gopher.sock",
                     r"\n\s+gopher-1\s+Healthy\s+-\n",
                     r"added\s+gopher-3\s+Healthy",
                     r"health\s+gopher-2\s+Healthy -> Unhealthy",
                     r"health\s+gopher-2\s+Unhealthy -> Healthy",
                     r"env\s+GOPHER=gopher-1,gopher-3",
                     r"example.com/gopher: came back in \d+\.\d ms",
                     r"ListAndWatch ended",
                     r"gopher.sock is gone",
                     r"dra-apiserver: serving https://127\.0\.0\.1:\d+",
                     r"gopher.example.com registered: v1.DRAPlugin",
                     r"slice ADDED \S+: driver gopher.example.com, node node-a",
                     r"gopher-1\s+model=gopher index=1\s+memory=1Gi",
                     r"its UID: [0-9a-f-]{36}",
                     r"node-a/gopher-0 \[request req-0\] -> k8s.gopher.example.com/claim=",
                     r'"env": \["GOPHER_0=gopher-0"\]',
                     r"node-a/gopher-2\s+Unhealthy",
                     r"unprepare gopher.example.com default/two-gophers .*: done"):
            self.assertRegex(out, want)
        self.assertNotIn("\033[", out)  # no colours under CI=true

    def test_demo(self):
        self.check_story(self.run_demo(kdptest.bin_dir()))

    @unittest.skipUnless(os.geteuid() == 0, "already not root")
    def test_demo_not_root(self):
        nobody = pwd.getpwnam("nobody")
        bin_dir = kdptest.bin_dir()

        def drop():
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
        probe = kdptest.run(["/bin/sh", "-c", "test -x %s/kdpctl" % bin_dir], preexec_fn=drop)
        if probe.returncode != 0:
            self.skipTest("the build directory is not readable by nobody")
        self.check_story(self.run_demo(bin_dir, preexec_fn=drop, cwd="/"))

    def test_failing_step_is_bounded(self):
        """A plugin that never comes up: the demo names the step, exits 1 in
        time and cleans up."""
        fake = self.path("bin")
        os.mkdir(fake)
        os.symlink(kdptest.binary("kdpctl"), os.path.join(fake, "kdpctl"))
        gopher = os.path.join(fake, "kdp-example-gopher")
        with open(gopher, "w") as f:
            f.write("#!/bin/sh\nexec sleep 60\n")
        os.chmod(gopher, 0o755)
        r = self.run_demo(fake)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("demo FAILED: no line matching", r.stderr)
        self.assertIn("devices #1", r.stderr)

    def test_usage(self):
        r = kdptest.run(["/bin/sh", DEMO], 10)
        self.assertEqual(r.returncode, 2)
        self.assertIn("usage:", r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
