#!/usr/bin/python3
"""The module graph of src/, from the #include lines: every include of a
private header names its layer ("grpc/server.h"), no layer includes a
layer above it, and the modules (a .c and its .h; a private <name>_int.h
belongs to <name>; call.c and recv.c to server, timer.c and signal.c to loop, devices_encode.c to devices,
lifecycle_up.c to lifecycle, plugin_calls.c to plugin,
api_discover.c to api) have no cycle. The layers and what each may use are read from the
top-level CMakeLists.txt (KDP_LAYERS, KDP_LAYER_DEPS_<layer>), the same
lists that give each layer's object library its include path, so the two
cannot disagree.

    tests/layers/check_layers.py [--graph]     (--graph: print the module graph)

Exit 0 when the graph is clean, 1 with one line per offending include.
"""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SRC = os.path.join(ROOT, "src")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def cmake_layers(root=ROOT):
    text = open(os.path.join(root, "CMakeLists.txt")).read()
    layers = re.search(r"set\(KDP_LAYERS ([^)]*)\)", text).group(1).split()
    deps = {}
    for layer in layers:
        m = re.search(r"set\(KDP_LAYER_DEPS_%s\b([^)]*)\)" % layer, text)
        deps[layer] = m.group(1).split() if m else []
    return layers, deps


def modules():
    """{"layer/name": [paths]} for every .c and .h under src/<layer>/."""
    out = {}
    for layer in sorted(os.listdir(SRC)):
        d = os.path.join(SRC, layer)
        if not os.path.isdir(d):
            continue
        for f in sorted(os.listdir(d)):
            if f.endswith((".c", ".h")):
                out.setdefault("%s/%s" % (layer, f), []).append(os.path.join(d, f))
    return out


# Files that belong to a module of another name.
MODULE_OF = {
    "grpc/call": "grpc/server",
    "grpc/recv": "grpc/server",
    "runtime/timer": "runtime/loop",
    "runtime/signal": "runtime/loop",
    "plugin/devices_encode": "plugin/devices",
    "plugin/lifecycle_up": "plugin/lifecycle",
    "plugin/plugin_calls": "plugin/plugin",
    "k8s/api_discover": "k8s/api",
}


def module(rel):
    """"plugin/plugin_int.h" -> "plugin/plugin"."""
    name = os.path.splitext(rel)[0]
    if name.endswith("_int"):
        name = name[:-4]
    return MODULE_OF.get(name, name)


def find_cycle(graph):
    """A list of modules forming a cycle, or None (iterative DFS)."""
    state = {}
    for start in sorted(graph):
        if state.get(start):
            continue
        stack = [(start, iter(sorted(graph.get(start, ()))))]
        path = [start]
        state[start] = 1
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[node] = 2
                stack.pop()
                path.pop()
                continue
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if not state.get(nxt):
                state[nxt] = 1
                stack.append((nxt, iter(sorted(graph.get(nxt, ())))))
                path.append(nxt)
    return None


def main():
    layers, deps = cmake_layers()
    files = modules()
    problems = []
    edges = set()
    for rel in files:
        layer = rel.split("/")[0]
        if layer not in layers:
            problems.append("src/%s: folder %s is not a layer of CMakeLists.txt's KDP_LAYERS"
                            % (rel, layer))
            continue
        allowed = set(deps[layer]) | {layer}
        text = open(files[rel][0]).read()
        for inc in INCLUDE.findall(text):
            if inc.endswith(".pb-c.h") or os.path.isfile(os.path.join(ROOT, "include", inc)):
                continue  # generated messages (plugin layer's include path), the public API
            if "/" not in inc:
                where = [m for m in files if m.split("/")[1] == inc]
                problems.append("src/%s: #include \"%s\": name the layer (\"%s\")"
                                % (rel, inc, where[0] if where else "layer/" + inc))
                continue
            if ".." in inc.split("/"):
                problems.append("src/%s: #include \"%s\": no \"..\" in includes" % (rel, inc))
                continue
            target_layer = inc.split("/")[0]
            if inc not in files:
                problems.append("src/%s: #include \"%s\": no such header in src/" % (rel, inc))
                continue
            if target_layer not in allowed:
                problems.append("src/%s: #include \"%s\": layer %s may use only %s"
                                % (rel, inc, layer, ", ".join(sorted(allowed))))
            edges.add((rel, inc))
    graph = {}
    for a, b in edges:
        ma, mb = module(a), module(b)
        if ma != mb:
            graph.setdefault(ma, set()).add(mb)
    cycle = find_cycle(graph)
    if cycle:
        problems.append("a cycle between modules: %s" % " -> ".join(cycle))
    if "--graph" in sys.argv:
        for a in sorted(graph):
            print("%s -> %s" % (a, ", ".join(sorted(graph[a]))))
    for p in problems:
        print(p)
    if problems:
        print("check_layers: %d problem(s)" % len(problems))
        return 1
    print("check_layers: %d files, %d modules, %d edges between them, layers %s: no upward "
          "include, no cycle" % (len(files), len({module(f) for f in files}),
                                 sum(len(v) for v in graph.values()), " < ".join(layers)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
