#!/usr/bin/python3
"""Every mistake gets a clear answer: what an author, a node or a kubelet gets
wrong, and what kdp does about it, with real plugin processes (kdp-test-plugin)
against the kubelet emulator (kdp-test-kubelet, grpc-go).

usage: KDP_BIN_DIR=<build>/bin /usr/bin/python3 test_mistakes.py [-v] [Test.name ...]

Each test failed before the fix it covers (the note of issue 11 lists them).
Measured times are printed, never asserted; every wait is bounded.
"""

import errno
import json
import os
import pwd
import shutil
import sys
import time
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
import kdptest  # noqa: E402
from kdptest import T, figure, wait_for  # noqa: E402
from kdptest.plugin import PluginProc, PluginTest, socket_for  # noqa: E402

RES = "kdp.test/dev"
KUBELET_LIMIT = 4 * 1024 * 1024


def ids_of(ev):
    return sorted(d["id"] for d in ev["devices"])


def threads_of(pid):
    try:
        return len(os.listdir("/proc/%d/task" % pid))
    except FileNotFoundError:
        return 0


class Base(PluginTest):
    def status(self, pl, res=RES):
        """kdp_plugin_get_status() of the plugin, through its "status" command."""
        mark = pl.mark()
        pl.send("status")
        prefix = "status %s " % res
        ev = pl.wait_event(lambda e: e.get("event") == "raw"
                           and e.get("line", "").startswith(prefix), T, since=mark)
        return json.loads(ev["line"][len(prefix):])

    def write(self, path, text):
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.rename(tmp, path)


# ---------------------------------------------------------------------------
# 1. A device table over the kubelet's 4 MiB message limit is never sent, and
#    restarts that never reach a stable registration back off.

class MessageLimit(Base):
    # 120,000 devices with 32-byte IDs: about 5.4 MB of ListAndWatch message.
    MANY = "many 120000 32"

    def test_set_devices_over_limit_refused(self):
        kl = self.kubelet()
        pl = self.start_test_plugin("--devices", "a,b")
        kl.wait_event("registered", T, resource=RES)
        kl.wait_event("devices", T, resource=RES)
        mark, lmark = kl.mark(), pl.log_mark()
        self.assertEqual(pl.command(self.MANY), {RES: -errno.EMSGSIZE})
        line = pl.wait_log(r"kdp_plugin_set_devices: 120000 devices make a \d+-byte", T,
                           since=lmark)
        self.assertIn("4194304", line)
        self.assertIn("split them over several resources", line)
        # Refused again at once: no second line within the minute.
        self.assertEqual(pl.command(self.MANY), {RES: -errno.EMSGSIZE})
        kl.assert_no_event("devices", within=0.5, since=mark)
        self.assertEqual(pl.count_log(r"kdp_plugin_set_devices: .* over the kubelet", lmark), 1)
        self.assertEqual(pl.count_log(r"restarting: ", lmark), 0)
        self.assertEqual(kl.events_since(mark, "stream_end"), [])
        self.assertEqual(sorted(d["id"] for d in kl.state()[RES]["devices"]), ["a", "b"])

    def test_list_over_limit_keeps_last_that_fit(self):
        kl = self.kubelet()
        lst = self.file("list")
        self.write(lst, "a,b\n")
        pl = self.start_test_plugin("--list-file", lst)
        kl.wait_event("registered", T, resource=RES)
        ev = kl.wait_event("devices", T, resource=RES)
        self.assertEqual(ids_of(ev), ["a", "b"])
        mark, lmark = kl.mark(), pl.log_mark()
        self.write(lst, self.MANY + "\n")
        self.assertEqual(pl.command("rescan"), {RES: 0})
        line = pl.wait_log(r"not sending the device list", T, since=lmark)
        self.assertIn("120000 devices", line)
        self.assertIn("limit of 4194304 bytes", line)
        self.assertIn("keeps the last list that fit (2 devices)", line)
        st = self.status(pl)
        self.assertEqual(st["rejected_devices"], 120000)
        self.assertGreater(st["rejected_bytes"], KUBELET_LIMIT)
        self.assertEqual(st["devices"], 2)
        self.assertLess(st["message_bytes"], 100)
        figure("120,000 devices with 32-byte IDs", "a %d-byte message, not sent"
               % st["rejected_bytes"])
        # Asked again: refused again, said once (at most once a minute).
        emark = pl.mark()
        self.assertEqual(pl.command("rescan"), {RES: 0})
        pl.wait_event(lambda e: e.get("line") == "listed 120000", T, since=emark)
        time.sleep(0.5)
        self.assertEqual(pl.count_log(r"not sending the device list", lmark), 1)
        self.assertEqual(pl.count_log(r"restarting: ", lmark), 0)
        self.assertEqual(kl.events_since(mark, "devices"), [])
        self.assertEqual(kl.events_since(mark, "stream_end"), [])
        self.assertOk(kl.command("allocate %s a" % RES))
        # A list that fits again is sent.
        self.write(lst, "c\n")
        self.assertEqual(pl.command("rescan"), {RES: 0})
        ev = kl.wait_event("devices", T, since=mark, resource=RES)
        self.assertEqual(ids_of(ev), ["c"])
        pl.wait_log(r"fits in the kubelet's message limit again", T, since=lmark)
        self.assertEqual(self.status(pl)["rejected_devices"], 0)

    def test_first_list_over_limit_serves_empty(self):
        kl = self.kubelet()
        lst = self.file("list")
        self.write(lst, self.MANY + "\n")
        pl = self.start_test_plugin("--list-file", lst)
        kl.wait_event("registered", T, resource=RES)
        ev = kl.wait_event("devices", T, resource=RES)
        self.assertEqual(ev["n"], 0)  # empty: no list ever fit
        pl.wait_log(r"not sending the device list: its 120000 devices", T)
        kl.assert_no_event("stream_end", within=0.5)
        self.assertEqual(pl.count_log(r"restarting: "), 0)


class RestartBackoff(Base):
    def test_stream_failing_every_time_backs_off(self):
        # A kubelet that fails every stream the plugin serves (its receive
        # limit is below the plugin's first message): without backoff the
        # plugin re-registered hundreds of times a second.
        kl = self.kubelet(args=["-max-recv-msg", "40"])
        pl = self.start_test_plugin("--devices", "dev-a,dev-b,dev-c,dev-d")
        kl.wait_event("registered", T, resource=RES)
        t0 = time.monotonic()
        time.sleep(3.0)
        regs = len(kl.events_since(0, "registered", resource=RES))
        elapsed = time.monotonic() - t0
        figure("a kubelet failing every stream: registrations in %.1f s" % elapsed, regs)
        # 0, 0, 50, 100, 200, 400, 800, 1600 ms (+-20 %): 8 or so in 3 s.
        self.assertLessEqual(regs, 15, "restarts do not back off")
        self.assertGreaterEqual(regs, 3)
        pl.wait_log(r"starting again in \d+ ms: the same kubelet ended \d+ registrations in a row",
                    T)
        st = self.status(pl)
        self.assertGreaterEqual(st["restarts"], 2)
        # The cause fixed (a list that fits), the next start registers for good:
        # the list reaches the kubelet and its stream stays open.
        self.assertEqual(pl.command("set a"), {RES: 0})
        mark = kl.mark()
        ev = kl.wait_event("devices", T, since=mark, resource=RES)
        self.assertEqual(ids_of(ev), ["a"])
        kl.assert_no_event("stream_end", within=0.5)
        self.assertTrue(pl.alive())

    def test_new_kubelet_cuts_the_wait(self):
        kl = self.kubelet(args=["-max-recv-msg", "40"])
        pl = self.start_test_plugin("--devices", "dev-a,dev-b,dev-c,dev-d")
        pl.wait_log(r"starting again in \d+ ms", T)
        # Let it back off further, then a kubelet restart: it starts at once.
        wait_for(lambda: pl.count_log(r"starting again in \d+ ms") >= 4, T, "4 backoffs")
        self.assertEqual(pl.command("set a"), {RES: 0})
        mark = kl.mark()
        t0 = time.time_ns()
        kl.ok("restart")
        reg = kl.wait_event("registered", T, since=mark, resource=RES)
        figure("backing off, then a new kubelet.sock -> registered",
               "%.1f ms" % ((reg["t_ns"] - t0) / 1e6))
        ev = kl.wait_event("devices", T, since=mark, resource=RES)
        self.assertEqual(ids_of(ev), ["a"])


# ---------------------------------------------------------------------------
# 2. A list op that fails at start is called again, with backoff, until it
#    succeeds.

class ListRetry(Base):
    def test_failing_list_at_start_retried(self):
        kl = self.kubelet()
        lst = self.file("list")  # missing: the list op fails with -ENOENT
        pl = self.start_test_plugin("--list-file", lst)
        kl.wait_event("registered", T, resource=RES)
        ev = kl.wait_event("devices", T, resource=RES)
        self.assertEqual(ev["n"], 0)
        line = pl.wait_log(r"no device list yet .* calling the list callback again in \d+ ms", T)
        self.assertNotIn("keeping the previous", line)
        self.assertEqual(self.status(pl)["list_error"], -errno.ENOENT)
        time.sleep(1.0)
        retries = pl.count_log(r"calling the list callback again")
        figure("a failing list: retries in the first ~1.1 s", retries)
        self.assertGreaterEqual(retries, 2)
        self.assertLessEqual(retries, 8, "the list retries do not back off")
        mark = kl.mark()
        t0 = time.monotonic()
        self.write(lst, "a,b\n")  # the driver is ready: no rescan asked for
        ev = kl.wait_event("devices", T, since=mark, resource=RES)
        figure("list file created -> devices at the kubelet (retry backoff)",
               "%.0f ms" % ((time.monotonic() - t0) * 1e3))
        self.assertEqual(ids_of(ev), ["a", "b"])
        pl.wait_log(r"the list callback succeeded again", T)
        self.assertEqual(self.status(pl)["list_error"], 0)
        self.assertOk(kl.command("allocate %s a" % RES))


# ---------------------------------------------------------------------------
# 3 and 4. Calls an author must not make where they made them: refused with
#    a line naming the right call, never a crash, a hang or freed memory.

class Misuse(Base):
    def test_free_and_loop_calls_from_a_callback(self):
        kl = self.kubelet()
        life = self.file("life")
        pl = self.start_test_plugin("--devices", "a,m", "--misuse-id", "m", "--lifecycle", life)
        kl.wait_event("registered", T, resource=RES)
        kl.wait_event("devices", T, resource=RES)
        lmark = pl.log_mark()
        r = self.assertOk(kl.command("allocate %s m" % RES))
        self.assertEqual(r["container_responses"][0]["envs"]["TEST_RESOURCE"], RES)
        ev = pl.wait_event(lambda e: e.get("line", "").startswith("misuse:"), T)
        eperm = -errno.EPERM
        self.assertEqual(ev["line"], "misuse: dispatch %d run %d watch %d new %d"
                         % (eperm, eperm, eperm, eperm))
        line = pl.wait_log(r"kdp_plugin_free called from inside a callback: refused", T,
                           since=lmark)
        self.assertIn("kdp_plugin_stop()", line)
        # each refusal says what fits its own call (a user found kdp_plugin_new
        # refused with kdp_plugin_free's reason)
        line = pl.wait_log(r"kdp_plugin_new called from inside a callback: refused", T,
                           since=lmark)
        self.assertIn("create plugins before the context runs", line)
        self.assertIn("kdp_ctx_post()", line)  # the way to do it from a callback
        self.assertNotIn("pull the plugin out", line)
        pl.wait_log(r"kdp_ctx_dispatch called from inside a callback: refused", T, since=lmark)
        pl.wait_log(r"kdp_ctx_run called from inside a callback: refused", T, since=lmark)
        pl.wait_log(r"kdp_plugin_watch_path called from inside a callback: refused", T,
                    since=lmark)
        # Nothing happened to the plugin: it serves, restarts never, stops once.
        self.assertOk(kl.command("allocate %s a" % RES))
        self.assertEqual(pl.count_log(r"restarting: ", lmark), 0)
        self.assertStopsCleanly(pl)
        with open(life) as f:
            self.assertEqual(f.read().split(), ["refresh", "destroy"])

    def test_free_from_another_thread_while_running(self):
        kl = self.kubelet()
        life = self.file("life")
        pl = self.start_test_plugin("--devices", "a", "--lifecycle", life)
        kl.wait_event("registered", T, resource=RES)
        kl.wait_event("devices", T, resource=RES)
        lmark = pl.log_mark()
        self.assertEqual(pl.command("free"), {RES: 0})  # from the stdin thread
        line = pl.wait_log(r"kdp_plugin_free called from thread \d+ while thread \d+ runs the "
                           r"context: refused", T, since=lmark)
        self.assertIn("kdp_plugin_stop()", line)
        self.assertOk(kl.command("allocate %s a" % RES))
        self.assertEqual(pl.count_log(r"restarting: |kubelet restarted", lmark), 0)
        self.assertEqual(self.status(pl)["state"], 4)  # KDP_PLUGIN_REGISTERED
        self.assertStopsCleanly(pl)
        with open(life) as f:
            self.assertEqual(f.read().split(), ["refresh", "destroy"])

    def test_log_sink_that_calls_kdp_log_set(self):
        # Before: the first line deadlocked the process, SIGTERM included.
        kl = self.kubelet()
        pl = self.start_test_plugin("--devices", "a", "--sink-reenters")
        kl.wait_event("registered", T, resource=RES)
        kl.wait_event("devices", T, resource=RES)
        pl.wait_log(r"^sink: I .*registered with the kubelet", T)
        # The line the sink's own kdp call logged: to stderr, not back into the sink.
        pl.wait_log(r"^E.*kdp_plugin_set_devices: device ID may contain", T)
        self.assertOk(kl.command("allocate %s a" % RES))
        self.assertStopsCleanly(pl)


# ---------------------------------------------------------------------------
# 5. Callbacks that never return cost a bounded number of threads; past the
#    cap, calls are refused at once with a message naming the callback.

class StuckCallbacks(Base):
    CAP = 4  # KDP_MAX_STUCK_CALLBACKS

    def test_hung_allocates_bounded(self):
        kl = self.kubelet()
        pl = self.start_test_plugin("--devices", "a,slow", "--slow-ms", "3000",
                                    "--callback-timeout-ms", "100")
        kl.wait_event("registered", T, resource=RES)
        kl.wait_event("devices", T, resource=RES)
        pid = pl.proc.pid
        base = threads_of(pid)
        # One after another, as a kubelet admitting pods does: each runs and
        # hangs. Before: a fresh thread for each (41 hung calls, 29+ threads).
        codes = []
        most = base
        for _ in range(41):
            r = kl.command("allocate %s slow" % RES)
            codes.append(r.get("code"))
            most = max(most, threads_of(pid))
        figure("41 hung allocates in a row", "%d DeadlineExceeded then %d Unavailable; threads "
               "%d before, %d at most" % (codes.count("DeadlineExceeded"),
                                         codes.count("Unavailable"), base, most))
        self.assertEqual(codes, ["DeadlineExceeded"] * self.CAP +
                         ["Unavailable"] * (41 - self.CAP))
        # the worker (no thread before the first call) has CAP threads at most
        self.assertLessEqual(most, base + self.CAP)
        r = kl.command("allocate %s a" % RES)
        self.assertFailed(r, "Unavailable", "the allocate callback", "stuck past their deadline",
                          "cap is 4")
        pl.wait_log(r"callbacks are stuck past their deadline", T)
        st = self.status(pl)
        self.assertEqual(st["stuck_callbacks"], self.CAP)
        # They return (3 s each): calls are served again.
        wait_for(lambda: self.status(pl)["stuck_callbacks"] == 0, 15, "the hung callbacks")
        self.assertOk(kl.command("allocate %s a" % RES))
        self.assertLessEqual(threads_of(pid), base + 1)
        self.assertTrue(pl.alive())


# ---------------------------------------------------------------------------
# 6. The device-plugin directory missing or not writable: said once, naming
#    the directory and the fix, then again only when it changes.

class DeviceDir(Base):
    def test_missing_then_a_file_then_fine(self):
        d = os.path.join(self.dir, "dp")  # not there yet
        pl = self.start_test_plugin("--devices", "a", dir=d)
        line = pl.wait_log(r"the device-plugin directory %s does not exist" % d, T)
        self.assertIn("KDP_DEVICE_PLUGIN_DIR", line)
        self.assertIn("hostPath", line)
        time.sleep(1.5)  # several retries
        self.assertEqual(pl.count_log(r"does not exist|cannot take the lock|cannot serve"), 1)
        self.assertEqual(self.status(pl)["dir_error"], -errno.ENOENT)
        lmark = pl.log_mark()
        with open(d, "w"):
            pass
        pl.wait_log(r"the device-plugin directory %s is not a directory" % d, 15, since=lmark)
        self.assertEqual(self.status(pl)["dir_error"], -errno.ENOTDIR)
        os.unlink(d)
        os.mkdir(d)
        kl = self.kubelet(dir=d)
        kl.wait_event("registered", 15, resource=RES)
        pl.wait_log(r"the device-plugin directory %s is usable now" % d, T)
        self.assertEqual(self.status(pl)["dir_error"], 0)

    def test_not_writable(self):
        d = os.path.join(self.dir, "dp")
        os.mkdir(d, 0o755)
        argv_prefix = []
        exe = kdptest.binary("kdp-test-plugin")
        if os.geteuid() == 0:
            # root writes anywhere: run the plugin as nobody, from a copy
            # nobody can execute (the build tree may be under a 0700 dir).
            nobody = pwd.getpwnam("nobody")
            os.chmod(self.dir, 0o755)
            exe_copy = os.path.join(self.dir, "kdp-test-plugin")
            shutil.copy(exe, exe_copy)
            os.chmod(exe_copy, 0o755)
            exe = exe_copy
            argv_prefix = ["setpriv", "--reuid=%d" % nobody.pw_uid,
                           "--regid=%d" % nobody.pw_gid, "--clear-groups"]
        else:
            os.chmod(d, 0o555)
            self.addCleanup(os.chmod, d, 0o755)
        argv = argv_prefix + [exe, "--device-plugin-dir", d, "--resource", RES,
                              "--devices", "a"]
        pl = self.start_proc(PluginProc(argv, "test-plugin", d, socket_for(RES), [RES]))
        line = pl.wait_log(r"cannot create files in the device-plugin directory %s" % d, T)
        self.assertIn("Permission denied", line)
        self.assertIn("run the plugin as root", line)
        time.sleep(1.0)
        self.assertEqual(pl.count_log(r"cannot create files|cannot take the lock|cannot serve"),
                         1)
        self.assertEqual(self.status(pl)["dir_error"], -errno.EACCES)

    def test_writable_by_others(self):
        """A device-plugin directory every user can write to (where anyone
        could plant the files kdp trusts) is refused with the fix, and used
        once its mode is fixed."""
        d = os.path.join(self.dir, "dp")
        os.mkdir(d, 0o755)
        os.chmod(d, 0o777)
        pl = self.start_test_plugin("--devices", "a", dir=d)
        line = pl.wait_log(r"the device-plugin directory %s is writable by every user" % d, T)
        self.assertIn("mode 0777", line)
        self.assertIn("fix the owner and mode", line)
        self.assertEqual(self.status(pl)["dir_error"], -errno.EKEYREJECTED)
        self.assertFalse(os.path.exists(os.path.join(d, socket_for(RES))))
        os.chmod(d, 0o755)
        kl = self.kubelet(dir=d)
        kl.wait_event("registered", 15, resource=RES)
        pl.wait_log(r"the device-plugin directory %s is usable now" % d, T)


# ---------------------------------------------------------------------------
# 7. Silent oddities, made loud.

class Oddities(Base):
    def test_positive_return_is_an_error(self):
        kl = self.kubelet()
        pl = self.start_test_plugin("--devices", "a,p", "--positive-id", "p")
        kl.wait_event("registered", T, resource=RES)
        kl.wait_event("devices", T, resource=RES)
        r = kl.command("allocate %s p" % RES)
        self.assertFailed(r, "InvalidArgument")  # EINVAL, taken as -EINVAL
        line = pl.wait_log(r"the allocate callback returned 22, a positive value", T)
        self.assertIn("-22", line)
        self.assertOk(kl.command("allocate %s a" % RES))

    def test_duplicate_ids_in_one_container(self):
        kl = self.kubelet()
        pl = self.start_test_plugin("--devices", "a,b", "--prestart", self.file("pre"))
        kl.wait_event("registered", T, resource=RES)
        kl.wait_event("devices", T, resource=RES)
        self.assertFailed(kl.command("allocate %s a,b,a" % RES), "InvalidArgument",
                          'device ID "a" is listed twice for one container')
        self.assertFailed(kl.command("prestart %s b,b" % RES), "InvalidArgument",
                          'device ID "b" is listed twice')
        self.assertOk(kl.command("allocate %s a,b" % RES))
        r = self.assertOk(kl.command("allocate %s a;b" % RES))  # two containers
        self.assertEqual([c["envs"]["KDP_DEVICES_KDP_TEST_DEV"] for c in r["container_responses"]],
                         ["a", "b"])
        # the check is per container: one ID in two containers is no mistake
        r = self.assertOk(kl.command("allocate %s a;a" % RES))
        self.assertEqual([c["envs"]["KDP_DEVICES_KDP_TEST_DEV"] for c in r["container_responses"]],
                         ["a", "a"])
        self.assertTrue(pl.alive())


if __name__ == "__main__":
    unittest.main(verbosity=2)
