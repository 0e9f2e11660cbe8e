#!/usr/bin/python3
"""Runs the user docs: every fenced block of a doc is run, compiled or
checked, so that the docs cannot drift from what kdp really does.

    KDP_BUILD_DIR=build tests/docs/test_docs.py DOC...      (ctest: docs_<name>)

DOC is a markdown file of the source tree (README.md, docs/tutorial.md...).
Python 3 stdlib only. KDP_DOCTEST_KEEP=1 keeps the work directory (its
.doctest/terminal.log is what the doc's shell printed).

A doc runs like a reader at one terminal: one shell session (/bin/sh, `set
-e`) per doc, the blocks in order, so variables, `cd`, `export` and
background jobs (`cmd &`, `$!`) carry from one block to the next. The
session starts in a copy of the clone (every top-level entry of the source
tree symlinked, `build` pointing at the test's build tree), with
HOME=WORK/home, a plain PATH (no kdp tool on it: a doc says where its tools
come from), KDP_DEVICE_PLUGIN_DIR=WORK/dp (so nothing ever touches
/var/lib/kubelet), and each block's stdin from /dev/null. What the test
checks by itself (C, YAML) uses its own `cmake --install` of the build tree
into WORK/.prefix. WORK is a fresh mkdtemp under
/tmp (short: unix socket paths must stay under 107 bytes); every path
/tmp/NAME in a block is rewritten to WORK/NAME before it runs, and back in
what a block prints, so docs can say /tmp/dp. At the end every process the
session left running (background jobs included: they stay in the session's
process group) gets SIGTERM, then SIGKILL, and WORK is removed.

Every block needs a language; each language has one meaning:

  sh       run in the session; any failing command fails the doc
  console  a transcript: each `$ CMD` line is run (as at a prompt: a
           failing CMD does not end the session), and the lines after it
           (up to the next `$ ` line) must be exactly what CMD printed on
           stdout and stderr (each stream in order); a last line `exit N`
           is the exit status CMD must have (else 0)
  c        compiled against the installed kdp (pkg-config kdp, or kdp-dra
           for a block that includes <kdp_dra.h>) with
           -Wall -Wextra -Werror (unused functions and parameters allowed:
           snippets); linked too when it has a main()
  yaml     a kdp-generic configuration: `kdp-generic --check` must accept it
           (with `file`, below: the doc's own commands must use it instead)
  text     not run (synopses, layouts); with `output` (below), checked

A block without a language fails the test, and so does any other language.
What a block shows is compared in substance: lines are normalized first
(klog headers, times of day, durations, pids, t_ns: see normalize()), and
`...` in a line matches anything (a line of only `...`: any lines).

An annotation on the nearest non-blank line above a fence changes how the
block runs: `<!-- doctest: DIRECTIVE; DIRECTIVE -->`, with

  skip: REASON     not run; the reason (the rest of the note) is required
                   and printed
  output           (text) the lines are what the session's terminal showed
                   since the last block started: background jobs and the
                   block's own output, in order (other lines in between are
                   allowed); waited for, bounded
  output any-order (text) the same, in any order
  file NAME [from OTHER]
                   (c, yaml) the block is written to NAME in the session's
                   current directory, for the doc's own commands (cc,
                   kdp-generic) to use. A YAML file that no later command
                   names fails the test; a C file is also compiled by the
                   test at the end. C is merged the way a reader applies a
                   tutorial's steps: NAME starts empty (or as a copy of
                   OTHER); an #include it has is not repeated; a top-level
                   definition replaces the one of the same name; new ones go
                   above main(), and a main() replaces the old one, last
  timeout N        the block's bound in seconds (default 60; an output
                   block's wait, default 15). A whole doc has 200 s.

Commands that cannot run in a test are rewritten or skipped by the table
COMMANDS below, one line at a time, with the reason printed.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
BUILD = os.path.abspath(os.environ.get("KDP_BUILD_DIR") or os.path.join(SRC, "build"))
CMAKE = os.environ.get("KDP_CMAKE") or "cmake"
CC = os.environ.get("KDP_CC") or "cc"

BLOCK_BOUND = 60.0   # default bound of one block
OUTPUT_WAIT = 15.0   # bound of the wait for a block's shown output
DOC_BOUND = 200.0    # bound of one doc, below ctest's TIMEOUT (300): cleanup always runs
CFLAGS = ["-std=gnu11", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Wno-unused-function",
          "-Werror"]
LANGS = ("sh", "console", "c", "yaml", "text")

# Commands a test cannot run as written: (regex on a stripped line,
# replacement or None to skip it, why).
COMMANDS = [
    (r"^make test\b.*", None, "`make test` runs every test, this one included"),
    (r"^make demo\b.*", "scripts/demo.sh build/bin",
     "`make demo` is `make build` and then this; the test's tree is built already"),
    (r"^make( build)?$", None, "the test's build tree is built already"),
    (r"^cmake -S \S+ -B build\b.*", None, "the test's build tree is configured and built already"),
    (r"^cmake --build build\b.*", None, "the test's build tree is built already"),
    (r"^scripts/install-deps\.sh\b.*", None, "installs Debian packages (root)"),
    (r"^sudo\b.*", None, "needs root"),
    (r"^(docker|kubectl|k3s|microk8s)\b.*", None, "no container runtime or cluster in a test"),
]

failures = []


def log(*a):
    print(*a, flush=True)


# ---- markdown ----------------------------------------------------------------

class Block:
    def __init__(self, doc, line, lang, text, note, note_line):
        self.doc = doc
        self.line = line          # 1-based line of the opening fence
        self.lang = lang
        self.text = text
        self.note = note          # the annotation's text, or None
        self.note_line = note_line
        self.directives = {}

    def where(self):
        return "%s:%d" % (self.doc, self.line)


NOTE_RX = re.compile(r"^<!--\s*doctest:\s*(.*?)\s*-->\s*$")
FENCE_RX = re.compile(r"^( *)(```+|~~~+)\s*([^\s`]*)\s*$")  # indented: in a list item


def parse_blocks(path, rel):
    lines = open(path, encoding="utf-8").read().split("\n")
    blocks = []
    errors = []
    i = 0
    last_nonblank = None  # (index, text) of the last non-blank line outside blocks
    used_notes = set()
    notes = {}
    while i < len(lines):
        m = FENCE_RX.match(lines[i])
        if not m:
            if lines[i].strip():
                last_nonblank = i
                if NOTE_RX.match(lines[i].strip()):
                    notes[i] = lines[i].strip()
                elif "doctest" in lines[i] and "<!--" in lines[i]:
                    errors.append("%s:%d: malformed annotation %r (<!-- doctest: ... -->)"
                                  % (rel, i + 1, lines[i].strip()))
            i += 1
            continue
        indent, fence, lang = len(m.group(1)), m.group(2), m.group(3)
        start = i
        body = []
        i += 1
        while i < len(lines) and not lines[i].lstrip(" ").startswith(fence):
            line = lines[i]
            body.append(line[indent:] if line[:indent].strip() == "" else line)
            i += 1
        if i >= len(lines):
            errors.append("%s:%d: unclosed fence" % (rel, start + 1))
            break
        note = note_line = None
        if last_nonblank is not None and last_nonblank in notes:
            note = NOTE_RX.match(notes[last_nonblank]).group(1)
            note_line = last_nonblank + 1
            used_notes.add(last_nonblank)
        blocks.append(Block(rel, start + 1, lang, "\n".join(body) + "\n", note, note_line))
        last_nonblank = None
        i += 1
    for n in sorted(set(notes) - used_notes):
        errors.append("%s:%d: annotation without a block right below it" % (rel, n + 1))
    return blocks, errors


def parse_note(b):
    """Fills b.directives from b.note; returns a list of errors."""
    if b.note is None:
        return []
    errs = []
    note = b.note
    if note.startswith("skip"):  # the reason is the rest of the note
        reason = note[4:].lstrip(":").strip()
        if not note.startswith("skip:") or not reason:
            errs.append("skip needs a reason: <!-- doctest: skip: WHY -->")
        b.directives["skip"] = reason
        return errs
    for part in [p.strip() for p in note.split(";") if p.strip()]:
        words = part.split()
        if words[0] == "output" and b.lang == "text" and words[1:] in ([], ["any-order"]):
            b.directives["output"] = "any-order" if words[1:] else "in-order"
        elif words[0] == "file" and b.lang in ("c", "yaml") and (
                len(words) == 2 or (len(words) == 4 and words[2] == "from")):
            b.directives["file"] = words[1]
            b.directives["from"] = words[3] if len(words) == 4 else None
        elif words[0] == "timeout" and len(words) == 2 and words[1].isdigit():
            b.directives["timeout"] = float(words[1])
        else:
            errs.append("unknown directive %r for a %s block" % (part, b.lang or "plain"))
    return errs


# ---- output, in substance ----------------------------------------------------

NORMALIZE = [
    # klog header: level, date, time, thread ID, source file and line
    (re.compile(r"^([IWEF])\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ [\w.+-]+(:\d+)?\] "), r"\1] "),
    (re.compile(r"\b\d\d:\d\d:\d\d\.\d+\b"), "HH:MM:SS"),
    (re.compile(r"\b\d+(\.\d+)? ?(ms|us|s)\b"), "<dur>"),
    (re.compile(r"\bpid \d+"), "pid N"),
    (re.compile(r'"(t_ns|pid|dial_ms|ms|elapsed_us)": ?[\d.]+'), r'"\1":N'),
]


def normalize(line):
    line = line.rstrip()
    for rx, rep in NORMALIZE:
        line = rx.sub(rep, line)
    return line


def line_matches(want, got):
    """want (a doc line) against got (a real line), both normalized; `...` in
    want matches any text."""
    if "..." not in want:
        return want == got
    rx = ".*".join(re.escape(p) for p in want.split("..."))
    return re.fullmatch(rx, got) is not None


def match_in_order(want, got, any_order=False):
    """Every line of want (not `...`) in got, in order (or in any order, each
    a different line). Returns None, or the first line not found."""
    want = [w for w in want if w.strip() != "..."]
    if any_order:
        free = list(got)
        for w in want:
            k = next((k for k, g in enumerate(free) if line_matches(w, g)), None)
            if k is None:
                return w
            del free[k]
        return None
    k = 0
    for w in want:
        while k < len(got) and not line_matches(w, got[k]):
            k += 1
        if k >= len(got):
            return w
        k += 1
    return None


def match_streams(want, out, err):
    """A console command's shown lines against its stdout and stderr: each
    shown line is the next line of one of the two streams, and every line
    of both is shown (`...` alone lets lines go unshown). Returns None or
    what went wrong."""
    i = j = 0
    skipping = False
    for w in want:
        if w.strip() == "...":
            skipping = True
            continue
        while True:
            if i < len(out) and line_matches(w, out[i]):
                i += 1
                break
            if j < len(err) and line_matches(w, err[j]):
                j += 1
                break
            if skipping and (i < len(out) or j < len(err)):
                if i < len(out):
                    i += 1
                else:
                    j += 1
                continue
            return "shown line %r not printed (next stdout line: %r, next stderr line: %r)" % (
                w, out[i] if i < len(out) else None, err[j] if j < len(err) else None)
        skipping = False
    if not skipping and (i < len(out) or j < len(err)):
        return "printed but not shown: %r" % ((out[i:] + err[j:])[0])
    return None


# ---- C: a tutorial's steps merged into one file ------------------------------

def c_chunks(text):
    """Top-level pieces of C source: [(name, text)]. A piece ends where the
    brace depth is back to 0 at a line ending in } or ;, or at a
    preprocessor line; comments above a piece belong to it."""
    chunks = []
    cur = []
    depth = 0
    in_comment = False
    for line in text.split("\n"):
        if not cur and not line.strip():
            continue
        cur.append(line)
        code = []
        k = 0
        while k < len(line):  # strip comments and literals, count braces
            if in_comment:
                end = line.find("*/", k)
                if end < 0:
                    k = len(line)
                    break
                in_comment = False
                k = end + 2
                continue
            c = line[k]
            if line.startswith("/*", k):
                in_comment = True
                k += 2
            elif line.startswith("//", k):
                break
            elif c in "\"'":
                q = c
                k += 1
                while k < len(line) and line[k] != q:
                    k += 2 if line[k] == "\\" else 1
                k += 1
                code.append("x")
            else:
                code.append(c)
                k += 1
        code = "".join(code).strip()
        depth += code.count("{") - code.count("}")
        if depth == 0 and not in_comment and code and (
                code.endswith("}") or code.endswith(";") or code.startswith("#")):
            chunks.append((chunk_name(cur), "\n".join(cur).rstrip()))
            cur = []
    if any(l.strip() for l in cur):
        chunks.append((chunk_name(cur), "\n".join(cur).rstrip()))
    return chunks


def chunk_name(lines):
    for line in lines:
        s = line.strip()
        if not s or s.startswith(("/*", "*", "//")):
            continue
        m = re.match(r'#\s*include\s*[<"]([^>"]+)', s)
        if m:
            return "#include " + m.group(1)
        m = re.match(r"#\s*define\s+(\w+)", s)
        if m:
            return "#define " + m.group(1)
        m = re.match(r"([^(=;\[]*?)(\w+)\s*[(=;\[]", s)
        return m.group(2) if m else None
    return None


def merge_c(old, new):
    chunks = c_chunks(old)
    for name, text in c_chunks(new):
        names = [n for n, _ in chunks]
        if name and name.startswith("#include"):
            if name not in names:
                last = max([k for k, n in enumerate(names)
                            if n and n.startswith("#include")], default=-1)
                chunks.insert(last + 1, (name, text))
            continue
        if name in names and name is not None:
            del chunks[names.index(name)]
            names = [n for n, _ in chunks]
        if name != "main" and "main" in names:
            chunks.insert(names.index("main"), (name, text))
        else:
            chunks.append((name, text))
    out = []
    for k, (name, text) in enumerate(chunks):
        if k and not (name and name.startswith("#include")
                      and chunks[k - 1][0] and chunks[k - 1][0].startswith("#include")):
            out.append("")
        out.append(text)
    return "\n".join(out) + "\n"


# ---- the session -------------------------------------------------------------

class DocFailure(Exception):
    pass


class Session:
    """One /bin/sh that runs a doc's blocks in order, in its own process
    group; its stdout and stderr go to one log (the "terminal")."""

    def __init__(self, work, cwd, env, deadline):
        self.work = work
        self.deadline = deadline  # time.monotonic() by which the whole doc is done
        self.meta = os.path.join(work, ".doctest")
        os.makedirs(self.meta)
        self.logpath = os.path.join(self.meta, "terminal.log")
        self.marks = os.path.join(self.meta, "marks")
        open(self.marks, "w").close()
        self.logf = open(self.logpath, "ab")
        self.proc = subprocess.Popen(["/bin/sh"], stdin=subprocess.PIPE, stdout=self.logf,
                                     stderr=subprocess.STDOUT, cwd=cwd, env=env,
                                     start_new_session=True)
        self.pwd = cwd
        self.seq = 0
        self.cursor = 0   # terminal log offset at the start of the last sh or console block
        self.send("set -e\n")

    def send(self, text):
        try:
            self.proc.stdin.write(text.encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass

    def terminal(self, since=0):
        with open(self.logpath, "rb") as f:
            f.seek(since)
            return f.read().decode("utf-8", errors="replace")

    def _await(self, tag, bound, what):
        bound = min(bound, self.deadline - time.monotonic())
        deadline = time.monotonic() + bound
        while True:
            with open(self.marks) as f:
                for line in f:
                    parts = line.rstrip("\n").split(" ", 2)
                    if parts[0] == tag:
                        self.pwd = parts[2]
                        return int(parts[1])
            if self.proc.poll() is not None:
                raise DocFailure("%s: the shell exited with status %d (a command failed):\n%s"
                                 % (what, self.proc.returncode, tail(self.terminal(self.cursor))))
            if time.monotonic() > deadline:
                raise DocFailure("%s: not done within %.0f s:\n%s"
                                 % (what, bound, tail(self.terminal(self.cursor))))
            time.sleep(0.05)

    def run_script(self, script, bound, what, redirect="", tolerate=False):
        """Sources script in the session; returns its status (tolerate) or
        raises on failure (set -e ends the shell)."""
        self.seq += 1
        tag = "b%d" % self.seq
        path = os.path.join(self.meta, tag + ".sh")
        with open(path, "w") as f:
            f.write(script)
        if tolerate:
            # as at a prompt: no errexit while it runs (dash's errexit
            # and `. FILE || ...` do not mix)
            line = ('set +e; . "%s" %s </dev/null; __rc=$?; set -e; echo "%s $__rc $PWD" >> "%s"\n'
                    % (path, redirect, tag, self.marks))
        else:
            line = '. "%s" </dev/null; echo "%s 0 $PWD" >> "%s"\n' % (path, tag, self.marks)
        self.send(line)
        return self._await(tag, bound, what)

    def close(self):
        """Ends the shell and every process of its group: SIGTERM, a bounded
        wait, SIGKILL. Returns the names of processes that needed SIGKILL."""
        pgid = self.proc.pid
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(2)  # at once, unless a block still runs
        except subprocess.TimeoutExpired:
            pass
        killed = []
        for sig, bound in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
            self.proc.poll()
            if not group_alive(pgid):
                break
            if sig == signal.SIGKILL:
                killed = group_members(pgid)
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + bound
            while time.monotonic() < deadline:
                self.proc.poll()  # reap the shell: a zombie still counts in its group
                if not group_alive(pgid):
                    break
                time.sleep(0.05)
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(5)
        self.logf.close()
        return killed


def group_alive(pgid):
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def group_members(pgid):
    names = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % pid) as f:
                stat = f.read()
            fields = stat[stat.rindex(")") + 2:].split()
            if int(fields[2]) == pgid:
                names.append("%s (%s)" % (stat[stat.index("(") + 1:stat.rindex(")")], pid))
        except (OSError, ValueError):
            pass
    return names


def tail(text, n=40):
    lines = text.rstrip("\n").split("\n")
    return "\n".join("    | " + l for l in lines[-n:])


# ---- running one doc ---------------------------------------------------------

class Doc:
    def __init__(self, rel):
        self.rel = rel
        self.path = os.path.join(SRC, rel)
        self.work = tempfile.mkdtemp(prefix="kdpdoc.", dir="/tmp")
        self.prefix = None
        self.c_files = []        # (block, path): compiled at the end
        self.unused = {}         # YAML file name -> its block, until a command names it
        self.blocks = []

    # paths: /tmp/NAME in a doc is WORK/NAME here
    def to_work(self, text):
        return re.sub(r"(?<![\w./~-])/tmp/", self.work + "/", text)

    def from_work(self, text):
        text = text.replace(os.path.join(self.work, "home"), "~")
        return text.replace(self.work + "/", "/tmp/").replace(self.work, "/tmp")

    def installed(self):
        """The test's own install of the build tree (for what the test
        compiles and checks itself)."""
        if self.prefix is None:
            self.prefix = os.path.join(self.work, ".prefix")
            r = subprocess.run([CMAKE, "--install", BUILD, "--prefix", self.prefix],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               universal_newlines=True, timeout=120)
            if r.returncode:
                raise DocFailure("cmake --install %s failed:\n%s" % (BUILD, r.stdout))
        return self.prefix

    def pkg_env(self):
        env = dict(os.environ)
        env["PKG_CONFIG_PATH"] = os.path.join(self.installed(), "lib", "pkgconfig")
        return env

    def clone(self):
        """WORK/kdp: the source tree's entries as symlinks, build -> BUILD."""
        clone = os.path.join(self.work, "kdp")
        os.makedirs(clone)
        for name in os.listdir(SRC):
            if name == ".git" or name.startswith("build"):
                continue
            os.symlink(os.path.join(SRC, name), os.path.join(clone, name))
        os.symlink(BUILD, os.path.join(clone, "build"))
        return clone

    def env(self):
        home = os.path.join(self.work, "home")
        dp = os.path.join(self.work, "dp")
        os.makedirs(home)
        env = {
            "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME": home,
            "KDP_DEVICE_PLUGIN_DIR": dp,
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            "CI": "true",
            "SHELL": "/bin/sh",
        }
        for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "TSAN_OPTIONS", "LSAN_OPTIONS"):
            if k in os.environ:
                env[k] = os.environ[k]
        return env

    def rewrite_commands(self, text, where):
        out = []
        for line in text.split("\n"):
            s = line.strip()
            for rx, rep, why in COMMANDS:
                if re.match(rx, s):
                    if rep is None:
                        log("    %s: not run: %s (%s)" % (where, s, why))
                        line = ": doctest skipped a line"
                    else:
                        new = re.sub(rx, rep, s)
                        log("    %s: %s runs as %s (%s)" % (where, s, new, why))
                        line = new
                    break
            out.append(line)
        return "\n".join(out)

    def run(self):
        blocks, errors = parse_blocks(self.path, self.rel)
        for b in blocks:
            if not b.lang:
                errors.append("%s: a block without a language (one of %s)"
                              % (b.where(), ", ".join(LANGS)))
            elif b.lang not in LANGS:
                errors.append("%s: language %r is none of %s" % (b.where(), b.lang,
                                                                 ", ".join(LANGS)))
            errors += ["%s: %s" % (b.where(), e) for e in parse_note(b)]
        if errors:
            raise DocFailure("\n".join(errors))
        log("%s: %d blocks, work directory %s" % (self.rel, len(blocks), self.work))
        self.deadline = time.monotonic() + DOC_BOUND
        session = Session(self.work, self.clone(), self.env(), self.deadline)
        try:
            for b in blocks:
                self.run_block(session, b)
            self.compile_files()
            for name, b in self.unused.items():
                raise DocFailure("%s: %s is written, but no command below uses it"
                                 % (b.where(), name))
        finally:
            killed = session.close()
            if killed:
                log("note: SIGKILL needed for %s" % ", ".join(killed))

    def run_block(self, s, b):
        d = b.directives
        label = "%s %s" % (b.where(), b.lang)
        if "skip" in d:
            log("%s: skipped: %s" % (label, d["skip"]))
            return
        t0 = time.monotonic()
        bound = d.get("timeout", BLOCK_BOUND)
        if b.lang in ("sh", "console"):  # what output blocks below it see
            s.cursor = os.path.getsize(s.logpath)
            for name in [n for n in self.unused if re.search(r"\b%s\b" % re.escape(n), b.text)]:
                del self.unused[name]
        if b.lang == "sh":
            script = self.to_work(self.rewrite_commands(b.text, b.where()))
            s.run_script(script, bound, b.where())
        elif b.lang == "console":
            self.run_console(s, b, bound)
        elif b.lang == "c":
            self.c_block(s, b)
        elif b.lang == "yaml":
            self.yaml_block(s, b)
        elif b.lang == "text":
            if "output" not in d:
                return
            self.check_output(s, b)
        log("%s: ok (%.1f s)" % (label, time.monotonic() - t0))

    def run_console(self, s, b, bound):
        cmds = []
        for line in b.text.rstrip("\n").split("\n"):
            if line.startswith("$ "):
                cmds.append([line[2:], []])
            elif not cmds:
                raise DocFailure("%s: a console block starts with `$ COMMAND`" % b.where())
            else:
                cmds[-1][1].append(line)
        for k, (cmd, shown) in enumerate(cmds):
            want_rc = 0
            if shown and re.fullmatch(r"exit \d+", shown[-1].strip()):
                want_rc = int(shown.pop().split()[1])
            script = self.to_work(self.rewrite_commands(cmd, b.where())) + "\n"
            out = os.path.join(s.meta, "c%d.out" % (s.seq + 1))
            err = os.path.join(s.meta, "c%d.err" % (s.seq + 1))
            rc = s.run_script(script, bound, "%s: $ %s" % (b.where(), cmd),
                              redirect='>"%s" 2>"%s"' % (out, err), tolerate=True)
            got_out = [normalize(l) for l in self.from_work(read(out)).splitlines()]
            got_err = [normalize(l) for l in self.from_work(read(err)).splitlines()]
            problem = match_streams([normalize(l) for l in shown], got_out, got_err)
            if rc != want_rc:
                problem = "exit status %d, the doc says %d%s" % (
                    rc, want_rc, "; " + problem if problem else "")
            if problem:
                raise DocFailure("%s: $ %s\n  %s\n  stdout:\n%s\n  stderr:\n%s" % (
                    b.where(), cmd, problem, tail(read(out)), tail(read(err))))

    def check_output(self, s, b):
        want = [normalize(l) for l in b.text.rstrip("\n").split("\n")]
        any_order = b.directives["output"] == "any-order"
        wait = min(b.directives.get("timeout", OUTPUT_WAIT), self.deadline - time.monotonic())
        deadline = time.monotonic() + wait
        while True:
            got = [normalize(l) for l in self.from_work(s.terminal(s.cursor)).splitlines()]
            missing = match_in_order(want, got, any_order)
            if missing is None:
                return
            if time.monotonic() > deadline:
                raise DocFailure("%s: shown output not seen within %.0f s: no line %r%s in:\n%s"
                                 % (b.where(), wait, missing,
                                    "" if any_order else " (after the lines before it)",
                                    tail(self.from_work(s.terminal(s.cursor)), 60)))
            time.sleep(0.1)

    def block_file(self, s, b):
        """Writes (merges) the block into its file; returns the path."""
        name = b.directives["file"]
        path = os.path.join(s.pwd, name)
        text = self.to_work(b.text)
        if b.lang == "c":
            base = ""
            if os.path.exists(path):
                base = read(path)
            elif b.directives["from"]:
                base = read(os.path.join(s.pwd, b.directives["from"]))
            text = merge_c(base, text)
        with open(path, "w") as f:
            f.write(text)
        return path

    def c_block(self, s, b):
        if "file" in b.directives:
            path = self.block_file(s, b)
            if path not in [p for _, p in self.c_files]:
                self.c_files.append((b, path))
            return
        path = os.path.join(s.meta, "block%d.c" % b.line)
        with open(path, "w") as f:
            f.write(self.to_work(b.text))
        self.compile(b.where(), path)

    def compile(self, where, path):
        pkg = "kdp-dra" if "<kdp_dra.h>" in read(path) else "kdp"
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", pkg], env=self.pkg_env(),
                               stdout=subprocess.PIPE, universal_newlines=True,
                               timeout=30).stdout.split()
        has_main = re.search(r"^int main\(", read(path), re.M) is not None
        out = path + (".bin" if has_main else ".o")
        argv = [CC] + CFLAGS + ([] if has_main else ["-c"]) + [path, "-o", out] + flags
        r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True, timeout=120)
        if r.returncode:
            raise DocFailure("%s: does not compile (%s):\n%s\n%s" % (
                where, " ".join(argv), tail(r.stdout), numbered(read(path))))
        log("%s: %s compiles%s" % (where, os.path.basename(path),
                                   " and links" if has_main else ""))

    def compile_files(self):
        for b, path in self.c_files:
            self.compile("%s (%s, as the doc builds it up)" % (b.where(), os.path.basename(path)),
                         path)

    def yaml_block(self, s, b):
        if "file" in b.directives:  # for the doc's commands (a bad one, maybe)
            self.block_file(s, b)
            self.unused[b.directives["file"]] = b
            return
        path = os.path.join(s.meta, "block%d.yaml" % b.line)
        with open(path, "w") as f:
            f.write(self.to_work(b.text))
        generic = os.path.join(self.installed(), "bin", "kdp-generic")
        r = subprocess.run([generic, "--check", "--config", path], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, universal_newlines=True, timeout=30)
        if r.returncode:
            raise DocFailure("%s: kdp-generic --check refuses it:\n%s" % (b.where(),
                                                                          tail(r.stdout)))


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def numbered(text):
    return "\n".join("    %4d  %s" % (k + 1, l) for k, l in enumerate(text.split("\n")))


def main(argv):
    if not argv:
        print(__doc__)
        return 2
    # SIGTERM (ctest, a person): unwind, so that every process started is stopped
    signal.signal(signal.SIGTERM, lambda sig, frame: sys.exit(128 + sig))
    for rel in argv:
        doc = Doc(rel)
        t0 = time.monotonic()
        try:
            doc.run()
            log("%s: PASS (%.1f s)\n" % (rel, time.monotonic() - t0))
        except DocFailure as e:
            log("%s: FAILED\n%s\n" % (rel, e))
            failures.append(rel)
        finally:
            if os.environ.get("KDP_DOCTEST_KEEP"):
                log("kept %s (terminal: .doctest/terminal.log)" % doc.work)
            else:
                shutil.rmtree(doc.work, ignore_errors=True)
    if failures:
        log("FAILED: %s" % ", ".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
