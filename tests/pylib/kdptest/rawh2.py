"""A raw HTTP/2 + gRPC client over a unix socket, Python 3 stdlib only, for
the robustness tests: it sends exactly the frames a test asks for (valid,
half-finished or wrong), and reads the server's frames without decoding
their header blocks (HPACK with Huffman is not needed for what the tests
check: which streams got DATA, END_STREAM, RST_STREAM or GOAWAY).

    from kdptest import rawh2
    c = rawh2.RawH2(path)        # connects, sends the preface + SETTINGS
    c.send(c.request(1, rawh2.ALLOCATE, rawh2.allocate(["a"])))
    frames = c.read_until(lambda f: f.type == rawh2.HEADERS and f.end_stream, 5)
"""

import select
import socket
import struct
import time

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH, PING, GOAWAY, WINDOW_UPDATE, CONT = range(10)
END_STREAM, ACK, END_HEADERS = 0x1, 0x1, 0x4

ALLOCATE = "/v1beta1.DevicePlugin/Allocate"
LIST_AND_WATCH = "/v1beta1.DevicePlugin/ListAndWatch"
OPTIONS = "/v1beta1.DevicePlugin/GetDevicePluginOptions"


# ---- protobuf and gRPC framing ----

def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def ld(field, payload):
    if isinstance(payload, str):
        payload = payload.encode()
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def allocate(*containers):
    """An AllocateRequest with one ContainerAllocateRequest per list of IDs."""
    return b"".join(ld(1, b"".join(ld(1, i) for i in ids)) for ids in containers)


def grpc_frame(msg, announced=None):
    return struct.pack(">BI", 0, len(msg) if announced is None else announced) + msg


# ---- HTTP/2 framing ----

def frame(type_, flags, stream, payload=b""):
    n = len(payload)
    return struct.pack(">BHBBI", n >> 16, n & 0xFFFF, type_, flags, stream & 0x7FFFFFFF) + payload


def _hlen(n):
    if n < 127:
        return bytes([n])
    out = bytes([127])
    n -= 127
    while n >= 128:
        out += bytes([0x80 | (n & 0x7F)])
        n >>= 7
    return out + bytes([n])


def header_block(headers):
    """Literal header fields without indexing, new names, no Huffman."""
    out = b""
    for name, value in headers:
        name = name.encode() if isinstance(name, str) else name
        value = value.encode() if isinstance(value, str) else value
        out += b"\x00" + _hlen(len(name)) + name + _hlen(len(value)) + value
    return out


def grpc_headers(path, timeout=None, extra=()):
    h = [(":method", "POST"), (":scheme", "http"), (":path", path),
         (":authority", "localhost"), ("content-type", "application/grpc"),
         ("te", "trailers")]
    if timeout:
        h.append(("grpc-timeout", timeout))
    return header_block(h + list(extra))


class Frame:
    __slots__ = ("type", "flags", "stream", "payload")

    def __init__(self, type_, flags, stream, payload):
        self.type, self.flags, self.stream, self.payload = type_, flags, stream, payload

    @property
    def end_stream(self):
        return self.type in (DATA, HEADERS) and bool(self.flags & END_STREAM)

    def __repr__(self):
        return "Frame(type=%d flags=%#x stream=%d len=%d)" % (self.type, self.flags,
                                                              self.stream, len(self.payload))


class Closed(Exception):
    """The server closed the connection."""


class RawH2:
    def __init__(self, path, preface=True, settings=b"", connect_timeout=5.0):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.setblocking(False)
        deadline = time.monotonic() + connect_timeout
        while True:
            try:
                self.sock.connect(path)
                break
            except BlockingIOError:  # the listen backlog is full: the server is behind
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.005)
        self.buf = b""
        self.closed = False
        self.goaway = None
        self.consumed = 0  # DATA bytes not yet given back with WINDOW_UPDATE
        if preface:
            self.send(PREFACE + frame(SETTINGS, 0, 0, settings))

    def fileno(self):
        return self.sock.fileno()

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def send(self, data, timeout=10.0):
        """Sends everything (reading and dropping what the server sends
        meanwhile would change what a test measures, so this only waits).
        Closed if the server hung up."""
        view = memoryview(data)
        deadline = time.monotonic() + timeout
        while view:
            try:
                n = self.sock.send(view)
                view = view[n:]
            except BlockingIOError:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("the server stopped reading") from None
                select.select([], [self.sock], [], min(left, 0.5))
            except (BrokenPipeError, ConnectionResetError):
                self.closed = True
                raise Closed() from None

    def request(self, stream, path, msg, end_stream=True, timeout=None, announced=None):
        """HEADERS + one DATA frame carrying the gRPC-framed msg (announced:
        the length written in the 5-byte prefix, if not len(msg))."""
        body = grpc_frame(msg, announced)
        out = frame(HEADERS, END_HEADERS, stream, grpc_headers(path, timeout))
        for i in range(0, max(len(body), 1), 16384):
            last = i + 16384 >= len(body)
            out += frame(DATA, END_STREAM if (last and end_stream) else 0, stream,
                         body[i:i + 16384])
        return out

    def _parse(self):
        frames = []
        while len(self.buf) >= 9:
            n = self.buf[0] << 16 | self.buf[1] << 8 | self.buf[2]
            if len(self.buf) < 9 + n:
                break
            t, fl, sid = self.buf[3], self.buf[4], struct.unpack(">I", self.buf[5:9])[0] & 0x7FFFFFFF
            f = Frame(t, fl, sid, self.buf[9:9 + n])
            self.buf = self.buf[9 + n:]
            if t == SETTINGS and not fl & ACK:
                self._queue_ack = True
            if t == DATA:
                self.consumed += n
            if t == GOAWAY:
                self.goaway = f
            frames.append(f)
        return frames

    _queue_ack = False

    def read(self, timeout=0.0):
        """The frames that arrived within timeout (at least one read attempt).
        Answers SETTINGS with an ACK and gives DATA bytes back to the
        connection window. Raises Closed at EOF."""
        r, _, _ = select.select([self.sock], [], [], timeout)
        if not r:
            return []
        chunks = []
        while True:
            try:
                d = self.sock.recv(1 << 20)
            except BlockingIOError:
                break
            except ConnectionResetError:
                d = b""
            if not d:
                self.closed = True
                if not chunks:
                    raise Closed()
                break
            chunks.append(d)
        self.buf += b"".join(chunks)
        frames = self._parse()
        out = b""
        if self._queue_ack:
            self._queue_ack = False
            out += frame(SETTINGS, ACK, 0)
        if self.consumed >= 32768:
            out += frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", self.consumed))
            self.consumed = 0
        if out and not self.closed:
            try:
                self.send(out)
            except Closed:
                pass
        return frames

    def read_until(self, pred, timeout=10.0):
        """Frames up to and including the first one that satisfies pred;
        TimeoutError if none does within timeout."""
        got = []
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no matching frame within %.1f s; got %r" % (timeout, got[-10:]))
            for f in self.read(min(left, 0.5)):
                got.append(f)
                if pred(f):
                    return got

    def wait_closed(self, timeout=10.0):
        """True once the server has closed the connection (frames dropped)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                self.read(min(0.5, deadline - time.monotonic()))
            except Closed:
                return True
        return False
