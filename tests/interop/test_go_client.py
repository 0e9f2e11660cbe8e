#!/usr/bin/python3
"""grpc-go client (kdp-go-client) against kdp's C server (kdp-echo-server).

usage: KDP_BIN_DIR=<build>/bin /usr/bin/python3 test_go_client.py [-v] [Test.name ...]

Each test starts its own kdp-echo-server on a socket in its own temp dir,
runs kdp-go-client scenarios against it, then checks that the server is
still alive, has no active streams left (kdp-go-client -scenario wait-idle)
and exits 0 on SIGTERM with its socket removed.
"""

import json
import os
import sys
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
import kdptest  # noqa: E402
from kdptest import interop  # noqa: E402

SCENARIO_TIMEOUT = 30.0


class GoClientAgainstCServer(interop.InteropTest):
    TEST_BOUND = 120.0

    def setUp(self):
        super().setUp()
        self.go_client = kdptest.binary("kdp-go-client")
        kdptest.binary("kdp-echo-server")

    # -- helpers ---------------------------------------------------------

    def server(self, max_recv=None):
        return self.start_server(interop.c_server(self.dir, max_recv=max_recv))

    def go(self, srv, scenario, *extra, timeout=SCENARIO_TIMEOUT):
        """Runs a kdp-go-client scenario, which must pass: exit 0 and a last
        line {"scenario": SCENARIO, "ok": true, ...} (stats and wait-idle:
        the server's Stats). Returns that line."""
        # kdp-go-client bounds itself by -timeout (+2 s watchdog); we kill it
        # a little later than that.
        r = kdptest.run([self.go_client, "-socket", srv.socket, "-scenario", scenario,
                         "-timeout", "%ds" % int(timeout - 5)] + list(extra),
                        timeout, check_rc=0)
        srv.assert_alive()
        lines = r.stdout.strip().splitlines()
        self.assertTrue(lines, "%s printed nothing" % scenario)
        res = json.loads(lines[-1])
        res["stdout"] = r.stdout
        if scenario not in ("stats", "wait-idle"):
            self.assertEqual((res.get("scenario"), res.get("ok")), (scenario, True), r.stdout)
        return res

    def finish(self, srv, min_cancelled=None):
        """Server still alive and idle, then a clean SIGTERM exit."""
        srv.assert_alive()
        extra = ["-min-cancelled", str(min_cancelled)] if min_cancelled else []
        idle = self.go(srv, "wait-idle", *extra, timeout=20.0)
        self.assertEqual((idle["ok"], idle["active_streams"]), (True, 0), idle)
        if min_cancelled:
            self.assertGreaterEqual(idle["streams_cancelled"], min_cancelled, idle)
        srv.assert_alive()
        srv.assert_clean_exit(self)

    # -- scenarios -------------------------------------------------------

    def test_unary_dial_unix(self):
        srv = self.server()
        r = self.go(srv, "unary", "-dial", "unix", "-expect-authority", "localhost")
        self.assertEqual((r["authority"], r["dial"]), ("localhost", "unix"), r)
        st = self.go(srv, "stats")
        self.assertGreaterEqual(st["streams_total"], 1, st)  # the unary call
        self.assertEqual(st["active_streams"], 0, st)
        self.finish(srv)

    def test_unary_dial_legacy(self):
        srv = self.server()
        r = self.go(srv, "unary", "-dial", "legacy", "-expect-authority", srv.socket)
        self.assertEqual((r["authority"], r["dial"]), (srv.socket, "legacy"), r)
        self.finish(srv)

    def test_status(self):
        srv = self.server()
        self.assertEqual(self.go(srv, "status")["code"], "FailedPrecondition")
        self.finish(srv)

    def test_deadline(self):
        srv = self.server()
        r = self.go(srv, "deadline")
        self.assertEqual((r["code"], r["followup"]), ("DeadlineExceeded", "OK"), r)
        self.finish(srv)

    def test_unknown_method(self):
        srv = self.server()
        self.assertEqual(self.go(srv, "unknown")["code"], "Unimplemented")
        self.finish(srv)

    def test_oversize(self):
        srv = self.server(max_recv=1048576)
        r = self.go(srv, "oversize")
        self.assertEqual((r["code"], r["followup"]), ("ResourceExhausted", "OK"), r)
        # The connection-level rejection must not have broken the server.
        self.go(srv, "unary")
        self.finish(srv)

    def test_big(self):
        srv = self.server()
        r = self.go(srv, "big", timeout=60.0)
        self.assertEqual(r["request_bytes"], r["reply_bytes"], r)
        self.finish(srv)

    def test_stream(self):
        srv = self.server()
        r = self.go(srv, "stream")
        self.assertEqual((r["messages"], r["end"]), (20, "OK"), r)
        self.finish(srv)

    def test_cancel(self):
        srv = self.server()
        self.go(srv, "cancel")
        self.finish(srv, min_cancelled=1)

    def test_mixed(self):
        srv = self.server()
        self.go(srv, "mixed", timeout=60.0)
        self.finish(srv)

    def test_bench(self):
        srv = self.server()
        r = self.go(srv, "bench", "-n", "2000", timeout=90.0)
        self.assertEqual(r["calls"], 2000, r)
        print("\n[bench] " + r["stdout"].strip().replace("\n", "\n[bench] "), flush=True)
        self.finish(srv)

    def test_client_killed_mid_stream(self):
        srv = self.server()
        hold = self.start_proc(kdptest.Proc([self.go_client, "-socket", srv.socket,
                                             "-scenario", "hold"], "hold", stdin=False))
        line = hold.readline(10.0)
        try:
            json.loads(line)
        except ValueError:
            self.fail("hold printed a non-JSON line: %r" % line)
        hold.kill()
        # wait-idle -min-cancelled 1 must pass, then the usual clean exit.
        self.finish(srv, min_cancelled=1)


if __name__ == "__main__":
    unittest.main(verbosity=2)
