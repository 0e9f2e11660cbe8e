#!/usr/bin/python3
"""grpcio (Python) client against kdp's C server (kdp-echo-server).

usage: KDP_BIN_DIR=<build>/bin /usr/bin/python3 test_py_client.py [-v] [Test.name ...]

Each test starts its own kdp-echo-server on a socket in its own temp dir,
drives it directly with grpcio, then checks that the server is still alive,
idle (Stats.active_streams == 0) and exits 0 on SIGTERM with its socket gone.
"""

import os
import queue
import sys
import threading
import time
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
import kdptest  # noqa: E402
from kdptest import interop, wait_for  # noqa: E402

import grpc  # noqa: E402

pb = interop.echo_pb2()
MiB = 1024 * 1024
RPC_TIMEOUT = 10.0

# A client process for the "killed mid-stream" test: opens an endless stream
# and prints each message's seq.  argv: pb2_dir socket
CHILD = r'''
import sys
sys.path.insert(0, sys.argv[1])
import grpc, echo_pb2 as pb
ch = grpc.insecure_channel("unix:" + sys.argv[2])
st = ch.unary_stream("/kdptest.Echo/Stream",
                     request_serializer=pb.EchoRequest.SerializeToString,
                     response_deserializer=pb.EchoReply.FromString)
for r in st(pb.EchoRequest(count=0, interval_ms=50), timeout=60):
    print(r.seq, flush=True)
'''


class PyClientAgainstCServer(interop.InteropTest):
    TEST_BOUND = 90.0

    def setUp(self):
        super().setUp()
        kdptest.binary("kdp-echo-server")

    # -- helpers ---------------------------------------------------------

    def server(self, max_recv=None):
        return self.start_server(interop.c_server(self.dir, max_recv=max_recv))

    def channel(self, srv, options=()):
        ch = interop.channel(srv.socket, options)
        self.addCleanup(ch.close)
        return ch

    def poll_stats(self, srv, pred, what, timeout=5.0):
        """Poll Stats until pred(stats); fail with the last Stats if not."""
        last = [None]

        def check():
            last[0] = interop.get_stats(srv.socket)
            return pred(last[0])

        try:
            wait_for(check, timeout, what, interval=0.05)
        except AssertionError:
            self.fail("server never reached %s within %.0f s; last Stats: {%s}"
                      % (what, timeout, str(last[0]).replace("\n", " ")))
        return last[0]

    def finish(self, srv):
        srv.assert_alive()
        self.poll_stats(srv, lambda s: s.active_streams == 0, "active_streams == 0")
        srv.assert_alive()
        srv.assert_clean_exit(self)

    def assertRpcError(self, fn, code, details=None):
        with self.assertRaises(grpc.RpcError) as cm:
            fn()
        e = cm.exception
        self.assertEqual(e.code(), code, "details: %r" % (e.details(),))
        if details is not None:
            self.assertEqual(e.details(), details)
        return e

    # -- tests -----------------------------------------------------------

    def test_unary(self):
        srv = self.server()
        unary, _, _ = interop.stubs(self.channel(srv))
        r = unary(pb.EchoRequest(payload=b"hello kdp"), timeout=RPC_TIMEOUT)
        self.assertEqual(r.payload, b"hello kdp")
        self.assertEqual(r.request_bytes, 9)
        self.assertEqual(r.authority, "localhost")
        r = unary(pb.EchoRequest(), timeout=RPC_TIMEOUT)  # empty message
        self.assertEqual(r.payload, b"")
        r = unary(pb.EchoRequest(payload=b"a", reply_size=1000), timeout=RPC_TIMEOUT)
        self.assertEqual(r.payload, b"x" * 1000)
        self.assertEqual(r.request_bytes, 1)
        self.finish(srv)

    def test_status(self):
        srv = self.server()
        unary, _, _ = interop.stubs(self.channel(srv))
        self.assertRpcError(
            lambda: unary(pb.EchoRequest(status_code=9, status_message=interop.TRICKY),
                          timeout=RPC_TIMEOUT),
            grpc.StatusCode.FAILED_PRECONDITION, interop.TRICKY)
        self.assertRpcError(
            lambda: unary(pb.EchoRequest(status_code=5, status_message="nope"),
                          timeout=RPC_TIMEOUT),
            grpc.StatusCode.NOT_FOUND, "nope")
        self.assertEqual(unary(pb.EchoRequest(payload=b"ok"), timeout=RPC_TIMEOUT).payload, b"ok")
        self.finish(srv)

    def test_deadline(self):
        srv = self.server()
        unary, _, _ = interop.stubs(self.channel(srv))
        t0 = time.monotonic()
        self.assertRpcError(lambda: unary(pb.EchoRequest(delay_ms=3000), timeout=0.2),
                            grpc.StatusCode.DEADLINE_EXCEEDED)
        elapsed = time.monotonic() - t0
        self.assertLess(elapsed, 2.0, "deadline fired after %.2f s" % elapsed)
        r = unary(pb.EchoRequest(payload=b"after"), timeout=RPC_TIMEOUT)
        self.assertEqual(r.payload, b"after")
        self.finish(srv)

    def test_unknown_method(self):
        srv = self.server()
        ch = self.channel(srv)
        for path in ("/kdptest.Echo/Nope", "/kdptest.Nope/Unary"):
            bad = ch.unary_unary(path, request_serializer=pb.EchoRequest.SerializeToString,
                                 response_deserializer=pb.EchoReply.FromString)
            self.assertRpcError(lambda: bad(pb.EchoRequest(payload=b"x"), timeout=RPC_TIMEOUT),
                                grpc.StatusCode.UNIMPLEMENTED)
        unary, _, _ = interop.stubs(ch)
        self.assertEqual(unary(pb.EchoRequest(payload=b"ok"), timeout=RPC_TIMEOUT).payload, b"ok")
        self.finish(srv)

    def test_oversize(self):
        srv = self.server(max_recv=1048576)
        ch = self.channel(srv, [("grpc.max_send_message_length", 8 * MiB),
                                ("grpc.max_receive_message_length", 8 * MiB)])
        unary, _, _ = interop.stubs(ch)
        self.assertRpcError(lambda: unary(pb.EchoRequest(payload=b"o" * (2 * MiB)),
                                          timeout=RPC_TIMEOUT),
                            grpc.StatusCode.RESOURCE_EXHAUSTED)
        # The channel (and server) must still be usable, also just under the limit.
        self.assertEqual(unary(pb.EchoRequest(payload=b"ok"), timeout=RPC_TIMEOUT).payload, b"ok")
        r = unary(pb.EchoRequest(payload=b"u" * (MiB - 64)), timeout=RPC_TIMEOUT)
        self.assertEqual(r.request_bytes, MiB - 64)
        self.finish(srv)

    def test_big(self):
        srv = self.server()
        ch = self.channel(srv, [("grpc.max_send_message_length", 8 * MiB),
                                ("grpc.max_receive_message_length", 8 * MiB)])
        unary, _, _ = interop.stubs(ch)
        payload = os.urandom(4 * MiB)
        r = unary(pb.EchoRequest(payload=payload), timeout=30.0)
        self.assertEqual(r.request_bytes, len(payload))
        self.assertTrue(r.payload == payload, "4 MiB payload came back different")
        r = unary(pb.EchoRequest(reply_size=4 * MiB), timeout=30.0)
        self.assertEqual(len(r.payload), 4 * MiB)
        self.finish(srv)

    def test_stream_prompt_delivery(self):
        srv = self.server()
        _, stream, _ = interop.stubs(self.channel(srv))
        got = []
        for r in stream(pb.EchoRequest(count=5, interval_ms=200), timeout=RPC_TIMEOUT):
            got.append((r.seq, r.sent_unix_nanos, time.time_ns()))
        self.assertEqual([g[0] for g in got], [0, 1, 2, 3, 4])
        for i, (seq, sent, recv) in enumerate(got):
            self.assertLessEqual(sent, recv, "message %d received before it was sent?" % i)
            if i + 1 < len(got):
                # Causality: message i was in our hands before i+1 was queued,
                # i.e. the server did not hold it back (no buffering/batching).
                self.assertLess(recv, got[i + 1][1],
                                "message %d was delivered only after message %d was queued "
                                "(%.1f ms late)" % (i, i + 1, (recv - got[i + 1][1]) / 1e6))
        self.finish(srv)

    def test_client_cancel_stream(self):
        srv = self.server()
        _, stream, stats = interop.stubs(self.channel(srv))
        call = stream(pb.EchoRequest(count=0, interval_ms=20), timeout=30.0)
        self.assertEqual(next(call).seq, 0)
        self.assertEqual(next(call).seq, 1)
        before = stats(pb.EchoRequest(), timeout=RPC_TIMEOUT)
        self.assertEqual(before.active_streams, 1, str(before))
        call.cancel()
        self.poll_stats(srv, lambda s: s.active_streams == 0
                        and s.streams_cancelled > before.streams_cancelled,
                        "active_streams == 0 and streams_cancelled > %d" % before.streams_cancelled)
        self.finish(srv)

    def test_client_killed_mid_stream(self):
        srv = self.server()
        before = interop.get_stats(srv.socket)
        child = self.start_proc(kdptest.Proc([interop.PYTHON, "-c", CHILD, interop.pb2_dir(),
                                              srv.socket], "stream-client", stdin=False))
        self.assertEqual(child.readline(10.0), "0")
        mid = interop.get_stats(srv.socket)
        self.assertEqual(mid.active_streams, 1, str(mid))
        child.kill()
        self.poll_stats(srv, lambda s: s.active_streams == 0
                        and s.streams_cancelled > before.streams_cancelled
                        and s.connections <= mid.connections - 1,
                        "active_streams == 0, streams_cancelled > %d, connections <= %d"
                        % (before.streams_cancelled, mid.connections - 1))
        self.finish(srv)

    def test_stream_plus_1000_unary_on_one_channel(self):
        srv = self.server()
        ch = self.channel(srv)
        unary, stream, stats = interop.stubs(ch)
        call = stream(pb.EchoRequest(count=0, interval_ms=10), timeout=60.0)
        received = []
        errors = []

        def consume():
            try:
                for r in call:
                    received.append(r.seq)
            except grpc.RpcError as e:
                errors.append(e.code())

        t = threading.Thread(target=consume, daemon=True)
        t.start()
        wait_for(lambda: received, 5.0, "the stream's first message")
        n_before = len(received)
        futs = [unary.future(pb.EchoRequest(payload=b"u%d" % i), timeout=30.0)
                for i in range(1000)]
        for i, f in enumerate(futs):
            self.assertEqual(f.result(timeout=30.0).payload, b"u%d" % i)
        s = stats(pb.EchoRequest(), timeout=RPC_TIMEOUT)
        self.assertEqual(s.active_streams, 1, str(s))
        self.assertEqual(s.connections, 1, "grpcio channel should use one connection: %s" % s)
        self.assertGreaterEqual(s.streams_total, 1001, str(s))
        wait_for(lambda: len(received) > n_before + 2, 5.0,
                 "the stream to go on after the unary burst (it stalled)")
        self.assertEqual(received, list(range(len(received))))
        call.cancel()
        t.join(10.0)
        self.assertFalse(t.is_alive(), "stream iteration did not end after cancel()")
        self.assertEqual(errors, [grpc.StatusCode.CANCELLED])
        self.finish(srv)

    def test_authority_override(self):
        srv = self.server()
        ch = self.channel(srv, [("grpc.default_authority", srv.socket)])
        unary, _, _ = interop.stubs(ch)
        r = unary(pb.EchoRequest(payload=b"a"), timeout=RPC_TIMEOUT)
        self.assertEqual(r.authority, srv.socket)
        self.finish(srv)

    def test_sigterm_with_open_stream(self):
        srv = self.server()
        _, stream, _ = interop.stubs(self.channel(srv))
        call = stream(pb.EchoRequest(count=0, interval_ms=50), timeout=30.0)
        q = queue.Queue()

        def consume():
            try:
                for r in call:
                    q.put(("msg", r.seq))
                q.put(("end", grpc.StatusCode.OK))
            except grpc.RpcError as e:
                q.put(("end", e.code()))

        t = threading.Thread(target=consume, daemon=True)
        t.start()
        self.assertEqual(q.get(timeout=5.0), ("msg", 0))
        srv.terminate()
        end = None
        deadline = time.monotonic() + 10.0
        while end is None:
            try:
                kind, v = q.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                call.cancel()
                self.fail("open stream did not end within 10 s of the server's SIGTERM")
            if kind == "end":
                end = v
        kdptest.log("  open stream ended with %s after SIGTERM" % end)
        self.assertIn(end, (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.OK))
        t.join(5.0)
        srv.assert_clean_exit(self)


if __name__ == "__main__":
    unittest.main(verbosity=2)
