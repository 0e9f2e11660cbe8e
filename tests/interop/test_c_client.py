#!/usr/bin/python3
"""kdp's C client (kdp-echo-client) against real gRPC servers: grpc-go
(kdp-go-server) and grpcio (py_server.py).

usage: KDP_BIN_DIR=<build>/bin /usr/bin/python3 test_c_client.py [-v] [Test.name ...]

Each test starts its own server on a socket in its own temp dir and stops it
(SIGTERM, exit 0 expected) at the end.
"""

import os
import re
import sys
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kdp_interop as K  # noqa: E402

CLIENT_TIMEOUT = 15.0

# status=<NAME> code=<n> message=<message> payload=<payload>
# (the message is percent-decoded and may itself contain a newline)
LINE = re.compile(r"\Astatus=(\S+) code=(-?\d+) message=(.*) payload=(.*?)\n?\Z", re.S)


class Result:
    def __init__(self, r):
        self.rc = r.returncode
        self.elapsed = r.elapsed
        self.raw = r.stdout
        m = LINE.match(r.stdout)
        if not m:
            raise AssertionError("kdp-echo-client: unparseable output %r (exit %d)\nstderr:\n%s"
                                 % (r.stdout, r.returncode, r.stderr))
        self.status, code, self.message, self.payload = m.groups()
        self.code = int(code)


def echo_client(sock, *args, timeout=CLIENT_TIMEOUT):
    r = K.run([K.binary("kdp-echo-client"), "--socket", sock] + list(args), timeout)
    return Result(r)


class CClientCases:
    """The cases, run against each real server (see subclasses)."""

    TEST_TIMEOUT = 60.0

    def make_server(self):
        raise NotImplementedError

    def setUp(self):
        super().setUp()
        K.binary("kdp-echo-client")
        self.srv = self.start_server(self.make_server())

    def finish(self):
        self.srv.assert_alive()
        self.srv.assert_clean_exit(self)

    def test_ok_with_payload(self):
        r = echo_client(self.srv.socket, "--payload", "hello from kdp")
        self.assertEqual((r.status, r.code, r.payload), ("OK", 0, "hello from kdp"), r.raw)
        self.assertEqual(r.rc, 0)
        # explicit method path too
        r = echo_client(self.srv.socket, "--method", K.UNARY, "--payload", "again")
        self.assertEqual((r.status, r.code, r.payload, r.rc), ("OK", 0, "again", 0), r.raw)
        self.finish()

    def test_error_status_with_message(self):
        r = echo_client(self.srv.socket, "--payload", "p", "--status-code", "9",
                        "--status-message", K.TRICKY)
        self.assertEqual((r.status, r.code), ("FAILED_PRECONDITION", 9), r.raw)
        self.assertEqual(r.message, K.TRICKY)
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


class CClientAgainstGoServer(CClientCases, K.InteropTestCase):
    def make_server(self):
        return K.go_server(self.tmp)


class CClientAgainstPyServer(CClientCases, K.InteropTestCase):
    def make_server(self):
        return K.py_server(self.tmp)


class CClientNoServer(K.InteropTestCase):
    TEST_TIMEOUT = 30.0

    def test_no_server_unavailable(self):
        sock = os.path.join(self.tmp, "nobody-home.sock")
        r = echo_client(sock, "--payload", "x", "--timeout-ms", "5000", timeout=10.0)
        self.assertEqual((r.status, r.code), ("UNAVAILABLE", 14), r.raw)
        self.assertEqual(r.rc, 1)
        self.assertLess(r.elapsed, 5.0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
