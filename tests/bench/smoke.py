#!/usr/bin/python3
"""Smoke run of the benchmark harness (ctest bench_smoke): bench/run.sh with
tiny counts (--quick), then a check that results.json holds every figure for
both plugins and the floor, dra.json every figure for both DRA drivers, and
that the tables have every row. The values are
not checked: they depend on the machine.

    tests/bench/smoke.py BUILD_DIR
"""
import json
import os
import shutil
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
import kdptest  # noqa: E402

ROOT = kdptest.REPO
BOUND = 220.0  # of the run, below ctest's TIMEOUT (240): past it, it is killed and fails

# (path in results.json under "kdp" and "go") for every figure of the table
FIGURES = [
    ("exec_to_register_ms", "p50"),
    ("idle", "rss_kb"), ("idle", "rss_anon_kb"), ("idle", "rss_file_kb"), ("idle", "uss_kb"),
    ("idle", "threads"), ("idle", "cpu_ticks"), ("idle", "wakeups"),
    ("rss_after_allocates_kb",),
    ("allocate", "p50_us"), ("allocate", "p99_us"), ("allocate", "cpu_ms_per_10k"),
    ("allocate_pinned", "p50_us"), ("allocate_pinned", "p99_us"),
    ("allocate_pinned", "cpu_ms_per_10k"),
    ("update", "p50_us"), ("update", "p99_us"),
    ("reregister", "p50_ms"), ("reregister", "max_ms"),
    ("binary", "stripped"), ("binary", "shared_libs"),
]
# kdp only: the metrics endpoint on (idle with no client, Allocate on one core)
KDP_ONLY = [("idle_metrics", "cpu_ticks"), ("idle_metrics", "wakeups"),
            ("allocate_pinned_metrics", "p50_us"), ("allocate_pinned_metrics", "p99_us"),
            ("allocate_pinned_metrics", "cpu_ms_per_10k")]
LIST_AND_WATCH = ("update_ms", "bytes", "exec_to_first_list_ms", "rss_kb")
# bench/dra.py's, for both drivers
DRA = [("start_to_published_ms",), ("publish_1000_ms",), ("idle", "rss_kb"),
       ("idle", "rss_anon_kb"), ("idle", "threads"), ("idle", "shared_libs"),
       ("prepare_1", "p50_us"), ("prepare_1", "p99_us"), ("prepare_16", "p50_us"),
       ("prepare_16", "p99_us"), ("after_cycles", "rss_kb")]
# bench/dra.py's, kdp only: a driver with a bind op (binding conditions)
DRA_BIND = [("rss_anon_kb_without",), ("rss_anon_kb_with",), ("allocated_to_ready", "p50_us"),
            ("allocated_to_ready", "p99_us")]
FLOOR = [("exec_to_register_ms", "p50"), ("same_core", "p50"), ("cross_core", "p50"),
         ("echo_pinned_p50_us",), ("sleep_rss_kb",)]


def get(d, path):
    for k in path:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def main():
    build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
    out = os.path.join(build, "bench-smoke")
    shutil.rmtree(out, ignore_errors=True)
    env = dict(os.environ, KDP_BENCH_OUT=out)
    r = kdptest.run([os.path.join(ROOT, "bench", "run.sh"), build, "--quick"], BOUND,
                    check_rc=0, echo=False, env=env)
    kdptest.log(r.stderr.rstrip())  # its progress; stdout is in results.md
    with open(os.path.join(out, "results.json")) as f:
        res = json.load(f)
    missing = []
    for who in ("kdp", "go"):
        paths = FIGURES + [(k, f) for k in res[who] if k.startswith("list_and_watch_") for f in LIST_AND_WATCH]
        if not any(k.startswith("list_and_watch_") for k in res[who]):
            missing.append("%s: no ListAndWatch-size figures" % who)
        for p in paths:
            v = get(res[who], p)
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                missing.append("%s.%s = %r" % (who, ".".join(p), v))
    for p in KDP_ONLY:
        if not isinstance(get(res["kdp"], p), (int, float)):
            missing.append("kdp.%s" % ".".join(p))
    for p in FLOOR:
        if not isinstance(get(res["floor"], p), (int, float)):
            missing.append("floor.%s" % ".".join(p))
    with open(os.path.join(out, "results.md")) as f:
        table = f.read()
    rows = [l for l in table.splitlines() if l.startswith("| ") and not l.startswith("| figure")]
    if len(rows) < len(FIGURES):
        missing.append("results.md has %d rows" % len(rows))
    if shutil.which("gnuplot") and not os.path.getsize(os.path.join(out, "bench-latency.png")):
        missing.append("bench-latency.png")
    with open(os.path.join(out, "dra.json")) as f:
        dra = json.load(f)
    for who in ("kdp", "go"):
        for p in DRA:
            if not isinstance(get(dra[who], p), (int, float)):
                missing.append("dra %s.%s" % (who, ".".join(p)))
    for p in DRA_BIND:
        if not isinstance(get(dra.get("bind"), p), (int, float)):
            missing.append("dra bind.%s" % ".".join(p))
    with open(os.path.join(out, "dra.md")) as f:
        dra_rows = [l for l in f.read().splitlines()
                    if l.startswith("| ") and not l.startswith("| figure")]
    if len(dra_rows) != 10:
        missing.append("dra.md has %d rows, not 10" % len(dra_rows))
    if missing:
        print("bench smoke: missing figures:\n  " + "\n  ".join(missing))
        sys.exit(1)
    print(table, end="")
    print("bench smoke: every figure is there (%d rows, %.1f s)" % (len(rows), res["seconds"]))


if __name__ == "__main__":
    main()
