"""Shared helpers for kdp's interop tests (run with /usr/bin/python3).

- binaries are looked up in $KDP_BIN_DIR (default: <repo>/build/bin); a missing
  binary FAILS the test (it is never skipped);
- echo_pb2 is generated once per process with protoc into a private temp dir;
- every test gets its own temp dir, so no two tests share a socket path;
- every process a test starts is tracked, stopped by the test, and killed by a
  per-test watchdog if the test overruns its time bound.
"""

import faulthandler
import importlib
import os
import queue
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

from kdptest.proc import REPO, binary, log

HERE = os.path.join(REPO, "tests", "interop")  # echo.proto and py_server.py
PYTHON = "/usr/bin/python3"
PROTO = os.path.join(HERE, "echo.proto")
PY_SERVER = os.path.join(HERE, "py_server.py")

UNARY = "/kdptest.Echo/Unary"
STREAM = "/kdptest.Echo/Stream"
STATS = "/kdptest.Echo/Stats"

# The grpc-message used by the status tests: non-ASCII, '%', quotes, newline.
TRICKY = 'bad thing: \u00fc 100% "quoted"\nline2'

SERVER_START_TIMEOUT = 10.0
SERVER_STOP_TIMEOUT = 10.0


# --------------------------------------------------------------------------
# echo_pb2, generated once per process

_pb2 = None
_pb2_dir = None
_pb2_lock = threading.Lock()


def pb2_dir():
    echo_pb2()
    return _pb2_dir


def echo_pb2():
    """Generate echo_pb2 from echo.proto (once per process) and import it."""
    global _pb2, _pb2_dir
    with _pb2_lock:
        if _pb2 is not None:
            return _pb2
        d = tempfile.mkdtemp(prefix="kdp-pb2-")
        _atexit_rmtree(d)
        r = subprocess.run(["protoc", "--proto_path=" + HERE,
                            "--python_out=" + d, PROTO],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=60)
        if r.returncode != 0:
            raise AssertionError("protoc failed (%d): %s"
                                 % (r.returncode, r.stderr.decode(errors="replace")))
        sys.path.insert(0, d)
        _pb2_dir = d
        _pb2 = importlib.import_module("echo_pb2")
        return _pb2


def _atexit_rmtree(d):
    import atexit
    atexit.register(shutil.rmtree, d, True)


# --------------------------------------------------------------------------
# process tracking + watchdog

_procs_lock = threading.Lock()
_procs = set()
_tmpdirs = set()


def _track(p):
    with _procs_lock:
        _procs.add(p)


def _untrack(p):
    with _procs_lock:
        _procs.discard(p)


def _kill_all_tracked():
    with _procs_lock:
        procs = list(_procs)
    for p in procs:
        try:
            if p.poll() is None:
                _sigkill(p)
                p.wait(5)
        except Exception:
            pass


def _sigkill(p):
    """SIGKILL p's whole process group (each child gets its own, so wrapper
    scripts cannot leave grandchildren holding our pipes)."""
    if p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            try:
                p.kill()
            except ProcessLookupError:
                pass


def popen(argv, **kw):
    """subprocess.Popen (in its own process group) that the watchdog knows
    about. End it with reap()/kill() or Server.stop()."""
    log("+ " + " ".join(a if len(a) < 200 else "'<%d chars>'" % len(a)
                        for a in map(shlex.quote, argv)))
    p = subprocess.Popen(argv, start_new_session=True, **kw)
    _track(p)
    return p


def reap(p, timeout=SERVER_STOP_TIMEOUT):
    """Wait for p to exit (bounded); kill it on expiry. Returns (rc, timed_out)."""
    try:
        rc = p.wait(timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        _sigkill(p)
        rc = p.wait(10)
        timed_out = True
    _untrack(p)
    return rc, timed_out


def kill(p):
    """SIGKILL p (if still running) and reap it."""
    if p.poll() is None:
        _sigkill(p)
    return reap(p, 10)[0]


class Watchdog:
    """If a test overruns its bound: kill every tracked process, dump all
    thread stacks and exit the interpreter with status 1 (a hung grpc call
    cannot be interrupted any other way)."""

    def __init__(self, seconds, name):
        self.seconds = seconds
        self.name = name
        self.timer = threading.Timer(seconds, self._fire)
        self.timer.daemon = True

    def start(self):
        self.timer.start()

    def cancel(self):
        self.timer.cancel()

    def _fire(self):
        log("\n*** WATCHDOG: %s exceeded its %.0f s bound; killing children, "
            "dumping stacks, exiting ***" % (self.name, self.seconds))
        _kill_all_tracked()
        for d in list(_tmpdirs):
            shutil.rmtree(d, True)
        try:
            faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        finally:
            os._exit(1)


# --------------------------------------------------------------------------
# run a command to completion, always bounded

def run(cmd, timeout, check_rc=None, input=None):
    """Run cmd (list) with a bound; on expiry kill it and raise AssertionError.
    Returns subprocess.CompletedProcess with str stdout/stderr and an extra
    .elapsed (seconds). check_rc: expected exit code (AssertionError if not)."""
    t0 = time.monotonic()
    p = popen(cmd, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = p.communicate(input=input, timeout=timeout)
    except subprocess.TimeoutExpired:
        _sigkill(p)
        out, err = p.communicate(timeout=10)
        _untrack(p)
        raise AssertionError("%s: timed out after %.1f s (killed)\nstdout:\n%s\nstderr:\n%s"
                             % (" ".join(cmd), timeout, _s(out), _s(err))) from None
    finally:
        if p.poll() is None:
            _sigkill(p)
            p.wait(10)
        _untrack(p)
    r = subprocess.CompletedProcess(cmd, p.returncode, _s(out), _s(err))
    r.elapsed = time.monotonic() - t0
    if out:
        sys.stderr.write(_indent(r.stdout, "  out| "))
    if err:
        sys.stderr.write(_indent(r.stderr, "  err| "))
    sys.stderr.flush()
    if check_rc is not None and r.returncode != check_rc:
        raise AssertionError("%s: exit %d, expected %d\nstdout:\n%s\nstderr:\n%s"
                             % (" ".join(cmd), r.returncode, check_rc, r.stdout, r.stderr))
    return r


def _s(b):
    if b is None:
        return ""
    return b.decode("utf-8", errors="replace") if isinstance(b, bytes) else b


def _indent(text, prefix):
    if len(text) > 4000:
        text = text[:2000] + "\n...[%d chars]...\n" % (len(text) - 4000) + text[-2000:]
    return "".join(prefix + line + "\n" for line in text.splitlines())


# --------------------------------------------------------------------------
# sockets

def socket_listening(path):
    """True once a unix socket bound to path is listening (checks
    /proc/net/unix for the __SO_ACCEPTCON flag so as not to open a connection);
    falls back to 'the socket file exists'."""
    try:
        with open("/proc/net/unix") as f:
            next(f)
            for line in f:
                parts = line.split()
                if len(parts) >= 8 and parts[7] == path:
                    if int(parts[3], 16) & 0x10000:
                        return True
            return False
    except OSError:
        return os.path.exists(path)


def wait_until(pred, timeout, interval=0.02):
    """Poll pred() until truthy or timeout; returns the last value."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v or time.monotonic() >= deadline:
            return v
        time.sleep(interval)


# --------------------------------------------------------------------------
# servers

class Server:
    """A server process on a unix socket. Use as a context manager (or call
    start()/stop()). stop() sends SIGTERM (if still running), waits (bounded;
    SIGKILL + AssertionError on expiry) and returns the exit code."""

    def __init__(self, argv, socket_path, name, workdir, wait_ready_line=False):
        self.argv = argv
        self.socket = socket_path
        self.name = name
        self.workdir = workdir
        self.wait_ready_line = wait_ready_line
        self.proc = None
        self.returncode = None
        self._term_sent = False
        self._out_path = os.path.join(workdir, "%s.stdout" % name)
        self._err_path = os.path.join(workdir, "%s.stderr" % name)

    def stdout(self):
        return _read(self._out_path)

    def stderr(self):
        return _read(self._err_path)

    def start(self):
        with open(self._out_path, "wb") as out, open(self._err_path, "wb") as err:
            self.proc = popen(self.argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err)

        def up():
            if self.proc.poll() is not None:
                return "exited"
            if not socket_listening(self.socket):
                return None
            if self.wait_ready_line and "ready" not in self.stdout():
                return None
            return "up"

        state = wait_until(up, SERVER_START_TIMEOUT)
        if state != "up":
            if self.proc.poll() is None:
                _sigkill(self.proc)
            rc, _ = reap(self.proc, 10)
            raise AssertionError(
                "%s did not come up on %s within %.0f s (%s, exit %s)\nstdout:\n%s\nstderr:\n%s"
                % (self.name, self.socket, SERVER_START_TIMEOUT, state or "timeout",
                   rc, self.stdout(), self.stderr()))
        return self

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def assert_alive(self):
        if not self.alive():
            raise AssertionError("%s died (exit %s)\nstderr:\n%s"
                                 % (self.name, self.proc.returncode, self.stderr()))

    def terminate(self):
        """Send SIGTERM (once) without waiting."""
        if self.alive() and not self._term_sent:
            self._term_sent = True
            self.proc.send_signal(signal.SIGTERM)

    def stop(self, timeout=SERVER_STOP_TIMEOUT):
        """SIGTERM (if running and not sent yet), bounded wait; returns exit
        code. SIGKILL and
        AssertionError if it does not exit in time. Idempotent."""
        if self.proc is None:
            return None
        if self.returncode is not None:
            return self.returncode
        self.terminate()
        rc, timed_out = reap(self.proc, timeout)
        self.returncode = rc
        if timed_out:
            raise AssertionError("%s did not exit within %.0f s of SIGTERM (killed)\nstderr:\n%s"
                                 % (self.name, timeout, self.stderr()))
        return rc

    def assert_clean_exit(self, test):
        """stop() and assert exit 0 and the socket file removed."""
        rc = self.stop()
        test.assertEqual(rc, 0, "%s exited %s on SIGTERM\nstderr:\n%s"
                         % (self.name, rc, self.stderr()[-4000:]))
        test.assertFalse(os.path.exists(self.socket),
                         "%s left its socket %s behind" % (self.name, self.socket))

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        try:
            self.stop()
        except AssertionError:
            if exc[0] is None:
                raise
        return False


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def c_server(workdir, max_recv=None, name="kdp-echo-server"):
    sock = os.path.join(workdir, "c.sock")
    argv = [binary("kdp-echo-server"), "--socket", sock]
    if max_recv is not None:
        argv += ["--max-recv", str(max_recv)]
    return Server(argv, sock, name, workdir)


def go_server(workdir):
    sock = os.path.join(workdir, "go.sock")
    return Server([binary("kdp-go-server"), "-socket", sock], sock, "kdp-go-server",
                  workdir, wait_ready_line=True)


def py_server(workdir):
    sock = os.path.join(workdir, "py.sock")
    return Server([PYTHON, PY_SERVER, "--socket", sock], sock, "py_server", workdir,
                  wait_ready_line=True)


# --------------------------------------------------------------------------
# a background process whose stdout lines we read with a bound

class LineProc:
    """Start a process and read its stdout line by line with timeouts."""

    def __init__(self, argv):
        self.argv = argv
        self.proc = popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE)
        self._q = queue.Queue()
        self._err = []
        self._t_out = threading.Thread(target=self._pump,
                                       args=(self.proc.stdout, self._q.put, True), daemon=True)
        self._t_err = threading.Thread(target=self._pump,
                                       args=(self.proc.stderr, self._err.append, False), daemon=True)
        self._t_out.start()
        self._t_err.start()

    @staticmethod
    def _pump(f, sink, mark_eof):
        for line in iter(f.readline, b""):
            sink(line.decode("utf-8", errors="replace"))
        if mark_eof:
            sink(None)

    def readline(self, timeout):
        """Next stdout line (str, without newline); AssertionError on timeout or EOF."""
        try:
            line = self._q.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError("%s: no output line within %.1f s\nstderr:\n%s"
                                 % (" ".join(self.argv), timeout, self.stderr()))
        if line is None:
            self.proc.wait(5)
            raise AssertionError("%s: exited (%s) before printing a line\nstderr:\n%s"
                                 % (" ".join(self.argv), self.proc.returncode, self.stderr()))
        return line.rstrip("\n")

    def stderr(self):
        return "".join(x for x in self._err if x)

    def kill(self):
        rc = kill(self.proc)
        self._t_out.join(5)
        self._t_err.join(5)
        for f in (self.proc.stdout, self.proc.stderr):
            try:
                f.close()
            except Exception:
                pass
        return rc

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.kill()
        return False


# --------------------------------------------------------------------------
# grpcio helpers (import grpc lazily: only /usr/bin/python3 has it)

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
# base TestCase

class InteropTestCase(unittest.TestCase):
    """Per-test temp dir (self.tmp, removed afterwards) and watchdog."""

    TEST_TIMEOUT = 90.0

    def setUp(self):
        self._watchdog = Watchdog(self.TEST_TIMEOUT, self.id())
        self._watchdog.start()
        self.addCleanup(self._watchdog.cancel)
        # Short prefix: sun_path is limited to 108 bytes.
        self.tmp = tempfile.mkdtemp(prefix="kdp-")
        _tmpdirs.add(self.tmp)
        self.addCleanup(_tmpdirs.discard, self.tmp)
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.t0 = time.monotonic()

    def start_server(self, server):
        """Start a Server and make sure it is stopped when the test ends."""
        self.addCleanup(_stop_quietly, server)
        return server.start()


def _stop_quietly(server):
    try:
        server.stop()
    except AssertionError as e:
        log(str(e))
