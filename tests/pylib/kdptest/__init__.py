"""kdptest: the helpers of kdp's process-level tests, one package.

    proc         binaries ($KDP_BIN_DIR), JsonProc (a process whose stdout is
                 JSON events, bounded start/stop), sanitizer reports, log
    kubelet      Kubelet: the grpc-go kubelet emulator (tests/kubelet/main.go)
    integration  IntegrationTest, PluginProc: plugin processes against the
                 emulator, figures and percentiles
    kdpctl       Base, Proc: kdpctl against real plugins
    interop      the gRPC interop peers (grpc-go, grpcio), echo_pb2, watchdog
    rawh2        a raw HTTP/2 client for the robustness tests

A test file finds it with one line, then imports what it uses:

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
    from kdptest.integration import T, IntegrationTest

Python 3 stdlib only (grpcio for interop); run the tests with /usr/bin/python3.
Every process a test starts is stopped when the test ends, every wait is
bounded, every test works in its own temporary directory.
"""

import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
