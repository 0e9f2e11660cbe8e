"""kdptest: the helpers of kdp's process-level Python tests (Python 3
stdlib only; the interop helpers also use grpcio; run with /usr/bin/python3).

Every test file (tests/<area>/*.py) finds it the same way, with these two
lines before its imports of kdptest (so a test runs by hand as under ctest:
`KDP_BIN_DIR=build/bin /usr/bin/python3 tests/<area>/test_x.py [-v] [Class.test]`):

    sys.dont_write_bytecode = True  # no __pycache__ in the source tree
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
    import kdptest  # noqa: E402
    from kdptest.plugin import PluginTest  # noqa: E402

Modules:
  proc      where binaries are (binary(): $KDP_BIN_DIR, default build/bin),
            log(), run() (a command to completion, bounded), Proc (a process:
            start, stdout lines and JSON events, stderr, bounded waits, stop),
            ProcTest (a TestCase: a temp dir, its processes stopped, sanitizer
            reports, a watchdog), wait_for(), T (the bound of one wait)
  figures   figure(), print_figures(), percentile(): measured, never asserted
  kubelet   Kubelet, the driver of kdp-test-kubelet (the kubelet emulator)
  plugin    PluginTest, PluginProc: plugins against the kubelet emulator
            (tests/integration, tests/robustness, tests/generic)
  kdpctl    KdpctlTest: kdpctl against real plugins (tests/kdpctl)
  interop   InteropTest, Server, echo_pb2: gRPC peers (tests/interop)
  rawh2     a raw HTTP/2 + gRPC client (tests/robustness)
  dockerfile  deploy/'s Dockerfiles read without Docker: stages, the files a
            stage copies, the packages it installs (tests/packaging)
"""

from .figures import figure, percentile, print_figures
from .proc import (REPO, T, Proc, ProcTest, Watchdog, bin_dir, binary, log, peak_kib,
                   proc_status, rss_kib, run, sanitizer_report, wait_for)

__all__ = ["REPO", "T", "Proc", "ProcTest", "Watchdog", "bin_dir", "binary", "figure", "log",
           "peak_kib", "percentile", "print_figures", "proc_status", "rss_kib", "run",
           "sanitizer_report", "wait_for"]
