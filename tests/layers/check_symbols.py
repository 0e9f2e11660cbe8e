#!/usr/bin/python3
"""The module graph of src/, from the symbols of the built objects: what
check_layers.py does from the #include lines, done again from what each
object file defines and uses, so that a shared header (src/dra/dra_int.h,
included by every .c of its layer) hides no cycle. Each object of a
layer's object library (<build>/CMakeFiles/kdp_<layer>.dir/src/<layer>/
<name>.c.o) is read with nm and mapped to its module as check_layers.py
does (call.c and recv.c belong to grpc/server, ...); module A uses module
B when A's object has an undefined symbol that B's object defines. A
symbol no module defines (libc, nghttp2, protobuf-c, the sanitizers'
__asan_* / __tsan_* / __ubsan_*) makes no edge.

It fails on an edge to a layer that KDP_LAYER_DEPS_<layer> of the
top-level CMakeLists.txt does not give (an upward one), and on every
elementary cycle between modules that tests/layers/known_cycles.txt does
not list; it fails too on a cycle listed there that is gone, so the list
only shrinks (it is to be empty). Each finding names, for every edge, one
symbol that makes it.

    tests/layers/check_symbols.py BUILD_DIR [--nm NM] [--known FILE]
                                  [--source DIR] [--graph] [--cycles]
    tests/layers/check_symbols.py --self-test [--cc CC] [--nm NM]

BUILD_DIR is the build directory (ctest runs there); --source is the
source tree (this script's); --graph prints the module graph, one symbol
per edge; --cycles prints every cycle found as a line of known_cycles.txt
(to shorten the list after breaking one). --self-test compiles tiny modules that call each other and
checks that the cycle, the upward edge and a stale allowlist line are
found, and that an acyclic pair passes.

Exit 0 when the graph is clean, 1 with one finding per problem.
"""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from check_layers import ROOT, cmake_layers, module  # noqa: E402

KNOWN = os.path.join(HERE, "known_cycles.txt")
MAX_CYCLES = 10000  # the elementary cycles listed at most: past that, fix the tree first


def objects(build, root, layers):
    """[("layer/name.c", path of its .o)] for every src/<layer>/*.c, and the
    problems (a source with no object: build first). Objects whose source
    is gone (a stale build) are not read."""
    found, problems = [], []
    for layer in layers:
        srcdir = os.path.join(root, "src", layer)
        if not os.path.isdir(srcdir):
            continue
        objdir = os.path.join(build, "CMakeFiles", "kdp_%s.dir" % layer, "src", layer)
        for f in sorted(os.listdir(srcdir)):
            if not f.endswith(".c"):
                continue
            obj = os.path.join(objdir, f + ".o")
            if os.path.isfile(obj):
                found.append(("%s/%s" % (layer, f), obj))
            else:
                problems.append("src/%s/%s: no object %s (build the library first)"
                                % (layer, f, os.path.relpath(obj, build)))
    return found, problems


def symbols(nm, objs):
    """{path of .o: (defined, undefined)}, the external symbols of each
    object, from one run of nm (POSIX format: name type value size)."""
    out = {o: (set(), set()) for o in objs}
    if not objs:
        return out
    res = subprocess.run([nm, "-P", "-g", "-A"] + list(objs), capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit("check_symbols: %s failed: %s" % (nm, res.stderr.strip()))
    for line in res.stdout.splitlines():
        path, sep, rest = line.rpartition(": ")
        fields = rest.split()
        if not sep or len(fields) < 2 or path not in out:
            continue
        name, kind = fields[0], fields[1]
        # U: undefined; w, v: weak undefined; everything else external is defined
        out[path][1 if kind in "Uwv" else 0].add(name)
    return out


def module_graph(objs, syms):
    """{module: {module it uses: {symbols}}}, and the symbols two modules
    define."""
    defined_by = {}
    for rel, obj in objs:
        for s in syms[obj][0]:
            defined_by.setdefault(s, set()).add(module(rel))
    twice = {s: sorted(m) for s, m in defined_by.items() if len(m) > 1}
    graph = {}
    for rel, obj in objs:
        user = module(rel)
        graph.setdefault(user, {})
        for s in syms[obj][1]:
            for owner in defined_by.get(s, ()):
                if owner != user:
                    graph[user].setdefault(owner, set()).add(s)
    return graph, twice


def cycles(graph):
    """Every elementary cycle of graph, each a list [a, b, ..., a] starting at
    its smallest module, in sorted order. For each start s, a DFS over the
    modules above s (so each cycle is found once, from its smallest
    module); at most MAX_CYCLES."""
    found = []
    nodes = sorted(graph)
    for s in nodes:
        stack = [(s, iter(sorted(graph.get(s, ()))))]
        path, on_path = [s], {s}
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                stack.pop()
                on_path.discard(path.pop())
                continue
            if nxt == s:
                found.append(path + [s])
                if len(found) >= MAX_CYCLES:
                    return found
            elif nxt > s and nxt not in on_path:
                stack.append((nxt, iter(sorted(graph.get(nxt, ())))))
                path.append(nxt)
                on_path.add(nxt)
    return sorted(found)


def canonical(cycle):
    """["b", "a", "b"] -> ("a", "b", "a"): rotated to start at its smallest."""
    ring = list(cycle[:-1]) if cycle and cycle[0] == cycle[-1] else list(cycle)
    if not ring:
        return ()
    i = ring.index(min(ring))
    ring = ring[i:] + ring[:i]
    return tuple(ring + [ring[0]])


def read_known(path):
    """{canonical cycle: line number} from the allowlist: one cycle a line,
    "a -> b -> a", # comments."""
    known = {}
    if not os.path.isfile(path):
        return known
    for n, line in enumerate(open(path), 1):
        line = line.split("#", 1)[0].strip()
        if line:
            known[canonical([m.strip() for m in line.split("->")])] = n
    return known


def edge_symbol(graph, a, b):
    return min(graph[a][b])


def describe(graph, cycle):
    lines = ["a cycle between modules: %s" % " -> ".join(cycle)]
    for a, b in zip(cycle, cycle[1:]):
        lines.append("    %s -> %s: %s" % (a, b, edge_symbol(graph, a, b)))
    return "\n".join(lines)


def check(build, root, nm, known_path, show_graph=False, show_cycles=False):
    """The findings (strings) and a summary line."""
    layers, deps = cmake_layers(root)
    objs, problems = objects(build, root, layers)
    syms = symbols(nm, [o for _, o in objs])
    graph, twice = module_graph(objs, syms)
    for s, mods in sorted(twice.items()):
        problems.append("symbol %s is defined by %s" % (s, " and ".join(mods)))
    for a in sorted(graph):
        la = a.split("/")[0]
        allowed = set(deps.get(la, ())) | {la}
        for b in sorted(graph[a]):
            lb = b.split("/")[0]
            if lb not in allowed:
                problems.append("%s uses %s (%s): layer %s may use only %s"
                                % (a, b, edge_symbol(graph, a, b), la, ", ".join(sorted(allowed))))
    if show_graph:
        for a in sorted(graph):
            for b in sorted(graph[a]):
                print("%s -> %s (%s%s)" % (a, b, edge_symbol(graph, a, b),
                                           ", +%d" % (len(graph[a][b]) - 1)
                                           if len(graph[a][b]) > 1 else ""))
    found = cycles(graph)
    if show_cycles:
        for c in found:
            print(" -> ".join(c))
    if len(found) >= MAX_CYCLES:
        problems.append("%d cycles or more: not all listed" % MAX_CYCLES)
    known = read_known(known_path)
    rel_known = os.path.relpath(known_path, root)
    if rel_known.startswith(".."):
        rel_known = known_path
    for c in found:
        if tuple(c) not in known:
            problems.append(describe(graph, c))
    for c, n in sorted(known.items(), key=lambda kv: kv[1]):
        if list(c) not in found:
            problems.append("%s:%d: %s: no such cycle any more; remove the line"
                            % (rel_known, n, " -> ".join(c)))
    edges = sum(len(v) for v in graph.values())
    summary = ("check_symbols: %d objects, %d modules, %d edges between them, layers %s: "
               "no upward use, no cycle%s" % (len(objs), len(graph), edges, " < ".join(layers),
                                              " but the %d of %s" % (len(known), rel_known)
                                              if known else ""))
    return problems, summary


# --- --self-test: tiny modules in a temporary tree, compiled with the real
# compiler, checked with the real nm.

SELF_CMAKE = """set(KDP_LAYERS low high)
set(KDP_LAYER_DEPS_low)
set(KDP_LAYER_DEPS_high low)
"""


def plant(tmp, cc, files):
    """Lays out {"layer/name.c": source} as a source tree and a build tree
    under tmp (a fresh one each time); returns (root, build)."""
    root, build = os.path.join(tmp, "src-tree"), os.path.join(tmp, "build")
    for d in (root, build):
        shutil.rmtree(d, ignore_errors=True)
    os.makedirs(root)
    with open(os.path.join(root, "CMakeLists.txt"), "w") as f:
        f.write(SELF_CMAKE)
    for rel, text in files.items():
        layer, name = rel.split("/")
        src = os.path.join(root, "src", layer, name)
        obj = os.path.join(build, "CMakeFiles", "kdp_%s.dir" % layer, "src", layer, name + ".o")
        os.makedirs(os.path.dirname(src), exist_ok=True)
        os.makedirs(os.path.dirname(obj), exist_ok=True)
        with open(src, "w") as f:
            f.write(text)
        subprocess.run([cc, "-c", "-o", obj, src], check=True)
    return root, build


def self_test(cc, nm):
    calls = ("int printf(const char *, ...);\n"
             "int %s(int x);\nint %s(int x) { printf(\"x\"); return x ? %s(x - 1) : 0; }\n")
    a_calls_b = calls % ("b_fn", "a_fn", "b_fn")
    b_calls_a = calls % ("a_fn", "b_fn", "a_fn")
    # b_fn also calls what a sanitizer's runtime defines: no module does, no edge
    b_alone = ("void __asan_planted(void);\nint b_fn(int x);\n"
               "int b_fn(int x) { __asan_planted(); return x + 1; }\n")
    a_alone = "int a_fn(int x);\nint a_fn(int x) { return x + 1; }\n"
    failures = []

    def expect(name, files, want_rc, want_text=(), known=""):
        root, build = plant(tmp, cc, files)
        known_path = os.path.join(root, "known_cycles.txt")
        with open(known_path, "w") as f:
            f.write(known)
        problems, _ = check(build, root, nm, known_path)
        rc = 1 if problems else 0
        text = "\n".join(problems)
        missing = [w for w in want_text if w not in text]
        if rc != want_rc or missing:
            failures.append("%s: exit %d (want %d), missing %s in:\n%s"
                            % (name, rc, want_rc, missing, text))

    tmp = tempfile.mkdtemp(prefix="check_symbols.")
    try:
        cycle = {"low/a.c": a_calls_b, "low/b.c": b_calls_a}
        expect("a planted cycle", cycle, 1,
               ["low/a -> low/b -> low/a", "low/a -> low/b: b_fn", "low/b -> low/a: a_fn"])
        expect("an acyclic pair", {"low/a.c": a_calls_b, "low/b.c": b_alone}, 0)
        expect("a cycle in the allowlist", cycle, 0, known="low/b -> low/a -> low/b\n")
        expect("a stale allowlist line", {"low/a.c": a_calls_b, "low/b.c": b_alone}, 1,
               ["known_cycles.txt:2: low/a -> low/b -> low/a: no such cycle any more"],
               known="# the list\nlow/a -> low/b -> low/a\n")
        expect("an upward use", {"low/a.c": a_calls_b, "high/b.c": b_alone}, 1,
               ["low/a uses high/b (b_fn): layer low may use only low"])
        expect("a downward use", {"high/a.c": a_calls_b, "low/b.c": b_alone}, 0)
        expect("a source not built", {"low/a.c": a_alone}, 0)  # the baseline for the next
        root, build = plant(tmp, cc, {"low/a.c": a_alone})
        open(os.path.join(root, "src", "low", "c.c"), "w").close()
        problems, _ = check(build, root, nm, os.path.join(root, "none.txt"))
        if not any("src/low/c.c: no object" in p for p in problems):
            failures.append("a source not built: not reported: %s" % problems)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for f in failures:
        print("self-test FAILED: " + f)
    if failures:
        return 1
    print("check_symbols --self-test: a planted cycle, an upward use, a stale allowlist line "
          "and a missing object are found; acyclic pairs pass")
    return 0


def main(argv):
    args, opts = [], {}
    it = iter(argv)
    for a in it:
        if a in ("--nm", "--cc", "--known", "--source"):
            opts[a] = next(it, None)
            if opts[a] is None:
                raise SystemExit("check_symbols: %s needs a value" % a)
        elif a.startswith("--") and a not in ("--graph", "--cycles", "--self-test"):
            raise SystemExit("check_symbols: unknown option %s (see the script's doc)" % a)
        else:
            args.append(a)
    nm = opts.get("--nm") or "nm"
    if "--self-test" in args:
        return self_test(opts.get("--cc") or os.environ.get("CC") or "cc", nm)
    builds = [a for a in args if not a.startswith("--")]
    if len(builds) != 1:
        raise SystemExit(__doc__)
    problems, summary = check(os.path.abspath(builds[0]), opts.get("--source") or ROOT, nm,
                              opts.get("--known") or KNOWN, "--graph" in args,
                              "--cycles" in args)
    for p in problems:
        print(p)
    if problems:
        print("check_symbols: %d problem(s)" % len(problems))
        return 1
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
