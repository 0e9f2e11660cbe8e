"""Processes for kdp's process-level tests: where the binaries are, a
process with a bounded start and stop whose stdout is a stream of JSON
events (JsonProc), and what a sanitizer prints. Python 3 stdlib only.

Binaries are looked up in $KDP_BIN_DIR (default: <repo>/build/bin); a missing
one FAILS the test (AssertionError), it is never skipped.
"""

import collections
import json
import os
import signal
import subprocess
import sys
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

START_TIMEOUT = 10.0
STOP_TIMEOUT = 10.0

# What ASan/LSan/UBSan/TSan print when they find something.
SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                   "WARNING: ThreadSanitizer")


def sanitizer_report(text):
    """True if text holds a sanitizer's report."""
    return any(m in text for m in SANITIZER_MARKS)


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def bin_dir():
    return os.environ.get("KDP_BIN_DIR") or os.path.join(REPO, "build", "bin")


def binary(name, directory=None):
    """Absolute path of a binary; AssertionError (never a skip) if missing."""
    d = directory or bin_dir()
    path = os.path.abspath(os.path.join(d, name))
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
