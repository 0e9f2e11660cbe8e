"""Processes under test: where binaries are, how a process is started,
read, waited on and stopped, how a whole test is bounded.

- binary(name): $KDP_BIN_DIR/name (default <repo>/build/bin); a missing
  binary FAILS the test (AssertionError), it is never skipped.
- Proc: a child in its own process group. Its stdout lines are kept (and
  parsed: a JSON object is an event, any other line the event
  {"event": "raw", "line": ...}), its stderr lines too; both are read by
  threads, so no wait ever blocks on a full pipe. Every wait is bounded.
  stop() = SIGTERM, a bounded wait, then SIGKILL of the process group.
- run(argv, timeout): a command to completion, bounded (killed and an
  AssertionError past the bound).
- ProcTest: a unittest.TestCase with a fresh directory under /tmp (short:
  unix socket paths must stay under 107 bytes), every process it starts
  stopped when it ends (pass or fail), its stderr checked for sanitizer
  reports, and a watchdog: past TEST_BOUND every process still running is
  SIGKILLed (every pending wait then fails at once); if the test is still
  not done HARD_EXIT_GRACE seconds later (a hung in-process call), the
  stacks are dumped and the interpreter exits with status 1.
"""

import faulthandler
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))

T = 10.0                # default bound of one wait
HARD_EXIT_GRACE = 15.0  # after the watchdog's kill, the test has this long to end

# What ASan, LSan, UBSan and TSan print when they find something.
SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                   "WARNING: ThreadSanitizer")


def log(*args):
    """A line for the person reading the test's output (stderr, flushed)."""
    print(*args, file=sys.stderr, flush=True)


def bin_dir():
    """Where the binaries under test are: $KDP_BIN_DIR, else <repo>/build/bin."""
    return os.path.abspath(os.environ.get("KDP_BIN_DIR") or os.path.join(REPO, "build", "bin"))


def binary(name):
    """Absolute path of a binary under test; AssertionError (never a skip) if missing."""
    path = os.path.join(bin_dir(), name)
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise AssertionError("required binary %r not found in %s (set KDP_BIN_DIR)"
                             % (name, bin_dir()))
    return path


def sanitizer_report(text):
    """True if text holds a sanitizer's report."""
    return any(m in text for m in SANITIZER_MARKS)


def proc_status(pid):
    """A process's /proc/PID/status as {field: value text}."""
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


def _status_kib(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError("no %s for pid %d" % (field, pid))


def rss_kib(pid):
    """A process's resident memory now (VmRSS), in KiB."""
    return _status_kib(pid, "VmRSS")


def peak_kib(pid):
    """A process's peak resident memory (VmHWM), in KiB."""
    return _status_kib(pid, "VmHWM")


def wait_for(pred, timeout, what, interval=0.02):
    """Polls pred() until it returns a true value, which it returns;
    AssertionError naming `what` if that takes longer than timeout."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %.1f s waiting for %s" % (timeout, what))
        time.sleep(interval)


def cmdline(argv):
    return " ".join(a if len(a) < 200 else "'<%d chars>'" % len(a)
                    for a in map(shlex.quote, argv))


# ---------------------------------------------------------------------------
# Every child started here, while it runs: what the watchdog kills.

_live_lock = threading.Lock()
_live = set()       # subprocess.Popen
_tmpdirs = set()    # removed by a hard exit


def _track(p):
    with _live_lock:
        _live.add(p)


def _untrack(p):
    with _live_lock:
        _live.discard(p)


def _killpg(p):
    """SIGKILL p's process group (p leads it: children it left go too)."""
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            p.kill()
        except ProcessLookupError:
            pass


def kill_all():
    """SIGKILL every child still running."""
    with _live_lock:
        procs = list(_live)
    for p in procs:
        if p.poll() is None:
            _killpg(p)


class Watchdog:
    """Past `seconds`: kill_all(), so that every pending wait fails at once.
    If it is still running `grace` seconds later (nothing ended it: a hung
    in-process call), dump every thread's stack and exit with status 1."""

    def __init__(self, seconds, name, grace=HARD_EXIT_GRACE):
        self.seconds = seconds
        self.name = name
        self.grace = grace
        self._timer = None
        self._done = threading.Event()

    def start(self):
        self._timer = threading.Timer(self.seconds, self._fire)
        self._timer.daemon = True
        self._timer.start()
        return self

    def cancel(self):
        self._done.set()
        if self._timer:
            self._timer.cancel()

    def _fire(self):
        log("\n*** WATCHDOG: %s exceeded its %.0f s bound: killing its processes ***"
            % (self.name, self.seconds))
        kill_all()
        if self._done.wait(self.grace):
            return
        log("*** WATCHDOG: %s still running %.0f s later: dumping stacks, exiting ***"
            % (self.name, self.grace))
        kill_all()
        for d in list(_tmpdirs):
            shutil.rmtree(d, True)
        try:
            faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        finally:
            os._exit(1)


# ---------------------------------------------------------------------------

def run(argv, timeout=T, check_rc=None, input=None, echo=True, **popen_kw):
    """Runs argv to completion within timeout seconds (past it: SIGKILL of
    its process group and AssertionError). Returns a CompletedProcess with
    text stdout/stderr and .elapsed (seconds). check_rc: the exit code it
    must have (AssertionError otherwise). echo: copy its output to the log.
    popen_kw go to subprocess.Popen (env, cwd, preexec_fn, stderr=STDOUT)."""
    argv = [str(a) for a in argv]
    log("+ " + cmdline(argv))
    popen_kw.setdefault("stderr", subprocess.PIPE)
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                         stdout=subprocess.PIPE, start_new_session=True, **popen_kw)
    _track(p)
    try:
        out, err = p.communicate(input=input.encode() if isinstance(input, str) else input,
                                 timeout=timeout)
    except subprocess.TimeoutExpired:
        _killpg(p)
        out, err = p.communicate(timeout=10)
        raise AssertionError("%s: no exit within %.1f s (killed)\nstdout:\n%s\nstderr:\n%s"
                             % (cmdline(argv), timeout, _text(out), _text(err))) from None
    finally:
        if p.poll() is None:
            _killpg(p)
            p.wait(10)
        _untrack(p)
    r = subprocess.CompletedProcess(argv, p.returncode, _text(out), _text(err))
    r.elapsed = time.monotonic() - t0
    if echo:
        sys.stderr.write(_indent(r.stdout, "  out| ") + _indent(r.stderr, "  err| "))
        sys.stderr.flush()
    if check_rc is not None and r.returncode != check_rc:
        raise AssertionError("%s: exit %d, expected %d\nstdout:\n%s\nstderr:\n%s"
                             % (cmdline(argv), r.returncode, check_rc, r.stdout, r.stderr))
    return r


def _text(b):
    if b is None:
        return ""
    return b.decode("utf-8", errors="replace") if isinstance(b, bytes) else b


def _indent(text, prefix):
    if len(text) > 4000:
        text = text[:2000] + "\n...[%d chars]...\n" % (len(text) - 4000) + text[-2000:]
    return "".join(prefix + line + "\n" for line in text.splitlines())


# ---------------------------------------------------------------------------

def _matcher(pred, fields):
    """An event predicate: pred = an event name, a callable(ev) -> bool or
    None (any event), and field=value equalities."""
    if pred is not None and not isinstance(pred, str) and not callable(pred):
        raise TypeError("pred must be an event name, a callable or None")

    def match(ev):
        if isinstance(pred, str) and ev.get("event") != pred:
            return False
        if callable(pred) and not pred(ev):
            return False
        return all(ev.get(k) == v for k, v in fields.items())
    return match


def _describe(pred, fields):
    d = pred if isinstance(pred, str) else getattr(pred, "__name__", repr(pred))
    return "%s %s" % (d, fields) if fields else d


class Proc:
    """A child process in its own process group (see the module's doc).

    stdout: lines(), mark(), wait_line(), readline(), events(),
      events_since(), wait_event(), assert_no_event(). The waits without
      `since` share a cursor: each returns the first match after the
      previous one's (readline(): the next line) and moves the cursor past
      it; since=MARK (a mark() or 0) searches from there instead.
    stderr: log_lines(), log_mark(), log_text(), count_log(), wait_log()
      (each from line `since`, default 0: stderr is the process's log).
    Every wait fails (AssertionError, with diagnostics()) on timeout or when
    the stream ends first (the process exited)."""

    name = "process"
    stop_last = False  # ProcTest stops the processes that have it after the others

    def __init__(self, argv, name=None, env=None, cwd=None, stdin=True):
        self.argv = [str(a) for a in argv]
        if name:
            self.name = name
        self.env = env
        self.cwd = cwd
        self.want_stdin = stdin
        self.proc = None
        self.returncode = None
        self.killed = False    # stop() had to SIGKILL it
        self.start_ns = None   # time.time_ns() just before the exec
        self._term_sent = False
        self._cond = threading.Condition()
        self._out = []         # stdout lines (empty ones skipped)
        self._events = []      # one event per stdout line
        self._err = []         # stderr lines
        self._out_eof = False
        self._err_eof = False
        self._cursor = 0
        self._threads = []
        self._stdin_lock = threading.Lock()

    # -- lifecycle ---------------------------------------------------------

    def start(self):
        log("+ " + cmdline(self.argv))
        self.start_ns = time.time_ns()
        self.proc = subprocess.Popen(
            self.argv, stdin=subprocess.PIPE if self.want_stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
            env=self.env, cwd=self.cwd)
        _track(self.proc)
        for fn in (self._read_stdout, self._read_stderr):
            t = threading.Thread(target=fn, name="%s-%s" % (self.name, fn.__name__), daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def _read_stdout(self):
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", errors="replace").rstrip("\n")
            if not line:
                continue
            ev = None
            if line.startswith("{"):
                try:
                    ev = json.loads(line)
                except ValueError:
                    pass
            if not isinstance(ev, dict):
                ev = {"event": "raw", "line": line}
            with self._cond:
                self._out.append(line)
                self._events.append(ev)
                self._cond.notify_all()
        with self._cond:
            self._out_eof = True
            self._cond.notify_all()

    def _read_stderr(self):
        for raw in self.proc.stderr:
            line = raw.decode("utf-8", errors="replace").rstrip("\n")
            with self._cond:
                self._err.append(line)
                self._cond.notify_all()
        with self._cond:
            self._err_eof = True
            self._cond.notify_all()

    @property
    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig):
        """Sends sig to the whole process group (if it still runs)."""
        if self.alive():
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass

    def terminate(self):
        """SIGTERM to the process, once, without waiting."""
        if self.alive() and not self._term_sent:
            self._term_sent = True
            try:
                self.proc.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass

    def stop(self, timeout=T):
        """SIGTERM (unless sent already), a bounded wait, then SIGKILL of the
        process group (the child if it is still there and anything it left
        behind); reaps it and closes its pipes once every line is read.
        Returns the exit code (negative: killed by that signal). Idempotent."""
        if self.proc is None:
            return None
        if self.returncode is not None:
            return self.returncode
        if self.proc.poll() is None:
            self.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                log("%s: no exit %g s after SIGTERM: SIGKILL" % (self.name, timeout))
                self.killed = True
        _killpg(self.proc)
        self.proc.wait(10)
        _untrack(self.proc)
        for t in self._threads:
            t.join(5)
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                if f:
                    f.close()
            except (OSError, ValueError):
                pass
        self.returncode = self.proc.returncode
        return self.returncode

    def kill(self):
        """SIGKILL now; reaps it; returns the exit code."""
        if self.alive():
            _killpg(self.proc)
        return self.stop()

    def wait_exit(self, timeout=T):
        """Waits (bounded) for the process to exit by itself, then stop()s
        it (every line read); returns its exit code. AssertionError if it
        is still running after timeout."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError("%s: still running %.1f s later%s"
                                 % (self.name, timeout, self.diagnostics())) from None
        return self.stop()

    def __enter__(self):
        if self.proc is None:
            self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    # -- stdin -------------------------------------------------------------

    def send(self, line):
        """Writes one line to its stdin."""
        with self._stdin_lock:
            try:
                self.proc.stdin.write((line.rstrip("\n") + "\n").encode())
                self.proc.stdin.flush()
            except (BrokenPipeError, ValueError, AttributeError) as e:
                raise AssertionError("%s: cannot write %r: %s%s"
                                     % (self.name, line, e, self.diagnostics())) from None

    # -- stdout ------------------------------------------------------------

    def mark(self):
        """A position in stdout, for since= of the waits and events_since()."""
        with self._cond:
            return len(self._out)

    def lines(self, since=0):
        with self._cond:
            return list(self._out[since:])

    def events(self):
        with self._cond:
            return list(self._events)

    def events_since(self, mark, pred=None, **fields):
        m = _matcher(pred, fields)
        with self._cond:
            return [e for e in self._events[mark:] if m(e)]

    def _wait(self, match, timeout, since, what, advance=True):
        """The first i from the cursor (or `since`) on with match(i) not
        None; returns that value."""
        deadline = time.monotonic() + timeout
        with self._cond:
            i = self._cursor if since is None else since
            while True:
                while i < len(self._out):
                    found = match(i)
                    i += 1
                    if found is not None:
                        if advance:
                            self._cursor = max(self._cursor, i)
                        return found
                left = deadline - time.monotonic()
                if self._out_eof or left <= 0:
                    break
                self._cond.wait(min(left, 0.5))
        why = "it exited" if self._out_eof else "timed out after %.1f s" % timeout
        raise AssertionError("%s: no %s (%s)%s" % (self.name, what, why, self.diagnostics()))

    def wait_event(self, pred=None, timeout=T, since=None, **fields):
        """The first event that matches: pred = an event name, a
        callable(ev) -> bool or None, and field=value equalities."""
        m = _matcher(pred, fields)
        return self._wait(lambda i: self._events[i] if m(self._events[i]) else None,
                          timeout, since, "event %s" % _describe(pred, fields))

    def wait_line(self, pattern, timeout=T, since=None):
        """The first stdout line that matches the regex."""
        rx = re.compile(pattern)
        return self._wait(lambda i: self._out[i] if rx.search(self._out[i]) else None,
                          timeout, since, "line matching %r" % pattern)

    def readline(self, timeout=T):
        """The next stdout line."""
        return self._wait(lambda i: self._out[i], timeout, None, "output line")

    def assert_no_event(self, pred=None, within=0.5, since=None, **fields):
        """AssertionError if a matching event shows up within `within` s
        (from mark `since`, default now)."""
        start = self.mark() if since is None else since
        time.sleep(within)
        got = self.events_since(start, pred, **fields)
        if got:
            raise AssertionError("%s: unexpected event %s: %s%s"
                                 % (self.name, _describe(pred, fields), got[0],
                                    self.diagnostics()))

    # -- stderr ------------------------------------------------------------

    def log_mark(self):
        with self._cond:
            return len(self._err)

    def log_lines(self, since=0):
        with self._cond:
            return list(self._err[since:])

    def log_text(self):
        return "\n".join(self.log_lines())

    def count_log(self, pattern, since=0):
        rx = re.compile(pattern)
        return sum(1 for line in self.log_lines(since) if rx.search(line))

    def wait_log(self, pattern, timeout=T, since=0):
        """The first stderr line from line `since` on that matches the regex."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self._cond:
            i = since
            while True:
                while i < len(self._err):
                    if rx.search(self._err[i]):
                        return self._err[i]
                    i += 1
                left = deadline - time.monotonic()
                if self._err_eof or left <= 0:
                    break
                self._cond.wait(min(left, 0.5))
        why = "it exited" if self._err_eof else "timed out after %.1f s" % timeout
        raise AssertionError("%s: no log line matching %r (%s)%s"
                             % (self.name, pattern, why, self.diagnostics()))

    def sanitizer_report(self):
        """The first sanitizer report in its stderr (40 lines), or None."""
        lines = self.log_lines()
        for i, line in enumerate(lines):
            if sanitizer_report(line):
                return "\n".join(lines[i:i + 40])
        return None

    def diagnostics(self, n=25):
        out = self.lines()[-n:]
        err = self.log_lines()[-60:]
        rc = self.proc.poll() if self.proc else None
        return ("\n--- %s: last %d stdout lines (exit %s) ---\n%s\n"
                "--- %s: stderr (last %d lines) ---\n%s"
                % (self.name, len(out), rc, "\n".join(out), self.name, len(err), "\n".join(err)))


# ---------------------------------------------------------------------------

class ProcTest(unittest.TestCase):
    """A test with its own directory (self.dir), its processes (self.procs,
    every one stopped at the end, pass or fail: those with stop_last after
    the others) and a watchdog (TEST_BOUND seconds). A sanitizer report in
    any process's stderr fails the test; when the test fails, the last
    lines of every process are printed."""

    TEST_BOUND = 120.0

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="kdp-", dir="/tmp")
        _tmpdirs.add(self.dir)
        self.addCleanup(_tmpdirs.discard, self.dir)
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.procs = []
        self._problems0 = self._problems()
        self.watchdog = Watchdog(self.TEST_BOUND, self.id()).start()
        self.addCleanup(self.watchdog.cancel)
        self.addCleanup(self._stop_all)

    def start_proc(self, p):
        """Starts p (a Proc), to be stopped when the test ends; returns it."""
        self.procs.append(p)
        p.start()
        return p

    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    def _problems(self):
        """How many failures and errors the test result holds so far."""
        result = getattr(getattr(self, "_outcome", None), "result", None)
        return len(getattr(result, "failures", ())) + len(getattr(result, "errors", ()))

    def _stop_all(self):
        if self._problems() != self._problems0:
            log("\n*** %s failed: state of its processes ***" % self.id())
            for p in self.procs:
                log(p.diagnostics())
        for p in sorted(reversed(self.procs), key=lambda p: p.stop_last):
            p.stop()
        reports = []
        for p in self.procs:
            rep = p.sanitizer_report()
            if rep:
                reports.append("%s (exit %s):\n%s" % (p.name, p.returncode, rep))
        if reports:
            raise AssertionError("sanitizer report(s):\n" + "\n\n".join(reports))
