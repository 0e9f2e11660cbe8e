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
from kdptest import interop as K  # noqa: E402

SCENARIO_TIMEOUT = 30.0


class GoClientAgainstCServer(K.InteropTestCase):
    TEST_TIMEOUT = 120.0

    def setUp(self):
        super().setUp()
        self.go_client = K.binary("kdp-go-client")
        K.binary("kdp-echo-server")

    # -- helpers ---------------------------------------------------------

    def server(self, max_recv=None):
        return self.start_server(K.c_server(self.tmp, max_recv=max_recv))

    def go(self, srv, scenario, *extra, timeout=SCENARIO_TIMEOUT, rc=0):
        # kdp-go-client bounds itself by -timeout (+2 s watchdog); we kill it
        # a little later than that.
        r = K.run([self.go_client, "-socket", srv.socket, "-scenario", scenario,
                   "-timeout", "%ds" % int(timeout - 5)] + list(extra),
                  timeout, check_rc=rc)
        srv.assert_alive()
        return r

    def finish(self, srv, min_cancelled=None):
        """Server still alive and idle, then a clean SIGTERM exit."""
        srv.assert_alive()
        extra = ["-min-cancelled", str(min_cancelled)] if min_cancelled else []
        self.go(srv, "wait-idle", *extra, timeout=20.0)
        srv.assert_alive()
        srv.assert_clean_exit(self)

    # -- scenarios -------------------------------------------------------

    def test_unary_dial_unix(self):
        srv = self.server()
        self.go(srv, "unary", "-dial", "unix", "-expect-authority", "localhost")
        self.go(srv, "stats")
        self.finish(srv)

    def test_unary_dial_legacy(self):
        srv = self.server()
        self.go(srv, "unary", "-dial", "legacy", "-expect-authority", srv.socket)
        self.finish(srv)

    def test_status(self):
        srv = self.server()
        self.go(srv, "status")
        self.finish(srv)

    def test_deadline(self):
        srv = self.server()
        self.go(srv, "deadline")
        self.finish(srv)

    def test_unknown_method(self):
        srv = self.server()
        self.go(srv, "unknown")
        self.finish(srv)

    def test_oversize(self):
        srv = self.server(max_recv=1048576)
        self.go(srv, "oversize")
        # The connection-level rejection must not have broken the server.
        self.go(srv, "unary")
        self.finish(srv)

    def test_big(self):
        srv = self.server()
        self.go(srv, "big", timeout=60.0)
        self.finish(srv)

    def test_stream(self):
        srv = self.server()
        self.go(srv, "stream")
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
        print("\n[bench] " + r.stdout.strip().replace("\n", "\n[bench] "), flush=True)
        self.finish(srv)

    def test_client_killed_mid_stream(self):
        srv = self.server()
        with K.LineProc([self.go_client, "-socket", srv.socket, "-scenario", "hold"]) as hold:
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
