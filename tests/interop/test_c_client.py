#!/usr/bin/python3
"""kdp's C client (kdp-echo-client) against real gRPC servers: grpc-go
(kdp-go-server) and grpcio (py_server.py).

usage: KDP_BIN_DIR=<build>/bin /usr/bin/python3 test_c_client.py [-v] [Test.name ...]

Each test starts its own server on a socket in its own temp dir and stops it
(SIGTERM, exit 0 expected) at the end.
"""

import json
import os
import re
import sys
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
import kdptest  # noqa: E402
from kdptest import interop  # noqa: E402

CLIENT_TIMEOUT = 15.0

# status=<NAME> code=<n> message=<message> payload=<payload> messages=<n>
# (the message is percent-decoded and may itself contain a newline); a
# streaming call prints "message seq=N" lines before it.
LINE = re.compile(r"status=(\S+) code=(-?\d+) message=(.*) payload=(.*?) messages=(\d+)\n?\Z",
                  re.S)


class Result:
    def __init__(self, r):
        self.rc = r.returncode
        self.elapsed = r.elapsed
        self.raw = r.stdout
        self.seqs = [int(x) for x in re.findall(r"^message seq=(-?\d+)$", r.stdout, re.M)]
        self.cancelled = re.search(r"^cancelled after (\d+)$", r.stdout, re.M)
        m = LINE.search(r.stdout)
        if self.cancelled and not m:
            self.status, self.code, self.message, self.payload = "", -1, "", ""
            self.rc = r.returncode
            return
        if not m:
            raise AssertionError("kdp-echo-client: unparseable output %r (exit %d)\nstderr:\n%s"
                                 % (r.stdout, r.returncode, r.stderr))
        self.status, code, self.message, self.payload, _ = m.groups()
        self.code = int(code)


def echo_client(sock, *args, timeout=CLIENT_TIMEOUT):
    r = kdptest.run([kdptest.binary("kdp-echo-client"), "--socket", sock] + list(args), timeout)
    return Result(r)


class CClientCases:
    """The cases, run against each real server (see subclasses)."""

    TEST_BOUND = 60.0

    def make_server(self):
        raise NotImplementedError

    def setUp(self):
        super().setUp()
        kdptest.binary("kdp-echo-client")
        self.srv = self.start_server(self.make_server())

    def finish(self):
        self.srv.assert_alive()
        self.srv.assert_clean_exit(self)

    def test_ok_with_payload(self):
        r = echo_client(self.srv.socket, "--payload", "hello from kdp")
        self.assertEqual((r.status, r.code, r.payload), ("OK", 0, "hello from kdp"), r.raw)
        self.assertEqual(r.rc, 0)
        # explicit method path too
        r = echo_client(self.srv.socket, "--method", interop.UNARY, "--payload", "again")
        self.assertEqual((r.status, r.code, r.payload, r.rc), ("OK", 0, "again", 0), r.raw)
        self.finish()

    def test_error_status_with_message(self):
        r = echo_client(self.srv.socket, "--payload", "p", "--status-code", "9",
                        "--status-message", interop.TRICKY)
        self.assertEqual((r.status, r.code), ("FAILED_PRECONDITION", 9), r.raw)
        self.assertEqual(r.message, interop.TRICKY)
        self.assertEqual(r.rc, 1)
        self.finish()

    def test_unknown_method(self):
        r = echo_client(self.srv.socket, "--method", "/kdptest.Echo/Nope", "--payload", "p")
        self.assertEqual((r.status, r.code, r.rc), ("UNIMPLEMENTED", 12, 1), r.raw)
        self.finish()

    def test_timeout(self):
        r = echo_client(self.srv.socket, "--delay-ms", "3000", "--timeout-ms", "200",
                        timeout=10.0)
        self.assertEqual((r.status, r.code), ("DEADLINE_EXCEEDED", 4), r.raw)
        self.assertEqual(r.rc, 1)
        self.assertLess(r.elapsed, 2.0, "client took %.2f s to give up a 200 ms deadline"
                        % r.elapsed)
        # the server is fine afterwards
        r = echo_client(self.srv.socket, "--payload", "after")
        self.assertEqual((r.status, r.payload, r.rc), ("OK", "after", 0), r.raw)
        self.finish()


    def test_server_stream(self):
        # kdp__client_stream: every message delivered in order, then OK.
        r = echo_client(self.srv.socket, "--stream", "20", "--interval-ms", "5")
        self.assertEqual((r.status, r.rc), ("OK", 0), r.raw)
        self.assertEqual(r.seqs, list(range(20)), r.raw)
        self.finish()

    def test_server_stream_cancelled_from_callback(self):
        # Cancelling from inside the message callback: the client stops at
        # once and the server sees the stream cancelled.
        before = stats(self.srv.socket)
        r = echo_client(self.srv.socket, "--stream", "0", "--interval-ms", "10",
                        "--cancel-after", "3")
        self.assertEqual(r.rc, 0, r.raw)
        self.assertTrue(r.cancelled, r.raw)
        self.assertEqual(r.seqs, [0, 1, 2], r.raw)
        wait_idle(self.srv.socket, before["streams_cancelled"] + 1)
        self.finish()


def stats(sock):
    r = kdptest.run([kdptest.binary("kdp-go-client"), "-socket", sock, "-scenario", "stats",
               "-timeout", "5s"], 15.0)
    if r.returncode != 0:
        raise AssertionError("stats failed: %s %s" % (r.stdout, r.stderr))
    return json.loads(r.stdout.strip().splitlines()[-1])


def wait_idle(sock, min_cancelled):
    r = kdptest.run([kdptest.binary("kdp-go-client"), "-socket", sock, "-scenario", "wait-idle",
               "-min-cancelled", str(min_cancelled), "-timeout", "5s"], 15.0)
    if r.returncode != 0:
        raise AssertionError("the server never saw the cancel: %s %s" % (r.stdout, r.stderr))


class CClientAgainstGoServer(CClientCases, interop.InteropTest):
    def make_server(self):
        return interop.go_server(self.dir)


class CClientAgainstPyServer(CClientCases, interop.InteropTest):
    def make_server(self):
        return interop.py_server(self.dir)


class CClientNoServer(interop.InteropTest):
    TEST_BOUND = 30.0

    def test_no_server_unavailable(self):
        sock = os.path.join(self.dir, "nobody-home.sock")
        r = echo_client(sock, "--payload", "x", "--timeout-ms", "5000", timeout=10.0)
        self.assertEqual((r.status, r.code), ("UNAVAILABLE", 14), r.raw)
        self.assertEqual(r.rc, 1)
        self.assertLess(r.elapsed, 5.0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
