#!/usr/bin/python3
"""grpcio implementation of kdptest.Echo (tests/interop/echo.proto), used as
a real-gRPC peer for kdp's client.

usage: /usr/bin/python3 py_server.py --socket PATH [--max-recv BYTES]

Removes a stale socket, prints "ready" once serving, and on SIGTERM/SIGINT
stops (cancelling open calls), removes its socket and exits 0.

Unary: after delay_ms (abandoned early if the call is cancelled), fails with
status_code/status_message if status_code != 0, else replies with the payload
(or reply_size bytes of 'x'), request_bytes and the :authority it saw.
Stream: count messages (0 = until cancelled), interval_ms apart, first at once.
Stats: active_streams / streams_cancelled / streams_total (grpcio does not
expose connections: always 0).
"""

import argparse
import os
import signal
import sys
import threading
import time
from concurrent import futures

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from kdptest import interop  # noqa: E402

import grpc  # noqa: E402

pb = interop.echo_pb2()

_CODES = {c.value[0]: c for c in grpc.StatusCode}


class Counters:
    def __init__(self):
        self.lock = threading.Lock()
        self.active = 0
        self.cancelled = 0
        self.total = 0


C = Counters()


class Tracked:
    """Counts one call in Stats; the call counts as cancelled unless
    finish() was called before it terminated."""

    def __init__(self, context):
        self.ok = False
        self._ended = False
        with C.lock:
            C.active += 1
            C.total += 1
        if not context.add_callback(self._end):
            self._end()

    def finish(self):
        self.ok = True

    def _end(self):
        with C.lock:
            if self._ended:
                return
            self._ended = True
            C.active -= 1
            if not self.ok:
                C.cancelled += 1


def _sleep_while_active(context, seconds):
    """Sleep up to seconds; False if the call stopped being active."""
    end = time.monotonic() + seconds
    while True:
        if not context.is_active():
            return False
        left = end - time.monotonic()
        if left <= 0:
            return True
        time.sleep(min(left, 0.01))


def _authority(context):
    try:
        host = context._rpc_event.call_details.host
        return host.decode("utf-8", "replace") if isinstance(host, bytes) else (host or "")
    except Exception:
        return ""


def unary(req, context):
    t = Tracked(context)
    if req.delay_ms > 0 and not _sleep_while_active(context, req.delay_ms / 1000.0):
        return pb.EchoReply()  # cancelled / deadline: nobody is listening
    if req.status_code != 0:
        t.finish()
        code = _CODES.get(req.status_code, grpc.StatusCode.UNKNOWN)
        context.abort(code, req.status_message)
    payload = b"x" * req.reply_size if req.reply_size > 0 else req.payload
    t.finish()
    return pb.EchoReply(payload=payload, request_bytes=len(req.payload),
                        authority=_authority(context))


def stream(req, context):
    t = Tracked(context)
    seq = 0
    while req.count == 0 or seq < req.count:
        if seq > 0 and not _sleep_while_active(context, req.interval_ms / 1000.0):
            return
        if not context.is_active():
            return
        payload = b"x" * req.reply_size if req.reply_size > 0 else req.payload
        yield pb.EchoReply(payload=payload, seq=seq, sent_unix_nanos=time.time_ns(),
                           request_bytes=len(req.payload), authority=_authority(context))
        seq += 1
    t.finish()


def stats(req, context):
    with C.lock:
        return pb.EchoStats(active_streams=C.active, connections=0,
                            streams_cancelled=C.cancelled, streams_total=C.total)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket", required=True)
    ap.add_argument("--max-recv", type=int, default=16 * 1024 * 1024)
    args = ap.parse_args()

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())

    if os.path.exists(args.socket):
        os.unlink(args.socket)

    handler = grpc.method_handlers_generic_handler("kdptest.Echo", {
        "Unary": grpc.unary_unary_rpc_method_handler(
            unary, request_deserializer=pb.EchoRequest.FromString,
            response_serializer=pb.EchoReply.SerializeToString),
        "Stream": grpc.unary_stream_rpc_method_handler(
            stream, request_deserializer=pb.EchoRequest.FromString,
            response_serializer=pb.EchoReply.SerializeToString),
        "Stats": grpc.unary_unary_rpc_method_handler(
            stats, request_deserializer=pb.EchoRequest.FromString,
            response_serializer=pb.EchoStats.SerializeToString),
    })
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=64),
        handlers=[handler],
        options=[("grpc.max_receive_message_length", args.max_recv),
                 ("grpc.max_send_message_length", -1)])
    if server.add_insecure_port("unix:" + args.socket) == 0:
        print("py_server: cannot listen on %s" % args.socket, file=sys.stderr)
        return 1
    server.start()
    print("ready", flush=True)

    while not stop.wait(1.0):
        pass
    server.stop(0).wait(10)
    try:
        os.unlink(args.socket)
    except FileNotFoundError:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
