#!/usr/bin/python3
"""The metrics and health endpoint (kdp_ctx_serve_metrics) end to end: real
plugin processes under the kubelet emulator, the page read by Prometheus's own
text parser (kdp-promparse: github.com/prometheus/common/expfmt, Debian's
golang-github-prometheus-common-dev) and scraped by the real Prometheus server
(/usr/bin/prometheus, started and stopped here), /healthz through a plugin's
life, and requests that must get a 4xx and never a crash.

usage: KDP_BIN_DIR=<build>/bin KDP_PROMPARSE=<build>/metrics-go/kdp-promparse \
       /usr/bin/python3 test_metrics.py [-v] [Test.name ...]
"""

import json
import os
import re
import select
import socket
import sys
import time
import unittest
import urllib.parse
import urllib.request

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
import kdptest  # noqa: E402
from kdptest import T, log  # noqa: E402
from kdptest.metrics import get, parse, value  # noqa: E402
from kdptest.plugin import PluginTest  # noqa: E402
from kdptest.proc import Proc, wait_for  # noqa: E402

RES = "kdp.test/dev"
SERVING = r"metrics: serving /metrics and /healthz on (\S+)"
PROMETHEUS = "/usr/bin/prometheus"


# Connections one address may hold (src/runtime/http.c DEFAULT_PER_IP).
PER_ADDRESS = 4


def raw(address, data, timeout=T):
    """Sends raw bytes, returns what comes back until the server closes (or
    the timeout)."""
    host, port = address.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=timeout)
    try:
        s.sendall(data)
        out = b""
        while True:
            try:
                b = s.recv(65536)
            except (socket.timeout, ConnectionResetError):
                break
            if not b:
                break
            out += b
        return out
    finally:
        s.close()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class MetricsTest(PluginTest):
    TEST_BOUND = 180.0

    def plugin_with_metrics(self, address="127.0.0.1:0", *args):
        p = self.start_test_plugin("--metrics-address", address, *args)
        line = p.wait_log(SERVING)
        return p, re.search(SERVING, line).group(1)

    def test_page_parsed_by_prometheus_parser(self):
        kl = self.kubelet()
        p, addr = self.plugin_with_metrics("127.0.0.1:0", "--devices", "d0,d1,d2:unhealthy",
                                           "--fail-id", "d1")
        kl.wait_event("registered", resource=RES)
        kl.wait_event("devices", resource=RES)
        self.assertOk(kl.command("allocate %s d0" % RES))
        self.assertFailed(kl.command("allocate %s d1" % RES), "InvalidArgument")
        self.assertFailed(kl.command("allocate %s d2" % RES), "InvalidArgument")
        self.assertFailed(kl.command("allocate %s nope" % RES), "InvalidArgument")
        p.command("health d0 Unhealthy")
        kl.wait_event("devices", resource=RES, unhealthy=2)
        status, headers, page = get(addr, "/metrics")
        self.assertEqual(status, 200)
        self.assertEqual(headers.get("Content-Type"), "text/plain; version=0.0.4; charset=utf-8")
        log(page)
        f = parse(page)
        self.assertEqual(f["kdp_build_info"]["type"], "GAUGE")
        self.assertEqual(value(f, "kdp_build_info")["value"], 1)
        self.assertEqual(value(f, "kdp_plugin_up", resource=RES)["value"], 1)
        self.assertEqual(value(f, "kdp_devices", resource=RES, health="healthy")["value"], 1)
        self.assertEqual(value(f, "kdp_devices", resource=RES, health="unhealthy")["value"], 2)
        self.assertEqual(f["kdp_allocations_total"]["type"], "COUNTER")
        self.assertEqual(value(f, "kdp_allocations_total", resource=RES, code="OK")["value"], 1)
        self.assertEqual(value(f, "kdp_allocations_total", resource=RES,
                               code="INVALID_ARGUMENT")["value"], 3)
        h = value(f, "kdp_callback_duration_seconds", resource=RES, op="allocate")
        self.assertEqual(f["kdp_callback_duration_seconds"]["type"], "HISTOGRAM")
        self.assertEqual(h["count"], 2)  # d0 and d1 reached the callback
        self.assertEqual(h["buckets"]["10"], 2)
        self.assertGreater(h["sum"], 0)
        self.assertEqual(value(f, "kdp_health_transitions_total", resource=RES,
                               to="unhealthy")["value"], 1)
        self.assertEqual(value(f, "kdp_registrations_total", resource=RES)["value"], 1)
        self.assertEqual(value(f, "kdp_listandwatch_streams", resource=RES)["value"], 1)
        self.assertGreaterEqual(value(f, "kdp_listandwatch_messages_total",
                                      resource=RES)["value"], 2)
        self.assertGreater(value(f, "kdp_listandwatch_last_message_bytes",
                                 resource=RES)["value"], 0)
        self.assertEqual(value(f, "kdp_listandwatch_message_limit_bytes",
                               resource=RES)["value"], 4194304)
        self.assertEqual(value(f, "kdptest_allocated_ids_total", resource=RES)["value"], 2)
        self.assertEqual(value(f, "kdp_kubelet_restarts_total", resource=RES)["value"], 0)

        # the kubelet restarts: counted, and registered again
        mark = kl.mark()
        kl.command("restart")
        kl.wait_event("registered", resource=RES, since=mark)
        wait_for(lambda: value(parse(get(addr, "/metrics")[2]), "kdp_registrations_total",
                               resource=RES)["value"] == 2, T, "a second registration counted")
        f = parse(get(addr, "/metrics")[2])
        self.assertGreaterEqual(value(f, "kdp_kubelet_restarts_total", resource=RES)["value"], 1)
        self.assertEqual(get(addr, "/healthz")[:3:2], (200, "ok\n"))

    def test_health_checks_counted(self):
        kl = self.kubelet()
        probes = self.subdir("probes")
        with open(os.path.join(probes, "d1"), "w") as f:
            f.write("fail")
        p, addr = self.plugin_with_metrics("127.0.0.1:0", "--devices", "d0,d1",
                                           "--probe-dir", probes, "--probe-interval-ms", "100",
                                           "--probe-unhealthy-after", "2")
        kl.wait_event("devices", resource=RES, unhealthy=1)

        def held():
            f = parse(get(addr, "/metrics")[2])
            return value(f, "kdp_probe_unhealthy_devices", resource=RES)["value"] == 1
        wait_for(held, T, "the probe holds d1 Unhealthy on the page")
        f = parse(get(addr, "/metrics")[2])
        self.assertEqual(f["kdp_probes_total"]["type"], "COUNTER")
        n = value(f, "kdp_probes_total", resource=RES)["value"]
        fails = value(f, "kdp_probe_failures_total", resource=RES)["value"]
        self.assertGreaterEqual(fails, 2)
        self.assertGreater(n, fails)  # d0's probes succeed
        self.assertEqual(value(f, "kdp_probe_down", resource=RES)["value"], 0)
        h = value(f, "kdp_callback_duration_seconds", resource=RES, op="probe")
        self.assertGreaterEqual(h["count"], n - 1)  # one may be running
        self.assertEqual(value(f, "kdp_health_transitions_total", resource=RES,
                               to="unhealthy")["value"], 1)
        self.assertEqual(value(f, "kdp_devices", resource=RES, health="unhealthy")["value"], 1)

    def test_healthz_through_a_plugins_life(self):
        sock = self.file("metrics.sock")  # not in the dir: the kubelet clears its sockets
        p, addr = self.plugin_with_metrics("unix:" + sock, "--devices", "d0")
        self.assertEqual(addr, sock)
        # no kubelet yet
        want = (503, "%s: waiting for kubelet.sock\n" % RES)
        wait_for(lambda: get(sock, "/healthz")[::2] == want, T, "/healthz 503 before the kubelet")
        kl = self.kubelet()
        kl.wait_event("registered", resource=RES)
        wait_for(lambda: get(sock, "/healthz")[0] == 200, T, "/healthz 200 once registered")
        self.assertEqual(get(sock, "/healthz")[2], "ok\n")
        # the kubelet goes away: not registered any more
        kl.command("stop-server")
        wait_for(lambda: get(sock, "/healthz")[0] == 503, T, "/healthz 503 with the kubelet away")
        body = get(sock, "/healthz")[2]
        self.assertRegex(body, r"^%s: (waiting for kubelet.sock|registering|registration "
                               r"refused: .*)\n$" % re.escape(RES))
        f = parse(get(sock, "/metrics")[2])
        self.assertEqual(value(f, "kdp_plugin_up", resource=RES)["value"], 0)
        self.assertStopsCleanly(p)
        self.assertFalse(os.path.exists(sock), "the metrics socket is removed at exit")

    def test_healthz_says_what_keeps_a_plugin_from_starting(self):
        # the list op fails (its file is missing): retried with backoff until it works
        lst = self.file("list")
        p, addr = self.plugin_with_metrics("127.0.0.1:0", "--list-file", lst)
        want = (503, "%s: waiting for kubelet.sock; list op failing: No such file or directory\n"
                % RES)  # it serves meanwhile (no devices)
        wait_for(lambda: get(addr, "/healthz")[::2] == want, T, "/healthz: the list op failing")
        with open(lst + ".tmp", "w") as f:
            f.write("d0\n")
        os.rename(lst + ".tmp", lst)
        want = (503, "%s: waiting for kubelet.sock\n" % RES)
        wait_for(lambda: get(addr, "/healthz")[::2] == want, 2 * T, "/healthz once it lists")
        self.assertStopsCleanly(p)
        # the device-plugin directory does not exist (yet)
        missing = self.path("files", "not-yet")
        q = self.start_test_plugin("--metrics-address", "127.0.0.1:0", "--devices", "d0",
                                   dir=missing, name="no-dir")
        addr = re.search(SERVING, q.wait_log(SERVING)).group(1)
        want = (503, "%s: device-plugin directory unusable: No such file or directory\n" % RES)
        wait_for(lambda: get(addr, "/healthz")[::2] == want, T, "/healthz: no directory")
        os.makedirs(missing)
        want = (503, "%s: waiting for kubelet.sock\n" % RES)
        wait_for(lambda: get(addr, "/healthz")[::2] == want, T, "/healthz once it exists")
        self.assertStopsCleanly(q)

    def test_several_plugins_one_page(self):
        # two plugins on one context: one page, one /healthz line per plugin
        p = self.start_test_plugin("--metrics-address", "127.0.0.1:0", "--devices", "a",
                                   resources=(RES, "kdp.test/other"))
        addr = re.search(SERVING, p.wait_log(SERVING)).group(1)
        want = sorted("%s: waiting for kubelet.sock" % r for r in (RES, "kdp.test/other"))
        wait_for(lambda: sorted(get(addr, "/healthz")[2].splitlines()) == want, T,
                 "/healthz: one line per plugin")
        self.assertEqual(get(addr, "/healthz")[0], 503)
        f = parse(get(addr, "/metrics")[2])
        self.assertEqual({m["labels"]["resource"] for m in f["kdp_plugin_up"]["metrics"]},
                         {RES, "kdp.test/other"})

    def test_bad_requests_never_crash(self):
        p, addr = self.plugin_with_metrics()
        self.assertEqual(get(addr, "/nope")[0], 404)
        self.assertEqual(get(addr, "/metrics?x=1")[0], 200)
        st, hdr, _ = get(addr, "/metrics", method="POST")
        self.assertEqual(st, 405)
        self.assertEqual(hdr.get("Allow"), "GET, HEAD")
        self.assertEqual(get(addr, "/healthz", method="DELETE")[0], 405)
        st, hdr, body = get(addr, "/metrics", method="HEAD")
        self.assertEqual((st, body), (200, ""))
        self.assertEqual(get(addr, "/metrics", body=b"x" * 100)[0], 413)
        big = raw(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 100000 +
                  b"\r\n\r\n")
        self.assertRegex(big[:12], rb"HTTP/1\.[01] 4\d\d")
        garbage = raw(addr, b"\x00\x01\x02 nonsense\r\n\r\n")
        self.assertTrue(garbage == b"" or re.match(rb"HTTP/1\.[01] 4\d\d", garbage), garbage)
        chunked = raw(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked"
                            b"\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
        self.assertRegex(chunked[:12], rb"HTTP/1\.1 4\d\d")
        # a slowloris client (half a request line, then nothing) does not
        # block the others; over-limit connections are refused, never queued
        host, port = addr.rsplit(":", 1)
        slow = socket.create_connection((host, int(port)))
        slow.sendall(b"GET /met")
        t0 = time.monotonic()
        self.assertEqual(get(addr, "/healthz")[0], 503)
        self.assertLess(time.monotonic() - t0, 5.0)
        held = []
        for _ in range(40):
            s = socket.create_connection((host, int(port)))
            s.sendall(b"GET /")
            held.append(s)
        closed = set()
        deadline = time.monotonic() + 5.0  # the server closes the excess at accept
        while len(closed) < 40 + 1 - PER_ADDRESS and time.monotonic() < deadline:
            ready, _, _ = select.select([s for s in held if s not in closed], [], [], 0.2)
            for s in ready:
                try:
                    if s.recv(100) == b"":
                        closed.add(s)
                except ConnectionResetError:
                    closed.add(s)
        closed = len(closed)
        log("FIGURE over-limit connections closed at once: %d of 40 (%d per address, one "
            "slowloris)" % (closed, PER_ADDRESS))
        self.assertGreaterEqual(closed, 40 + 1 - PER_ADDRESS)
        for s in held + [slow]:
            s.close()
        def served():
            try:
                return get(addr, "/healthz")[0] == 503
            except OSError:  # a slot not freed yet: closed at accept
                return False
        wait_for(served, T, "served again once the others have gone")
        self.assertTrue(p.alive(), "the plugin is still running")
        self.assertStopsCleanly(p)

    def test_two_addresses_cannot_hold_healthz(self):
        """Finding: 16 connections from each of two addresses, each sending a
        byte every few seconds, made every probe time out while they ran.
        Now each address gets PER_ADDRESS connections: a probe from a third
        address is answered at once."""
        p, addr = self.plugin_with_metrics()
        host, port = addr.rsplit(":", 1)
        held = []
        for src in ("127.0.0.2", "127.0.0.3"):
            for _ in range(16):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.bind((src, 0))
                s.settimeout(T)
                try:
                    s.connect((host, int(port)))
                    s.sendall(b"G")
                except OSError:
                    pass
                held.append(s)
        try:
            for s in held:  # a byte more from each: not idle
                try:
                    s.sendall(b"E")
                except OSError:
                    pass
            t0 = time.monotonic()
            c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            c.bind(("127.0.0.4", 0))
            c.settimeout(5.0)
            c.connect((host, int(port)))
            c.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            answer = c.recv(100)
            c.close()
            log("FIGURE /healthz while two addresses hold 32 connections: answered in %.1f ms"
                % ((time.monotonic() - t0) * 1000))
            self.assertRegex(answer[:12], rb"HTTP/1\.1 (200|503)")
        finally:
            for s in held:
                s.close()
        self.assertStopsCleanly(p)

    def test_bad_address_and_address_in_use(self):
        p = self.start_test_plugin("--metrics-address", "localhost")
        self.assertNotEqual(p.wait_exit(), 0)
        p.wait_log(r"invalid address \"localhost\": no port .*accepted forms: HOST:PORT")
        busy = socket.socket()
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        try:
            env = dict(os.environ, KDP_METRICS_ADDRESS="127.0.0.1:%d" % port)
            s = self.plugin("kdp-example-simple", ["--device-plugin-dir", self.dir, "--count",
                                                   "1"], "simple.sock", ["example.com/simple"],
                            name="simple", env=env)
            self.assertNotEqual(s.wait_exit(), 0)
            s.wait_log(r"\$KDP_METRICS_ADDRESS=\"127.0.0.1:%d\" cannot be served" % port)
        finally:
            busy.close()
        env = dict(os.environ, KDP_METRICS_ADDRESS="127.0.0.1:0")
        s = self.plugin("kdp-example-simple", ["--device-plugin-dir", self.dir, "--count", "2"],
                        "simple.sock", ["example.com/simple"], name="simple2", env=env)
        addr = re.search(SERVING, s.wait_log(SERVING)).group(1)  # before the first list
        wait_for(lambda: value(parse(get(addr, "/metrics")[2]), "kdp_devices",
                               resource="example.com/simple", health="healthy")["value"] == 2,
                 T, "the two devices of the first list on the page")
        self.assertStopsCleanly(s)


@unittest.skipUnless(os.access(PROMETHEUS, os.X_OK), "needs Debian's prometheus")
class PrometheusTest(PluginTest):
    """The real Prometheus scrapes a plugin; the series are read back through
    its HTTP API."""
    TEST_BOUND = 180.0

    def start_prometheus(self, target):
        cfg = self.path("prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                    "scrape_configs:\n  - job_name: kdp\n    static_configs:\n"
                    "      - targets: ['%s']\n" % target)
        for attempt in range(5):
            port = free_port()
            prom = self.start_proc(Proc(
                [PROMETHEUS, "--config.file=" + cfg,
                 "--storage.tsdb.path=" + self.path("tsdb-%d" % attempt),
                 "--web.listen-address=127.0.0.1:%d" % port, "--log.level=warn"],
                name="prometheus", stdin=False))
            base = "http://127.0.0.1:%d" % port

            def ready():
                if not prom.alive():
                    return True
                try:
                    with urllib.request.urlopen(base + "/-/ready", timeout=1) as r:
                        return r.status == 200
                except OSError:
                    return False
            wait_for(ready, 60, "prometheus ready")
            if prom.alive():
                return prom, base
            log("prometheus exited (port %d taken?): retrying" % port)
        raise AssertionError("prometheus did not start")

    def api(self, base, path, **params):
        url = base + path + ("?" + urllib.parse.urlencode(params) if params else "")
        with urllib.request.urlopen(url, timeout=T) as r:
            out = json.loads(r.read())
        self.assertEqual(out["status"], "success", out)
        return out["data"]

    def query(self, base, q):
        return {json.dumps(s["metric"], sort_keys=True): float(s["value"][1])
                for s in self.api(base, "/api/v1/query", query=q)["result"]}

    def test_prometheus_scrapes_a_plugin(self):
        kl = self.kubelet()
        p = self.start_test_plugin("--metrics-address", "127.0.0.1:0", "--devices",
                                   "d0,d1,d2:unhealthy")
        addr = re.search(SERVING, p.wait_log(SERVING)).group(1)
        kl.wait_event("registered", resource=RES)
        self.assertOk(kl.command("allocate %s d0" % RES))
        self.assertFailed(kl.command("allocate %s d2" % RES), "InvalidArgument")
        prom, base = self.start_prometheus(addr)
        try:
            def up():
                t = self.api(base, "/api/v1/targets")["activeTargets"]
                return any(x["health"] == "up" for x in t)
            wait_for(up, 60, "the plugin's target up in Prometheus")
            wait_for(lambda: self.query(base, "kdp_build_info"), 30, "kdp_build_info scraped")
            bi = self.query(base, "kdp_build_info")
            self.assertEqual(list(bi.values()), [1.0])
            self.assertIn('"version": "%s"' % kdptest_version(), list(bi)[0])
            dev = self.query(base, 'kdp_devices{resource="%s"}' % RES)
            self.assertEqual(sorted((json.loads(k)["health"], v) for k, v in dev.items()),
                             [("healthy", 2.0), ("unhealthy", 1.0)])
            al = self.query(base, 'kdp_allocations_total{resource="%s"}' % RES)
            self.assertEqual(sorted((json.loads(k)["code"], v) for k, v in al.items()),
                             [("INVALID_ARGUMENT", 1.0), ("OK", 1.0)])
            up_ = self.query(base, "kdp_plugin_up")
            self.assertEqual(list(up_.values()), [1.0])
            log("FIGURE Prometheus read back %d kdp_devices, %d kdp_allocations_total series"
                % (len(dev), len(al)))
        finally:
            prom.stop()


def kdptest_version():
    with open(os.path.join(kdptest.REPO, "CMakeLists.txt")) as f:
        return re.search(r"project\(kdp VERSION (\S+)", f.read()).group(1)


if __name__ == "__main__":
    unittest.main(verbosity=2)
