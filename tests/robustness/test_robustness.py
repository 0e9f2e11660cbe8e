#!/usr/bin/python3
"""kdp under faults, bad input and load: real plugin processes against the
kubelet emulator (kdp-test-kubelet), fake kubelets and raw-socket clients
(kdptest.rawh2). docs/robustness.md lists what each test proves.

usage: KDP_BIN_DIR=<build>/bin /usr/bin/python3 test_robustness.py [-v] [Class[.test] ...]

Environment:
  KDP_BIN_DIR       the build's bin/ (kdp-test-plugin, kdp-test-kubelet, examples)
  KDP_SANITIZED=1   a sanitizer build (ASan, TSan): memory figures are printed
                    but not asserted (the sanitizers' allocators keep freed
                    memory in quarantine), and the load is smaller
  KDP_ALLOCATES     how many Allocates Load.test_allocates makes (default
                    1,000,000, or 100,000 when KDP_SANITIZED=1)

Assertions are about outcomes and bounded growth, never about timing; every
wait is bounded (kdptest.T) and so is every test (Base.TEST_BOUND below).
"""

import os
import re
import random
import shutil
import signal
import socket
import stat
import struct
import sys
import threading
import time
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
import kdptest  # noqa: E402
from kdptest import T, binary, figure, rawh2, rss_kib, wait_for  # noqa: E402
from kdptest.plugin import PluginProc, PluginTest, socket_for  # noqa: E402

RES = "kdp.test/dev"
SANITIZED = os.environ.get("KDP_SANITIZED") == "1"
ALLOCATES = int(os.environ.get("KDP_ALLOCATES") or (100000 if SANITIZED else 1000000))
MIB = 1024 * 1024


def fd_count(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def settled_fds(pid):
    """The fewest open fds over 100 ms (a connection may be closing)."""
    n = fd_count(pid)
    for _ in range(5):
        time.sleep(0.02)
        n = min(n, fd_count(pid))
    return n


def health_of(ev):
    """{id: health} of a devices event."""
    return {d["id"]: d["health"] for d in ev["devices"]}


def tearDownModule():
    kdptest.print_figures()


class Base(PluginTest):
    TEST_BOUND = 900.0  # the 500 restarts and the Allocate load take a while under ASan

    def registered_plugin(self, *args, kl=None):
        kl = kl or self.kubelet()
        pl = self.start_test_plugin("--devices", "a,b,c", *args)
        kl.wait_event("registered", T, resource=RES)
        kl.wait_event("devices", T, resource=RES)
        return kl, pl

    def assertServes(self, kl, pl, dev="a"):
        """The plugin still answers the kubelet and is alive."""
        r = self.assertOk(kl.command("allocate %s %s" % (RES, dev)))
        self.assertEqual(r["container_responses"][0]["envs"]["TEST_RESOURCE"], RES)
        self.assertTrue(pl.alive(), pl.diagnostics())

    def assertNoRestart(self, pl, since=0):
        self.assertEqual(pl.count_log(r"restarting: ", since), 0,
                         "the plugin restarted%s" % pl.diagnostics())

    def assertMemoryBounded(self, what, before_kib, after_kib, slack_kib):
        growth = after_kib - before_kib
        figure("%s: RSS" % what, "%d KiB -> %d KiB (%+d KiB; bound %d KiB%s)"
               % (before_kib, after_kib, growth, slack_kib,
                  ", not asserted under a sanitizer" if SANITIZED else ""))
        if not SANITIZED:
            self.assertLessEqual(growth, slack_kib, "%s: RSS grew by %d KiB" % (what, growth))


# ---------------------------------------------------------------------------

class Restarts(Base):
    N = 500
    WARMUP = 20

    def test_500_restarts_no_fd_or_rss_growth(self):
        kl, pl = self.registered_plugin()
        pid = pl.proc.pid
        fd0 = rss0 = None
        t0 = time.monotonic()
        for i in range(self.N):
            if i == self.WARMUP:
                fd0, rss0 = settled_fds(pid), rss_kib(pid)
            mark = kl.mark()
            kl.ok("restart")
            kl.wait_event("registered", T, since=mark, resource=RES)
            kl.wait_event("devices", T, since=mark, resource=RES)
        # A registration's own connection may still be closing: bounded wait.
        # Slack of 2: a restart whose signals straddle the new start registers
        # twice, and the kubelet (like the real one) keeps the replaced
        # registration's connection open, so the plugin may hold one or two
        # more server connections at the end; a leak over 480 restarts would
        # show hundreds.
        fd_slack = 2
        fd1 = wait_for(lambda: fd_count(pid) <= fd0 + fd_slack and fd_count(pid), T,
                       "the fds to settle at %d or less (leak?)" % (fd0 + fd_slack))
        rss1 = rss_kib(pid)
        figure("%d kubelet restarts" % self.N, "%.1f s, each followed by a re-registration"
               % (time.monotonic() - t0))
        figure("%d kubelet restarts: open fds" % self.N,
               "%d after %d restarts, %d after %d" % (fd0, self.WARMUP, fd1, self.N))
        self.assertLessEqual(fd1, fd0 + fd_slack,
                             "fds leaked over %d restarts" % (self.N - self.WARMUP))
        self.assertMemoryBounded("%d kubelet restarts" % self.N, rss0, rss1, 1024)
        regs = len(kl.events_since(0, "registered", resource=RES))
        figure("%d kubelet restarts: registrations" % self.N,
               "%d (a restart whose signals straddle the new start registers twice)" % regs)
        self.assertGreaterEqual(regs, self.N + 1)
        # the last restart's straggling signal may restart it once more: let
        # that registration land before asking
        wait_for(lambda: kl.command("allocate %s a" % RES).get("ok"), T,
                 "an allocation to succeed after the last restart")
        self.assertServes(kl, pl)


class KubeletFaults(Base):
    def test_kubelet_sigkill_midstream(self):
        kl, pl = self.registered_plugin()
        lmark = pl.log_mark()
        kl.signal(signal.SIGKILL)  # its stream dies with it; kubelet.sock stays, dead
        pl.wait_log(r"restarting: the kubelet's ListAndWatch stream ended", T, since=lmark)
        # Register to the dead socket fails and is retried; a new kubelet comes.
        kl2 = self.kubelet()
        t0 = time.time_ns()
        # since=0: the plugin may register before the new kubelet prints "ready"
        kl2.wait_event("registered", T, since=0, resource=RES)
        figure("kubelet SIGKILLed, new kubelet started -> registered",
               "%.1f ms" % ((time.time_ns() - t0) / 1e6))
        kl2.wait_event("devices", T, since=0, resource=RES)
        self.assertServes(kl2, pl)

    def test_dir_deleted_and_recreated(self):
        kl, pl = self.registered_plugin()
        lmark = pl.log_mark()
        st_dir = os.stat(self.dir)
        # The kubelet's socket, ours, our lock: all gone (the plugin may re-create
        # files while the directory is being emptied: remove until it is gone).
        wait_for(lambda: (shutil.rmtree(self.dir, True), not os.path.exists(self.dir))[1], T,
                 "the directory to be removed")
        pl.wait_log(r"restarting: ", T, since=lmark)
        # retried while the dir is missing (the lock or the socket fails first,
        # depending on whether the restart began before the lock file went):
        # either way the log names the directory and says it is missing
        pl.wait_log(r"the device-plugin directory %s does not exist" % re.escape(self.dir), T,
                    since=lmark)
        back = pl.log_mark()
        os.mkdir(self.dir, stat.S_IMODE(st_dir.st_mode))
        t0 = time.monotonic()
        # The plugin watches the parent while its directory is missing: it
        # starts again as soon as the directory is back ("is back"), not at its
        # next backoff step (unless that step comes first: "serving on").
        pl.wait_log(r"is back: starting|serving on", T, since=back)
        mark = kl.mark()
        kl.ok("restart")  # a kubelet that re-creates kubelet.sock in the new directory
        kl.wait_event("registered", T, since=mark, resource=RES)
        figure("device-plugin dir deleted and re-created -> registered",
               "%.0f ms after the re-creation" % ((time.monotonic() - t0) * 1e3))
        kl.wait_event("devices", T, since=mark, resource=RES)
        self.assertServes(kl, pl)
        self.assertTrue(stat.S_ISSOCK(os.lstat(pl.socket).st_mode))
        # The lock is back in the new directory: a second instance is still refused.
        wait_for(lambda: os.path.exists(pl.lock), T, "the lock file in the new directory")
        second = self.start_test_plugin("--devices", "x", name="second")
        self.assertNotEqual(second.wait_exit(T), 0)
        self.assertIn("another instance", second.log_text())
        self.assertServes(kl, pl)

    def test_sigterm_while_register_hangs(self):
        # A kubelet that accepts the Register call and never answers it.
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        srv.bind(self.path("kubelet.sock"))
        srv.listen(8)
        conns = []
        got = []

        def serve():
            srv.settimeout(0.2)
            while not stop.is_set():
                try:
                    c, _ = srv.accept()
                except socket.timeout:
                    continue
                except OSError:
                    return
                c.settimeout(0.2)
                conns.append(c)
                while not stop.is_set():
                    try:
                        d = c.recv(65536)
                    except socket.timeout:
                        continue
                    except OSError:
                        break
                    if not d:
                        break
                    got.append(d)

        stop = threading.Event()
        th = threading.Thread(target=serve, daemon=True)
        th.start()
        self.addCleanup(lambda: (stop.set(), srv.close(), [c.close() for c in conns]))
        pl = self.start_test_plugin("--devices", "a")
        wait_for(lambda: RES.encode() in b"".join(got), T,
                 "the Register request at the fake kubelet")
        time.sleep(0.2)
        t0 = time.monotonic()
        pl.proc.send_signal(signal.SIGTERM)
        rc = pl.wait_exit(T)
        figure("SIGTERM while Register hangs: exit after", "%.1f ms"
               % ((time.monotonic() - t0) * 1e3))
        self.assertEqual(rc, 0, pl.diagnostics())
        self.assertFalse(os.path.exists(pl.socket), "socket left behind")
        self.assertFalse(os.path.exists(pl.lock), "lock file left behind")

    def test_sigkill_leaves_no_stale_lock(self):
        kl, pl = self.registered_plugin()
        pl.signal(signal.SIGKILL)
        pl.wait_exit(T)
        # The socket and the lock file stay behind; the flock went with the process.
        self.assertTrue(os.path.exists(pl.socket))
        self.assertTrue(os.path.exists(pl.lock))
        mark = kl.mark()
        pl2 = self.start_test_plugin("--devices", "a,b,c", name="again")
        kl.wait_event("registered", T, since=mark, resource=RES)
        kl.wait_event("devices", T, since=mark, resource=RES)
        self.assertServes(kl, pl2)
        with open(pl2.lock) as f:
            self.assertEqual(f.read().strip(), str(pl2.proc.pid))


class BadClients(Base):
    def _after(self, kl, pl, lmark):
        self.assertServes(kl, pl)
        self.assertNoRestart(pl, lmark)
        # The kubelet's stream is untouched: a change still reaches it, both ways.
        mark = kl.mark()
        self.assertEqual(pl.command("health b Unhealthy"), {RES: 0})
        kl.wait_event(lambda e: e.get("event") == "devices" and e.get("resource") == RES
                      and health_of(e).get("b") == "Unhealthy", T, since=mark)
        self.assertEqual(pl.command("health b Healthy"), {RES: 0})
        kl.wait_event(lambda e: e.get("event") == "devices" and e.get("resource") == RES
                      and health_of(e).get("b") == "Healthy", T, since=mark)

    def test_garbage_and_wrong_prefaces(self):
        kl, pl = self.registered_plugin()
        lmark = pl.log_mark()
        rnd = random.Random(8)
        inputs = {
            "64 KiB of random bytes": bytes(rnd.getrandbits(8) for _ in range(65536)),
            "HTTP/1.1": b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n",
            "a truncated preface": rawh2.PREFACE[:10],
            "a wrong preface": b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n" + b"\0" * 64,
            "the preface and a broken frame": rawh2.PREFACE + b"\xff" * 9 + b"x" * 100,
            "DATA on stream 0": rawh2.PREFACE + rawh2.frame(rawh2.SETTINGS, 0, 0) +
                                rawh2.frame(rawh2.DATA, 0, 0, b"x" * 10),
        }
        for what, data in inputs.items():
            with self.subTest(what):
                c = rawh2.RawH2(pl.socket, preface=False)
                try:
                    try:
                        c.send(data)
                    except rawh2.Closed:
                        # The server hung up before it had read everything:
                        # the outcome expected, only sooner.
                        self.assertNotEqual(what, "a truncated preface")
                    if what != "a truncated preface":
                        self.assertTrue(c.wait_closed(T), "%s: connection not closed" % what)
                finally:
                    c.close()
        self._after(kl, pl, lmark)

    def test_half_open_and_200_idle_connections(self):
        kl, pl = self.registered_plugin()
        lmark = pl.log_mark()
        pid = pl.proc.pid
        fd0 = settled_fds(pid)
        # Half-open: a request whose message never ends, END_STREAM never sent.
        half = rawh2.RawH2(pl.socket)
        half.send(half.request(1, rawh2.ALLOCATE, rawh2.allocate(["a"])[:3], end_stream=False,
                               announced=100))
        # 200 idle connections (nothing sent), 20 with only the preface.
        idle = []
        for i in range(200):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(pl.socket)
            idle.append(s)
        for i in range(20):
            idle.append(rawh2.RawH2(pl.socket))
        wait_for(lambda: fd_count(pid) >= fd0 + 221, T, "the plugin to accept 221 connections "
                 "(%d fds before)" % fd0)
        figure("221 idle/half-open connections: plugin fds", "%d -> %d" % (fd0, fd_count(pid)))
        self._after(kl, pl, lmark)
        # A kubelet restart while they are all open: registered again.
        mark = kl.mark()
        kl.ok("restart")
        kl.wait_event("registered", T, since=mark, resource=RES)
        self.assertServes(kl, pl)
        half.close()
        for s in idle:
            s.close()
        # A plugin quicker than the emulator's restart has its fresh socket deleted by it and
        # registers once more ("replaced"): the emulator keeps the first client's connection,
        # as a kubelet keeps a replaced endpoint's, and the plugin one fd for it.
        stale = len(kl.events_since(mark, event="replaced"))
        wait_for(lambda: fd_count(pid) <= fd0 + stale, T,
                 "the plugin's fds to go back to %d (+%d for the kubelet's stale clients)"
                 % (fd0, stale))

    def test_out_of_fds(self):
        # The plugin limited to 48 fds, 80 clients: accept() fails with EMFILE
        # while they are connected. No busy loop, no flood of log lines, and
        # the kubelet is served again once they go.
        kl = self.kubelet()
        argv = ["--device-plugin-dir", self.dir, "--resource", RES, "--devices", "a,b,c"]
        pl = self.start_proc(PluginProc(["prlimit", "--nofile=48:48", binary("kdp-test-plugin")]
                                        + argv, "test-plugin-48-fds", self.dir, socket_for(RES),
                                        [RES]))
        kl.wait_event("registered", T, resource=RES)
        kl.wait_event("devices", T, resource=RES)
        conns = []
        for _ in range(80):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.setblocking(False)
            try:
                s.connect(pl.socket)
            except BlockingIOError:
                pass
            conns.append(s)
        pl.wait_log(r"accept: Too many open files", T)
        lmark = pl.log_mark()

        def cpu_ticks():
            with open("/proc/%d/stat" % pl.proc.pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return int(fields[11]) + int(fields[12])
        c0 = cpu_ticks()
        time.sleep(1.0)
        ticks = cpu_ticks() - c0
        warnings = pl.count_log(r"accept: ", lmark)
        figure("out of fds (EMFILE) for 1 s", "%d accept warnings, %d CPU ticks (of %d)"
               % (warnings, ticks, os.sysconf("SC_CLK_TCK")))
        self.assertLessEqual(warnings, 20, "accept() retried in a loop")
        if not SANITIZED:
            self.assertLess(ticks, os.sysconf("SC_CLK_TCK") // 4, "busy loop while out of fds")
        for s in conns:
            s.close()
        self.assertServes(kl, pl)
        mark = kl.mark()
        kl.ok("restart")
        kl.wait_event("registered", T, since=mark, resource=RES)

    def test_hung_callbacks(self):
        kl, pl = self.registered_plugin("--callback-timeout-ms", "300", "--slow-ms", "4000",
                                        "--devices", "slow,a,b,c")
        lmark = pl.log_mark()
        # Three: under the cap of stuck callbacks (4), past which calls are
        # refused (integration_mistakes, StuckCallbacks).
        pending = [kl.command_async("allocate %s slow" % RES) for _ in range(3)]
        # While three callbacks hang, the stream flows and later calls are served.
        mark = kl.mark()
        self.assertEqual(pl.command("health c Unhealthy"), {RES: 0})
        kl.wait_event("devices", T, since=mark, resource=RES)
        for cid, m in pending:
            self.assertFailed(kl.wait_reply(cid, m, T), "DeadlineExceeded")
        self.assertServes(kl, pl, "b")
        self.assertNoRestart(pl, lmark)
        # SIGTERM with callbacks still hung: a clean exit all the same.
        cid, m = kl.command_async("allocate %s slow" % RES)
        time.sleep(0.1)
        self.assertStopsCleanly(pl)

    def test_never_reading_client_bounded(self):
        kl, pl = self.registered_plugin()
        lmark = pl.log_mark()
        pid = pl.proc.pid
        # A client that opens ListAndWatch and never reads a byte.
        c = rawh2.RawH2(pl.socket)
        c.send(c.request(1, rawh2.LIST_AND_WATCH, b""))
        time.sleep(0.2)
        rss0 = rss_kib(pid)
        n, m = 1500, 250  # 1500 tables of 250 devices: about 15 KiB per message, 22 MiB in all
        mark = kl.mark()
        self.assertEqual(pl.command("churn %d %d 300" % (n, m), timeout=120), {RES: 0})
        # The kubelet gets the last table (every device Healthy again after 6 flips).
        want_last = all(((n // m) + (1 if k < n % m else 0)) % 2 == 0 for k in range(m))
        self.assertTrue(want_last)

        def last_all_healthy():
            evs = kl.events_since(mark, "devices", resource=RES)
            return evs and evs[-1]["n"] == m and evs[-1]["healthy"] == m
        wait_for(last_all_healthy, 60, "the kubelet to get the last table")
        rss1 = rss_kib(pid)
        figure("never-reading ListAndWatch client, %d tables of %d devices" % (n, m),
               "%d updates reached the kubelet" % len(kl.events_since(mark, "devices")))
        self.assertMemoryBounded("never-reading ListAndWatch client", rss0, rss1, 4096)
        r = self.assertOk(kl.command("allocate %s churn-device-%035d" % (RES, 0)))
        self.assertEqual(len(r["container_responses"]), 1)
        self.assertNoRestart(pl, lmark)
        c.close()

    def test_many_large_unfinished_messages(self):
        kl, pl = self.registered_plugin()
        lmark = pl.log_mark()
        pid = pl.proc.pid
        rss0 = rss_kib(pid)
        conns = []
        offered = 0
        for _ in range(6):
            c = rawh2.RawH2(pl.socket)
            conns.append(c)
            # The server's SETTINGS (1 MiB stream windows) and connection WINDOW_UPDATE first.
            c.read_until(lambda f: f.type == rawh2.WINDOW_UPDATE and f.stream == 0, T)
            for i in range(15):
                sid = 1 + 2 * i
                body = rawh2.grpc_frame(b"", announced=4 * MIB - 1) + b"\0" * (MIB - 64 * 1024)
                out = rawh2.frame(rawh2.HEADERS, rawh2.END_HEADERS, sid,
                                  rawh2.grpc_headers(rawh2.ALLOCATE))
                for o in range(0, len(body), 16384):
                    out += rawh2.frame(rawh2.DATA, 0, sid, body[o:o + 16384])
                try:
                    c.send(out)
                    offered += len(body)
                except rawh2.Closed:
                    break
        time.sleep(0.5)
        rss1 = rss_kib(pid)
        figure("unfinished 4 MiB messages", "%d MiB offered on 6 connections x 15 streams"
               % (offered // MIB))
        self.assertMemoryBounded("unfinished 4 MiB messages", rss0, rss1, 24 * 1024)
        self._after(kl, pl, lmark)
        for c in conns:
            c.close()

    def test_unread_responses_bounded(self):
        """50 connections x 999 Allocates, and not a byte of the answers
        read (no WINDOW_UPDATE either): the responses queued for one
        connection stop at 8 MiB and for the whole server at 16 MiB
        (max_conn_unsent, max_unsent): past them the streams are reset, and
        the connection holding the most is closed. Before the bound every
        answer stayed queued."""
        kl, pl = self.registered_plugin()
        lmark = pl.log_mark()
        pid = pl.proc.pid
        rss0 = rss_kib(pid)
        conns = []
        req = rawh2.allocate(["a", "b", "c"])
        for _ in range(50):
            c = rawh2.RawH2(pl.socket)
            conns.append(c)
            c.read_until(lambda f: f.type == rawh2.WINDOW_UPDATE and f.stream == 0, T)
            out = b"".join(c.request(1 + 2 * i, rawh2.ALLOCATE, req) for i in range(999))
            try:
                c.send(out)
            except (rawh2.Closed, TimeoutError):
                pass
        time.sleep(1.0)
        rss1 = rss_kib(pid)
        figure("unread Allocate responses", "50 connections x 999 Allocates: RSS %+d KiB"
               % (rss1 - rss0))
        self.assertMemoryBounded("unread Allocate responses", rss0, rss1, 32 * 1024)
        pl.wait_log(r"a peer does not read its responses", T, since=lmark)
        for c in conns:
            c.close()
        self._after(kl, pl, lmark)

    def test_oversized_and_undecodable_messages(self):
        import grpc  # python3-grpcio: a real gRPC client for the statuses
        kl, pl = self.registered_plugin()
        lmark = pl.log_mark()
        ch = grpc.insecure_channel("unix:" + pl.socket,
                                   options=[("grpc.max_send_message_length", -1)])
        self.addCleanup(ch.close)
        alloc = ch.unary_unary(rawh2.ALLOCATE)
        cases = [
            ("4 MiB + 1", b"\0" * (4 * MIB + 1), grpc.StatusCode.RESOURCE_EXHAUSTED),
            ("not protobuf", b"\xff" * 100, grpc.StatusCode.INVALID_ARGUMENT),
            ("no container", b"", grpc.StatusCode.INVALID_ARGUMENT),
            ("3.9 MiB of unknown IDs", rawh2.allocate(["x" * 200] * 19000),
             grpc.StatusCode.INVALID_ARGUMENT),
        ]
        for what, msg, code in cases:
            with self.subTest(what):
                with self.assertRaises(grpc.RpcError) as cm:
                    alloc(msg, timeout=T)
                self.assertEqual(cm.exception.code(), code, cm.exception.details())
        self._after(kl, pl, lmark)

    def test_header_floods_and_rapid_reset(self):
        kl, pl = self.registered_plugin()
        lmark = pl.log_mark()
        # A header block in 40 CONTINUATION frames (nghttp2 refuses more than 8).
        c = rawh2.RawH2(pl.socket)
        block = rawh2.header_block([("x-pad-%d" % i, "v" * 1000) for i in range(600)])
        frames = rawh2.frame(rawh2.HEADERS, 0, 1, block[:16000])
        for o in range(16000, len(block), 16000):
            last = o + 16000 >= len(block)
            frames += rawh2.frame(rawh2.CONT, rawh2.END_HEADERS if last else 0, 1,
                                  block[o:o + 16000])
        try:
            c.send(frames)
        except rawh2.Closed:
            pass
        self.assertTrue(c.wait_closed(T), "CONTINUATION flood: connection not closed")
        c.close()
        # A 16 KiB :path and 100 headers of 100 bytes in one HEADERS frame: answered.
        c = rawh2.RawH2(pl.socket)
        hb = rawh2.grpc_headers("/" + "p" * 16000)[:0] + rawh2.header_block(
            [(":method", "POST"), (":scheme", "http"), (":path", "/" + "p" * 8000),
             ("content-type", "application/grpc")] +
            [("x-h%d" % i, "v" * 100) for i in range(60)])
        c.send(rawh2.frame(rawh2.HEADERS, rawh2.END_HEADERS | rawh2.END_STREAM, 1, hb))
        got = c.read_until(lambda f: f.stream == 1 and (f.end_stream or f.type == rawh2.RST_STREAM)
                           or f.type == rawh2.GOAWAY, T)
        # an answer on its stream (the method is unknown), the connection kept
        self.assertEqual((got[-1].stream, got[-1].type), (1, rawh2.HEADERS), got)
        c.close()
        # Rapid reset: 3000 streams opened and cancelled at once.
        c = rawh2.RawH2(pl.socket)
        out = b""
        for i in range(3000):
            sid = 1 + 2 * i
            out += rawh2.frame(rawh2.HEADERS, rawh2.END_HEADERS, sid,
                               rawh2.grpc_headers(rawh2.LIST_AND_WATCH))
            out += rawh2.frame(rawh2.RST_STREAM, 0, sid, struct.pack(">I", 8))
        try:
            c.send(out)
            closed = c.wait_closed(T)
        except rawh2.Closed:
            closed = True
        self.assertTrue(closed, "rapid reset: the connection was not ended")
        c.close()
        # More streams than allowed (1000 per connection): the rest refused.
        c = rawh2.RawH2(pl.socket)
        c.read_until(lambda f: f.type == rawh2.SETTINGS and not f.flags & rawh2.ACK, T)
        c.read(0.1)  # acks the server's SETTINGS, so its stream limit applies
        n = 1100
        out = b"".join(c.request(1 + 2 * i, rawh2.LIST_AND_WATCH, b"") for i in range(n))
        c.send(out)
        data_streams, refused = set(), set()
        deadline = time.monotonic() + T
        closed = False
        while len(data_streams) + len(refused) < n and time.monotonic() < deadline:
            try:
                frames = c.read(0.2)
            except rawh2.Closed:
                closed = True
                break
            for f in frames:
                if f.type == rawh2.DATA:
                    data_streams.add(f.stream)
                elif f.type == rawh2.RST_STREAM:
                    refused.add(f.stream)
        figure("1100 ListAndWatch streams on one connection",
               "%d served, %d refused%s" % (len(data_streams), len(refused),
                                            ", then the connection was closed" if closed else ""))
        self.assertLessEqual(len(data_streams), 1000)
        self.assertTrue(closed or len(data_streams) + len(refused) == n)
        c.close()
        self._after(kl, pl, lmark)


class Load(Base):
    def test_allocates(self):
        kl, pl = self.registered_plugin()
        pid = pl.proc.pid
        n = ALLOCATES
        window = 256
        c = rawh2.RawH2(pl.socket)
        c.read_until(lambda f: f.type == rawh2.WINDOW_UPDATE and f.stream == 0, T)
        msgs = [rawh2.grpc_frame(rawh2.allocate(ids)) for ids in (["a"], ["b", "c"], ["c"])]
        hb = rawh2.grpc_headers(rawh2.ALLOCATE)
        hdr = struct.pack(">BHB", len(hb) >> 16, len(hb) & 0xFFFF, rawh2.HEADERS)
        pack = struct.pack
        sent = done = ok = 0
        open_streams = {}
        rss_warm = fd_warm = None
        t0 = time.monotonic()
        while done < n:
            batch = []
            while sent < n and sent - done < window:
                sid = 1 + 2 * sent
                m = msgs[sent % 3]
                batch.append(hdr + pack(">BI", rawh2.END_HEADERS, sid) + hb)
                batch.append(pack(">BHBBI", len(m) >> 16, len(m) & 0xFFFF, rawh2.DATA,
                                  rawh2.END_STREAM, sid) + m)
                open_streams[sid] = False
                sent += 1
            if batch:
                c.send(b"".join(batch))
            for f in c.read(T):
                if f.type == rawh2.DATA:
                    open_streams[f.stream] = True
                elif f.end_stream or f.type == rawh2.RST_STREAM:
                    ok += open_streams.pop(f.stream)
                    done += 1
                    if done == n // 10:
                        rss_warm, fd_warm = rss_kib(pid), fd_count(pid)
                elif f.type == rawh2.GOAWAY:
                    raise AssertionError("GOAWAY after %d Allocates" % done)
        dt = time.monotonic() - t0
        rss_end = rss_kib(pid)
        fd_end = wait_for(lambda: fd_count(pid) <= fd_warm and fd_count(pid), T,
                          "the fds to settle at %d or less (leak?)" % fd_warm)
        figure("%d Allocates on one connection (%d in flight)" % (n, window),
               "%.1f s, %.0f/s; the plugin's fds %d after the first 10%%, %d at the end"
               % (dt, n / dt, fd_warm, fd_end))
        self.assertEqual(ok, n, "Allocates answered without a response message")
        self.assertMemoryBounded("%d Allocates (from the first 10%% on)" % n, rss_warm, rss_end,
                                 2048)
        c.close()
        self.assertServes(kl, pl)


class Secure(Base):
    def test_socket_and_lock_owner_only_whatever_the_umask(self):
        old = os.umask(0)
        try:
            kl, pl = self.registered_plugin()
        finally:
            os.umask(old)
        for path in (pl.socket, pl.lock):
            st = os.lstat(path)
            self.assertEqual(stat.S_IMODE(st.st_mode), 0o600, "%s: %o" % (path, st.st_mode))
            self.assertEqual(st.st_uid, os.getuid())
        self.assertTrue(stat.S_ISSOCK(os.lstat(pl.socket).st_mode))

    def _refused_then_serves(self, make, what):
        kl = self.kubelet()
        sock = self.path(socket_for(RES))
        target = make(sock)
        pl = self.start_test_plugin("--devices", "a,b,c")
        pl.wait_log(r"exists and is not a socket: refusing to replace it", T)
        time.sleep(0.5)
        self.assertTrue(os.path.islink(sock) or os.path.isfile(sock), "%s was replaced" % what)
        kl.assert_no_event("registered", within=0.2, since=0)
        if target:
            self.assertTrue(os.path.exists(target), "%s: the target was touched" % what)
        os.unlink(sock)
        kl.wait_event("registered", 3 * T, resource=RES)
        self.assertServes(kl, pl)
        return pl

    def test_symlink_to_socket_refused(self):
        other = self.path("elsewhere")
        os.mkdir(other)
        live = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        live.bind(os.path.join(other, "live.sock"))
        live.listen(1)
        self.addCleanup(live.close)

        def make(sock):
            os.symlink(os.path.join(other, "live.sock"), sock)
            return os.path.join(other, "live.sock")
        self._refused_then_serves(make, "a symlink to a socket")
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect(os.path.join(other, "live.sock"))  # the other socket still works
        c.close()

    def test_symlink_to_file_and_dangling_and_regular_file_refused(self):
        victim = self.file("victim.txt")
        with open(victim, "w") as f:
            f.write("precious\n")
        for what, make in (
            ("a symlink to a file", lambda s: (os.symlink(victim, s), victim)[1]),
            ("a dangling symlink", lambda s: (os.symlink(self.path("nowhere"), s), None)[1]),
            ("a regular file", lambda s: (open(s, "w").close(), None)[1]),
        ):
            with self.subTest(what):
                pl = self._refused_then_serves(make, what)
                self.assertStopsCleanly(pl)
                for p in list(self.procs):
                    p.stop()
                self.procs.clear()
                with open(victim) as f:
                    self.assertEqual(f.read(), "precious\n")

    def test_bad_names_refused_and_escaped(self):
        cases = [
            ("resource", "example.com/a/b", r"invalid resource name"),
            ("resource", "example.com/..", r"invalid resource name"),
            ("resource", "example.com/" + "x" * 64, r"invalid resource name"),
            ("resource", "evil.com/x\nE0101 00:00:00.000000 1 forged.go:1] forged", r"invalid resource name"),
            ("socket", "../escape.sock", r"invalid socket name"),
            ("socket", "..", r"invalid socket name"),
            ("socket", "a/b.sock", r"invalid socket name"),
            ("socket", "s" * 101, r"invalid socket name"),
            ("socket", "kubelet.sock", r"invalid socket name"),
            ("socket", "x\nE0101 00:00:00.000000 1 forged.go:1] forged", r"invalid socket name"),
        ]
        for kind, value, pattern in cases:
            with self.subTest(kind=kind, value=value[:40]):
                args = ["--device-plugin-dir", self.dir, "--devices", "a"]
                args += ["--resource", value] if kind == "resource" else ["--socket", value]
                pl = self.plugin("kdp-test-plugin", args, None, [RES], name="bad-" + kind)
                self.assertNotEqual(pl.wait_exit(T), 0, pl.diagnostics())
                pl.wait_log(pattern, T)
                lines = pl.log_lines()
                self.assertFalse([x for x in lines if x.startswith("E0101")],
                                 "a peer-controlled newline forged a log line: %s" % lines)
                self.assertEqual(os.listdir(self.dir), [], "something was created: %s"
                                 % os.listdir(self.dir))
        # A socket path over 107 bytes: refused with a clear message.
        deep = self.path("d" * 70)
        os.mkdir(deep)
        pl = self.plugin("kdp-test-plugin", ["--device-plugin-dir", deep, "--socket", "s" * 40 + ".sock"],
                         None, [RES], name="long-path")
        self.assertNotEqual(pl.wait_exit(T), 0)
        pl.wait_log(r"too long for a unix socket", T)

    def test_kubelet_message_escaped_in_log(self):
        import grpc
        from concurrent import futures
        forged = "E0101 00:00:00.000000       1 kubelet.go:1] forged line"

        # C0 controls and DEL; NEL (C1), the line separator and the bidi
        # overrides that reorder what a reader sees (U+202E, U+2066)
        hidden = "\u0085x\u2028y\u202eevil\u2066z"

        def register(request, context):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          "no\r\n" + forged + "\x1b[31m\x7f" + hidden)

        srv = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        srv.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(
            "v1beta1.Registration", {"Register": grpc.unary_unary_rpc_method_handler(register)})])
        srv.add_insecure_port("unix:" + self.path("kubelet.sock"))
        srv.start()
        self.addCleanup(srv.stop, None)
        pl = self.start_test_plugin("--devices", "a")
        line = pl.wait_log(r"Register failed: INVALID_ARGUMENT", T)
        self.assertIn("forged line", line)
        for raw in ("\x1b", "\x7f", "\u0085", "\u2028", "\u202e", "\u2066"):
            self.assertNotIn(raw, line)
        # escaped, the same way kdpctl escapes (base/safetext)
        self.assertIn("no\\x0d\\x0aE0101", line)
        self.assertIn("\\x1b[31m\\x7f\\u0085x\\u2028y\\u202eevil\\u2066z", line)
        self.assertFalse([x for x in pl.log_lines() if x.startswith("E0101")],
                         "the kubelet's message forged a log line")
        self.assertStopsCleanly(pl)

    def test_plugin_message_escaped_by_kdpctl(self):
        """kdpctl prints a plugin's error message (grpcio here) escaped as
        the logs are: no control or direction character reaches the
        terminal."""
        import grpc
        from concurrent import futures

        def allocate(request, context):
            context.abort(grpc.StatusCode.INTERNAL,
                          "bad\nkdpctl allocate: OK\x1b]0;title\x07\u202e\u2028\u0085")

        srv = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        srv.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(
            "v1beta1.DevicePlugin", {"Allocate": grpc.unary_unary_rpc_method_handler(allocate)})])
        srv.add_insecure_port("unix:" + self.path("evil.sock"))
        srv.start()
        self.addCleanup(srv.stop, None)
        out = kdptest.run([binary("kdpctl"), "--device-plugin-dir", self.dir, "allocate",
                           "evil.sock", "a"], T)
        self.assertNotEqual(out.returncode, 0, out)
        err = out.stderr
        for raw in ("\n kdpctl", "\x1b", "\x07", "\u202e", "\u2028", "\u0085"):
            self.assertNotIn(raw, err)
        self.assertIn("bad\\x0akdpctl allocate: OK\\x1b]0;title\\x07\\u202e\\u2028\\u0085",
                      err)
        self.assertEqual(err.count("\n"), len(err.splitlines()))


class Valgrind(PluginTest):
    """kdp-example-gopher under valgrind memcheck through a whole lifecycle."""

    TEST_BOUND = 900.0

    def test_gopher_lifecycle(self):
        vg = shutil.which("valgrind")
        self.assertIsNotNone(vg, "valgrind is not installed (apt-get install valgrind)")
        kl = self.kubelet()
        gdir = self.subdir("gophers")
        with open(os.path.join(gdir, "g0"), "w") as f:
            f.write("a gopher\n")
        vlog = self.file("valgrind.log")
        res = "example.com/gopher"
        argv = [vg, "--tool=memcheck", "--leak-check=full",
                "--show-leak-kinds=definite,indirect,possible",
                "--errors-for-leak-kinds=definite,indirect,possible", "--error-exitcode=99",
                "--track-fds=no", "--log-file=" + vlog,
                binary("kdp-example-gopher"), "--device-plugin-dir", self.dir,
                "--devices-dir", gdir, "--resource", res]
        p = self.start_proc(PluginProc(argv, "gopher-valgrind", self.dir, "gopher.sock", [res]))
        slow = 6 * T
        kl.wait_event("registered", slow, resource=res)
        kl.wait_event("devices", slow, resource=res)
        # hot-plug, unplug, health
        mark = kl.mark()
        with open(os.path.join(gdir, "g1"), "w") as f:
            f.write("another\n")
        kl.wait_event(lambda e: e.get("event") == "devices" and e["n"] == 2, slow, since=mark)
        os.unlink(os.path.join(gdir, "g0"))
        kl.wait_event(lambda e: e.get("event") == "devices" and e["n"] == 1, slow, since=mark)
        r = self.assertOk(kl.command("allocate %s g1" % res, slow))
        self.assertEqual(r["container_responses"][0]["envs"], {"GOPHER": "g1"})
        self.assertFailed(kl.command("allocate %s g0" % res, slow), "InvalidArgument", "g0")
        # kubelet restart -> registered again
        mark = kl.mark()
        kl.ok("restart")
        kl.wait_event("registered", slow, since=mark, resource=res)
        kl.wait_event("devices", slow, since=mark, resource=res)
        self.assertOk(kl.command("allocate %s g1" % res, slow))
        rc = p.stop(slow)
        with open(vlog) as f:
            report = f.read()
        summary = [x for x in report.splitlines() if "ERROR SUMMARY" in x or "lost:" in x
                   or "in use at exit" in x]
        figure("valgrind memcheck, gopher lifecycle", "; ".join(
            x.split("== ", 1)[-1].strip() for x in summary))
        self.assertEqual(rc, 0, "exit %s (99: valgrind found errors or leaks)\n%s" % (rc, report[-6000:]))
        self.assertIn("ERROR SUMMARY: 0 errors", report, report[-6000:])


if __name__ == "__main__":
    unittest.main(verbosity=2)
