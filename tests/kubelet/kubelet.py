"""Harness for kdp-test-kubelet, the kubelet emulator (tests/kubelet/main.go).
Python 3 stdlib only; run tests with /usr/bin/python3.

    from kubelet import Kubelet, JsonProc, binary

    with Kubelet(None, tmpdir) as kl:            # bin dir: None = $KDP_BIN_DIR
        ... start the plugin under test on tmpdir ...
        reg = kl.wait_event("registered", resource="example.com/dev")
        r = kl.command("allocate example.com/dev dev0,dev1")
        assert r["ok"], r
        kl.command("restart")
        kl.wait_event("stream_end", timeout=5)

Every wait is bounded; a failed wait raises AssertionError listing the recent
events and the emulator's stderr. The process always gets SIGTERM on exit of
the context (then SIGKILL of its process group if it does not exit in time).

Emulator CLI:
    kdp-test-kubelet -dir DIR [-legacy] [-dial unix|legacy]
                     [-rpc-timeout 60s] [-dial-timeout 10s]
  -legacy       kubelet <= 1.24: answers Register first, then dials and uses
                the options of the RegisterRequest (never calls
                GetDevicePluginOptions by itself). Default: kubelet >= 1.25,
                dials and calls GetDevicePluginOptions BEFORE answering.
  -dial unix    target unix://PATH, :authority "localhost" (default);
  -dial legacy  target PATH + custom dialer, :authority = the socket path.

Events (one JSON object per stdout line; all have "event" and "t_ns" =
time.Now().UnixNano(), comparable with time.time_ns()):
  ready          socket, dir, legacy, dial, pid, removed (stale sockets)
  registered     resource, endpoint, version, options{pre_start_required,
                 get_preferred_allocation_available}, options_source
                 ("rpc"|"request"), request_options (null if absent),
                 register_ns (Register arrived), dial_us, legacy
  rejected       resource, endpoint, version, error, register_ns  (Register
                 answered with that error: bad version, bad name, dial or
                 GetDevicePluginOptions failure)
  connect_failed (-legacy only: Register was accepted, the dial failed later)
  replaced       resource, old_endpoint, endpoint (the old connection is kept,
                 as the kubelet does)
  devices        resource, endpoint, current, devices[{id, health, numa[]}],
                 healthy, unhealthy, n, bytes, seq (per resource, 1-based)
  stream_end     resource, endpoint, error, code, current, marked_unhealthy,
                 reason ("stream": the stream ended by itself; "restart",
                 "stop-server", "exit": the emulator dropped the connection)
  restart        phase "begin" | "done" (done: removed[] socket names)
  state          resources[...] (the "list" command)
  reply          cmd, id, ok, elapsed_us, and response{...} (protobuf JSON,
                 proto field names, unpopulated fields included) or
                 code/message; RPC commands also carry resource, endpoint
  exit           reason

Commands (stdin lines; an optional last word "#ID" is echoed as "id"):
  allocate RES ids[;ids...]   one AllocateRequest, one container per group
  prestart RES id,id
  preferred RES available=a,b [must=c] size=N
  options RES                 a fresh GetDevicePluginOptions
  restart | stop-server | start-server | list | quit
Reply codes besides gRPC's: NotRegistered, EndpointStopped, Usage, Internal.
"""

import collections
import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

START_TIMEOUT = 10.0
STOP_TIMEOUT = 10.0


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def default_bin_dir():
    return os.environ.get("KDP_BIN_DIR") or os.path.join(REPO, "build", "bin")


def binary(name, directory=None):
    """Absolute path of a binary; AssertionError (never a skip) if missing."""
    d = directory or default_bin_dir()
    path = os.path.join(d, name)
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise AssertionError("required binary %r not found in %s (set KDP_BIN_DIR)" % (name, d))
    return path


def _matcher(pred, fields):
    if pred is None:
        name = None
    elif isinstance(pred, str):
        name = pred
    elif callable(pred):
        name = None
    else:
        raise TypeError("pred must be an event name, a callable or None")

    def match(ev):
        if name is not None and ev.get("event") != name:
            return False
        if callable(pred) and not isinstance(pred, str) and not pred(ev):
            return False
        return all(ev.get(k) == v for k, v in fields.items())
    return match


def _describe(pred, fields):
    d = pred if isinstance(pred, str) else getattr(pred, "__name__", repr(pred))
    if fields:
        d = "%s %s" % (d, fields)
    return d


class JsonProc:
    """A child process that prints one JSON event per stdout line.

    It runs in its own process group with stdin a pipe; stdout events are
    collected by a reader thread, stderr into a bounded buffer. Non-JSON
    stdout lines are kept as {"event": "raw", "line": ...}."""

    name = "process"

    def __init__(self, argv, name=None, env=None):
        self.argv = list(argv)
        if name:
            self.name = name
        self.env = env
        self.proc = None
        self.returncode = None
        self._events = []
        self._cond = threading.Condition()
        self._eof = False
        self._cursor = 0
        self._stderr = collections.deque(maxlen=400)
        self._threads = []
        self._stdin_lock = threading.Lock()

    # -- lifecycle ---------------------------------------------------------

    def start(self, ready=None, timeout=START_TIMEOUT):
        log("+ " + " ".join(self.argv))
        self.proc = subprocess.Popen(
            self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, start_new_session=True, env=self.env)
        for fn in (self._read_stdout, self._read_stderr):
            t = threading.Thread(target=fn, name="%s-%s" % (self.name, fn.__name__), daemon=True)
            t.start()
            self._threads.append(t)
        if ready:
            try:
                self.wait_event(ready, timeout)
            except AssertionError:
                self.stop()
                raise
        return self

    def _read_stdout(self):
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", errors="replace").rstrip("\n")
            if not line:
                continue
            try:
                ev = json.loads(line)
                if not isinstance(ev, dict):
                    raise ValueError
            except ValueError:
                ev = {"event": "raw", "line": line}
            with self._cond:
                self._events.append(ev)
                self._cond.notify_all()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def _read_stderr(self):
        for raw in self.proc.stderr:
            self._stderr.append(raw.decode("utf-8", errors="replace").rstrip("\n"))

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig):
        if self.alive():
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass

    def stop(self, timeout=STOP_TIMEOUT):
        """SIGTERM, wait (bounded), then SIGKILL the process group. Returns
        the exit code (negative: killed by that signal). Idempotent."""
        if self.proc is None:
            return None
        if self.returncode is not None:
            return self.returncode
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                log("%s: no exit %.0f s after SIGTERM: SIGKILL" % (self.name, timeout))
        # SIGKILL the group: the child if it is still there, and anything it
        # left behind (it is the group leader).
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait(10)
        for t in self._threads:
            t.join(5)
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                f.close()
            except (OSError, ValueError):
                pass
        self.returncode = self.proc.returncode
        return self.returncode

    def __enter__(self):
        if self.proc is None:
            self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    # -- input -------------------------------------------------------------

    def send(self, line):
        with self._stdin_lock:
            try:
                self.proc.stdin.write((line.rstrip("\n") + "\n").encode())
                self.proc.stdin.flush()
            except (BrokenPipeError, ValueError) as e:
                raise AssertionError("%s: cannot write %r: %s%s"
                                     % (self.name, line, e, self.diagnostics())) from None

    # -- events ------------------------------------------------------------

    def events(self):
        with self._cond:
            return list(self._events)

    def mark(self):
        """A position in the event history, for events_since()/wait_event(since=)."""
        with self._cond:
            return len(self._events)

    def events_since(self, mark, pred=None, **fields):
        m = _matcher(pred, fields)
        with self._cond:
            return [e for e in self._events[mark:] if m(e)]

    def stderr(self):
        return "\n".join(self._stderr)

    def diagnostics(self, n=25):
        evs = self.events()[-n:]
        rc = self.proc.poll() if self.proc else None
        return ("\n--- %s: last %d events (exit %s) ---\n%s\n--- stderr ---\n%s"
                % (self.name, len(evs), rc, "\n".join(json.dumps(e, sort_keys=True) for e in evs),
                   self.stderr()[-4000:]))

    def wait_event(self, pred=None, timeout=10.0, since=None, **fields):
        """The first event after the cursor (or after mark `since`) that
        matches: pred = event name, callable(ev) -> bool, or None; plus
        field=value equalities. Moves the cursor past it. AssertionError on
        timeout or if the process exits first."""
        m = _matcher(pred, fields)
        deadline = time.monotonic() + timeout
        with self._cond:
            i = self._cursor if since is None else since
            while True:
                while i < len(self._events):
                    ev = self._events[i]
                    i += 1
                    if m(ev):
                        self._cursor = max(self._cursor, i)
                        return ev
                left = deadline - time.monotonic()
                if self._eof or left <= 0:
                    break
                self._cond.wait(min(left, 0.5))
        why = "exited" if self._eof else "timed out after %.1f s" % timeout
        raise AssertionError("%s: no event %s (%s)%s"
                             % (self.name, _describe(pred, fields), why, self.diagnostics()))

    def assert_no_event(self, pred=None, within=0.5, since=None, **fields):
        """AssertionError if a matching event shows up within `within` s."""
        start = self.mark() if since is None else since
        time.sleep(within)
        got = self.events_since(start, pred, **fields)
        if got:
            raise AssertionError("%s: unexpected event %s: %s%s"
                                 % (self.name, _describe(pred, fields), got[0], self.diagnostics()))


class Kubelet(JsonProc):
    """kdp-test-kubelet on `dir`: Kubelet(bin_dir, dir, legacy=False,
    dial=None, rpc_timeout=None, args=()); bin_dir None = $KDP_BIN_DIR.
    Started by `with` (or start()), which waits for "ready"."""

    name = "kubelet"
    _ids = itertools.count(1)

    def __init__(self, bin_dir=None, dir=None, legacy=False, dial=None,
                 rpc_timeout=None, args=(), env=None):
        if dir is None:
            raise TypeError("Kubelet: dir is required")
        argv = [binary("kdp-test-kubelet", bin_dir), "-dir", dir]
        if legacy:
            argv.append("-legacy")
        if dial:
            argv += ["-dial", dial]
        if rpc_timeout is not None:
            argv += ["-rpc-timeout", "%gs" % rpc_timeout]
        argv += list(args)
        super().__init__(argv, env=env)
        self.dir = dir
        self.socket = os.path.join(dir, "kubelet.sock")
        self.ready = None

    def start(self, timeout=START_TIMEOUT):
        super().start()
        try:
            self.ready = self.wait_event("ready", timeout)
        except AssertionError:
            self.stop()
            raise
        # A plugin already waiting registers the moment kubelet.sock exists,
        # possibly before "ready" is printed: later waits must still see it.
        with self._cond:
            self._cursor = 0
        return self

    def command_async(self, line):
        """Send a command tagged with a fresh #ID; returns (id, mark)."""
        cid = "h%d" % next(self._ids)
        mark = self.mark()
        self.send("%s #%s" % (line, cid))
        return cid, mark

    def wait_reply(self, cid, mark=0, timeout=10.0):
        return self.wait_event("reply", timeout, since=mark, id=cid)

    def command(self, line, timeout=10.0):
        """Run one command; returns its reply dict (check r["ok"])."""
        cid, mark = self.command_async(line)
        m = _matcher("reply", {"id": cid})
        deadline = time.monotonic() + timeout
        with self._cond:
            i = mark
            while True:
                while i < len(self._events):
                    ev = self._events[i]
                    i += 1
                    if m(ev):
                        return ev
                left = deadline - time.monotonic()
                if self._eof or left <= 0:
                    break
                self._cond.wait(min(left, 0.5))
        raise AssertionError("kubelet: no reply to %r within %.1f s%s"
                             % (line, timeout, self.diagnostics()))

    def ok(self, line, timeout=10.0):
        """command() that asserts ok:true; returns the reply."""
        r = self.command(line, timeout)
        if not r.get("ok"):
            raise AssertionError("kubelet: %r failed: %s" % (line, r))
        return r

    def state(self, timeout=10.0):
        """{resource name: state dict} from the "list" command."""
        r = self.ok("list", timeout)
        return {x["resource"]: x for x in r["resources"]}
