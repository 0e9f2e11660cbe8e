#!/usr/bin/python3
"""Writes the seed inputs of fuzz_plugin_rpc, fuzz_validate, fuzz_devices and fuzz_podres
into fuzz/corpus/<target>/seed_* (see each target's header comment for the
input format). Run from anywhere; overwrites only seed_* files, never the
crash regressions (crash_*) or units libFuzzer added.

    /usr/bin/python3 fuzz/gen_seeds.py
"""

import os
import struct
import sys

sys.dont_write_bytecode = True
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def varint(n):
    out = b""
    n &= (1 << 64) - 1
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


def vi(field, n):
    return varint(field << 3) + varint(n)


def allocate(*containers):
    return b"".join(ld(1, b"".join(ld(1, i) for i in ids)) for ids in containers)


def preferred(available, must, size):
    c = b"".join(ld(1, i) for i in available) + b"".join(ld(2, i) for i in must) + vi(3, size)
    return ld(1, c)


def prestart(*ids):
    return b"".join(ld(1, i) for i in ids)


def write(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed_" + name), "wb") as f:
        f.write(data)


def plugin_rpc():
    OPT, LIST_AND_WATCH, PREF, ALLOC, PRE, UNK = 0, 1, 2, 3, 4, 5
    msgs = {
        OPT: [("empty", b""), ("junk", b"\x0a\x03abc")],
        LIST_AND_WATCH: [("empty", b"")],
        PREF: [("ab_d", preferred(["a", "b", "d"], ["a"], 2)),
               ("odd", preferred(["x\ny", "a"], ["\x01", "b"], 7)),
               ("neg", preferred(["a"], [], -1)),
               ("two", preferred(["a"], [], 1) + preferred(["b", "d"], ["d"], 1))],
        ALLOC: [("a", allocate(["a"])), ("bd", allocate(["b", "d"])),
                ("two", allocate(["a"], ["e", "sleep"])), ("unknown", allocate(["zz"])),
                ("unhealthy", allocate(["c"])), ("none", b""), ("empty_ctr", allocate([])),
                ("sleep", allocate(["sleep"])), ("long", allocate(["L" * 255])),
                ("pct", allocate(['pct%2F"q'])), ("bad", b"\x0a\xff\xff")],
        PRE: [("ac", prestart("a", "c")), ("unknown", prestart("nope")), ("none", b"")],
        UNK: [("x", b"x")],
    }
    for method, items in msgs.items():
        for plugin in (0, 1, 2):
            for name, m in items:
                flags = method | plugin << 3
                write("plugin_rpc", "m%d_p%d_%s" % (method, plugin, name), bytes([flags]) + m)
    # a few with a timeout, with churn, and raw framings
    write("plugin_rpc", "law_churn", bytes([LIST_AND_WATCH | 1 << 3 | 128]))
    write("plugin_rpc", "alloc_churn", bytes([ALLOC | 128]) + allocate(["b"]))
    write("plugin_rpc", "alloc_timeout", bytes([ALLOC | 2 << 3 | 64]) + allocate(["sleep"]))
    write("plugin_rpc", "law_timeout", bytes([LIST_AND_WATCH | 64]))
    # the churn swaps "a" for "f": a request naming both never reaches an op
    write("plugin_rpc", "pre_churn_af", bytes([PRE | 1 << 3 | 128]) + prestart("a", "f"))
    for framing, name in ((0x06, "whole"), (0x00, "bytewise"), (0x08, "halfopen"),
                          (0x16, "rst"), (0x46, "two_streams"), (0x86, "hangup"),
                          (0x26, "own_prefix")):
        for method, m in ((ALLOC, allocate(["a", "b"])), (LIST_AND_WATCH, b""),
                          (PREF, preferred(["a", "b"], [], 1))):
            body = m if not framing & 0x20 else struct.pack(">BI", 0, len(m)) + m
            write("plugin_rpc", "raw_%s_m%d" % (name, method),
                  bytes([method | 1 << 3 | 32, framing]) + body)


def validate():
    seeds = {
        "names": ["example.com/gopher", "kdp.test/dev", "requests.x/y", "kubernetes.io/gpu",
                  "a" * 244 + "/n", "a" * 245 + "/n", "ex-.com/x", "ex.com/-x", "ex.com/a/b"],
        "sockets": ["gopher.sock", "..", ".", "kubelet.sock", "a/b", "x\ny", "s" * 101],
        "ids": ["dev0", "a,b", "a b", "\x7f", "L" * 255, "L" * 256, "pct%2F"],
        "perms": ["rw", "rwm", "mwr", "rr", "", "x"],
        "paths": ["/dev/null", "dev/null", "/a\nb", "/" + "p" * 4094, "/" + "p" * 4095],
        "cdi": ["vendor.com/class=dev", "v/c=d:0", "1v/c=d", "v/c=", "v=c/d", "v/c=d/e"],
        "env": ["KEY", "A=B", "", "\x01"],
        "config": ["example.com/x", "x.sock", "/tmp", "MY_ENV"],
        "config_bad": ["example.com/x", "../x", "/tmp", "A=B"],
        "config_long": ["example.com/x", "s" * 100, "/tmp/" + "d" * 60, ""],
    }
    for name, strs in seeds.items():
        write("validate", name, b"\0".join(s.encode("latin-1") for s in strs))


def device(flags, numa, id, host=b"", cont=b"", perm=b""):
    out = bytes([flags, len(numa)])
    out += b"".join(struct.pack("<q", n) for n in numa)
    for s in (id, host, cont, perm):
        out += (s.encode() if isinstance(s, str) else s) + b"\0"
    return out


def devices():
    write("devices", "simple", device(0, [], "a") + device(1, [0], "b") + device(0, [1, 0, 1], "c"))
    write("devices", "paths", device(8 | 16 | 32, [], "d", "/dev/d", "/dev/x", "rwm") +
          device(8 | 32, [-1], "e", "/dev/e", "", "rr"))
    write("devices", "dup", device(0, [], "a") + device(1, [], "a") + device(4, [], "x"))
    write("devices", "bad", device(2, [], "h") + device(3, [], "i") + device(64, [0, 0], "j") +
          device(0, [], "a/b") + device(8, [], "k", "rel/path"))
    write("devices", "health", device(128, [], "a") + device(129, [2**62, -(2**63)], "b"))


def cdevs(resource, ids, numa=()):
    """A ContainerDevices (proto/podresources.proto)."""
    topo = b"".join(ld(1, vi(1, n)) for n in numa)
    return ld(1, resource) + b"".join(ld(2, i) for i in ids) + (ld(3, topo) if numa else b"")


def claim(ns, name, *devices):
    """A DynamicResource: devices are (driver, pool, device, share_id, [cdi ids])."""
    res = b"".join(ld(4, b"".join(ld(1, ld(1, i)) for i in ids) + ld(2, drv) + ld(3, pool) +
                      ld(4, dev) + (ld(5, share) if share else b""))
                   for drv, pool, dev, share, ids in devices)
    return ld(2, name) + ld(3, ns) + res


def pod(ns, name, *containers):
    """A PodResources: containers are (name, [cdevs bytes][, [claim bytes]])."""
    c = b"".join(ld(3, ld(1, cn[0]) + b"".join(ld(2, g) for g in cn[1]) + vi(3, 4) +
                    b"".join(ld(5, d) for d in (cn[2] if len(cn) > 2 else [])))
                 for cn in containers)
    return ld(1, name) + ld(2, ns) + c


def podres():
    gpu = cdevs("example.com/gpu", ["gpu0-1", "gpu1-0"], [0, 1])
    nic = cdevs("example.com/nic", ["nic3"])
    listed = (ld(1, pod("default", "trainer", ("main", [gpu]), ("side", [nic, gpu]))) +
              ld(1, pod("batch", "job-7", ("w", [cdevs("example.com/gpu", ["gpu0-0"], [1])]))))
    write("podres", "list", bytes([0, 2]) + listed)
    write("podres", "list_plain", bytes([0, 0]) + listed)
    write("podres", "get", bytes([1, 2]) + ld(1, pod("default", "trainer", ("main", [gpu]))))
    write("podres", "allocatable", bytes([2, 0]) + ld(1, gpu) + ld(1, nic) + vi(2, 3))
    write("podres", "empty_names", bytes([0, 0]) + ld(1, pod("", "p")) +
          ld(1, pod("ns", "p", ("", []))))
    write("podres", "empty_id", bytes([0, 3]) + ld(1, pod("ns", "p", ("c", [cdevs("r/x", ["a", ""])]))))
    write("podres", "truncated", bytes([0, 1]) + listed[:-5])
    gpus = claim("ml", "gpus", ("gpu.example.com", "node-a", "gpu-0", "", ["k8s.gpu.example.com/claim=u-gpu-0"]),
                 ("gpu.example.com", "node-a", "gpu-1", "0b7d6f1e-3c52-4a8e-9d35-1f2e3d4c5b6a", []))
    net = claim("ml", "net", ("nic.example.com", "node-a", "eth1", "", []))
    write("podres", "dra", bytes([0, 0]) + ld(1, pod("ml", "train", ("main", [nic], [gpus, net]),
                                                     ("side", [], [net]))))
    write("podres", "dra_bad", bytes([1, 0]) + ld(1, pod("ml", "t", ("c", [], [claim("ml", ""),
                                                                          claim("", "x")]))))


if __name__ == "__main__":
    plugin_rpc()
    validate()
    devices()
    podres()
