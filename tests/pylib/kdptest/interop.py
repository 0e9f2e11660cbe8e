"""kdp's gRPC client and server against real gRPC peers (tests/interop):
the kdptest.Echo service (tests/interop/echo.proto), its servers and the
grpcio helpers.

- echo_pb2() is generated once per process with protoc into a private temp
  dir (import grpc lazily: only /usr/bin/python3 has it);
- Server: a server process (a Proc) that start() waits for until its unix
  socket listens (and it printed "ready", for the peers that do);
- InteropTest: a ProcTest whose servers are started with start_server().
"""

import atexit
import importlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading

from .proc import REPO, T, Proc, ProcTest, binary, wait_for

INTEROP = os.path.join(REPO, "tests", "interop")
PYTHON = "/usr/bin/python3"
PROTO = os.path.join(INTEROP, "echo.proto")
PY_SERVER = os.path.join(INTEROP, "py_server.py")

UNARY = "/kdptest.Echo/Unary"
STREAM = "/kdptest.Echo/Stream"
STATS = "/kdptest.Echo/Stats"

# The grpc-message used by the status tests: non-ASCII, '%', quotes, newline.
TRICKY = 'bad thing: \u00fc 100% "quoted"\nline2'

SERVER_START_TIMEOUT = 10.0


# --------------------------------------------------------------------------
# echo_pb2, generated once per process

_pb2 = None
_pb2_dir = None
_pb2_lock = threading.Lock()


def pb2_dir():
    """The directory echo_pb2.py is in (for a child's sys.path)."""
    echo_pb2()
    return _pb2_dir


def echo_pb2():
    """Generates echo_pb2 from echo.proto (once per process) and imports it."""
    global _pb2, _pb2_dir
    with _pb2_lock:
        if _pb2 is not None:
            return _pb2
        d = tempfile.mkdtemp(prefix="kdp-pb2-")
        atexit.register(shutil.rmtree, d, True)
        r = subprocess.run(["protoc", "--proto_path=" + INTEROP, "--python_out=" + d, PROTO],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        if r.returncode != 0:
            raise AssertionError("protoc failed (%d): %s"
                                 % (r.returncode, r.stderr.decode(errors="replace")))
        sys.path.insert(0, d)
        _pb2_dir = d
        _pb2 = importlib.import_module("echo_pb2")
        return _pb2


# --------------------------------------------------------------------------
# servers

def socket_listening(path):
    """True once a unix socket bound to path is listening (checks
    /proc/net/unix for the __SO_ACCEPTCON flag so as not to open a
    connection); falls back to 'the socket file exists'. kdp binds at
    DIR/.NAME.PID.N and renames the file to path once it listens: such a
    listening address with path present counts too."""
    d, base = os.path.split(path)
    hidden = os.path.join(d, "." + base + ".")
    try:
        with open("/proc/net/unix") as f:
            next(f)
            for line in f:
                parts = line.split()
                if len(parts) < 8 or not int(parts[3], 16) & 0x10000:
                    continue
                if parts[7] == path:
                    return True
                if parts[7].startswith(hidden) and \
                        parts[7][len(hidden):].replace(".", "").isdigit() and os.path.exists(path):
                    return True
            return False
    except OSError:
        return os.path.exists(path)


class Server(Proc):
    """A server process on the unix socket `socket`. start() returns once
    it listens (and printed "ready" if wait_ready_line); AssertionError
    (the process killed) if it exits first or takes longer than
    SERVER_START_TIMEOUT."""

    def __init__(self, argv, socket, name, wait_ready_line=False):
        super().__init__(argv, name=name, stdin=False)
        self.socket = socket
        self.wait_ready_line = wait_ready_line

    def start(self):
        super().start()

        def up():
            if not self.alive():
                return "exited"
            if not socket_listening(self.socket):
                return None
            if self.wait_ready_line and "ready" not in self.lines():
                return None
            return "up"
        try:
            state = wait_for(up, SERVER_START_TIMEOUT, "%s to listen on %s"
                             % (self.name, self.socket))
        except AssertionError:
            state = "timeout"
        if state != "up":
            rc = self.kill()
            raise AssertionError("%s did not come up on %s within %.0f s (%s, exit %s)%s"
                                 % (self.name, self.socket, SERVER_START_TIMEOUT, state, rc,
                                    self.diagnostics()))
        return self

    def assert_alive(self):
        if not self.alive():
            raise AssertionError("%s died (exit %s)%s"
                                 % (self.name, self.proc.returncode, self.diagnostics()))

    def assert_clean_exit(self, test):
        """stop() (SIGTERM): it exits 0 within the bound and removes its socket."""
        rc = self.stop()
        test.assertFalse(self.killed, "%s did not exit within %.0f s of SIGTERM (killed)%s"
                         % (self.name, T, self.diagnostics()))
        test.assertEqual(rc, 0, "%s exited %s on SIGTERM%s" % (self.name, rc, self.diagnostics()))
        test.assertFalse(os.path.exists(self.socket),
                         "%s left its socket %s behind" % (self.name, self.socket))


def c_server(workdir, max_recv=None):
    """kdp-echo-server (kdp's C server) on workdir/c.sock."""
    sock = os.path.join(workdir, "c.sock")
    argv = [binary("kdp-echo-server"), "--socket", sock]
    if max_recv is not None:
        argv += ["--max-recv", str(max_recv)]
    return Server(argv, sock, "kdp-echo-server")


def go_server(workdir):
    """kdp-go-server (grpc-go) on workdir/go.sock."""
    sock = os.path.join(workdir, "go.sock")
    return Server([binary("kdp-go-server"), "-socket", sock], sock, "kdp-go-server",
                  wait_ready_line=True)


def py_server(workdir):
    """py_server.py (grpcio) on workdir/py.sock."""
    sock = os.path.join(workdir, "py.sock")
    return Server([PYTHON, PY_SERVER, "--socket", sock], sock, "py_server",
                  wait_ready_line=True)


# --------------------------------------------------------------------------
# grpcio

def grpc():
    import grpc as g
    return g


def channel(sock_path, options=()):
    return grpc().insecure_channel("unix:" + sock_path, options=list(options))


def stubs(ch):
    """(unary, stream, stats) multi-callables on a channel."""
    pb = echo_pb2()
    unary = ch.unary_unary(UNARY, request_serializer=pb.EchoRequest.SerializeToString,
                           response_deserializer=pb.EchoReply.FromString)
    stream = ch.unary_stream(STREAM, request_serializer=pb.EchoRequest.SerializeToString,
                             response_deserializer=pb.EchoReply.FromString)
    stats = ch.unary_unary(STATS, request_serializer=pb.EchoRequest.SerializeToString,
                           response_deserializer=pb.EchoStats.FromString)
    return unary, stream, stats


def get_stats(sock_path, timeout=5.0):
    """One Stats call on a fresh channel (closed afterwards)."""
    with channel(sock_path) as ch:
        return stubs(ch)[2](echo_pb2().EchoRequest(), timeout=timeout)


# --------------------------------------------------------------------------

class InteropTest(ProcTest):
    """ProcTest whose servers are started with start_server()."""

    TEST_BOUND = 90.0

    def start_server(self, server):
        """Starts a Server (stopped when the test ends); returns it once it listens."""
        return self.start_proc(server)
