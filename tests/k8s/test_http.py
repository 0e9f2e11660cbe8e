#!/usr/bin/python3
"""The API-server client's HTTP(S) (src/k8s/httpc) on kdp's loop, against a
real HTTPS server: Python's http.server + ssl in this process, certificates
made by the openssl CLI in the test's directory (a CA, a server certificate
for 127.0.0.1, a client certificate, and a second CA that signed none of
them). kdp-test-http runs the calls read from its stdin and prints one JSON
line per event (tests/k8s/http_client.c); every run ends with its idle
figures, checked each time: no timer armed, no socket watched, no wakeup.

usage: KDP_BIN_DIR=<build>/bin /usr/bin/python3 test_http.py [-v] [Test.name ...]
"""

import http.server
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import time
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
import kdptest  # noqa: E402
from kdptest import log  # noqa: E402
from kdptest.proc import ProcTest, binary, run, sanitizer_report  # noqa: E402

TOKEN = "s3cret-token"
STOP = threading.Event()  # set when a server stops: stalled handlers return


def openssl(*args, cwd):
    subprocess.run(["openssl"] + list(args), cwd=cwd, check=True, timeout=60,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def make_certs(d):
    """ca.crt, ca2.crt, server.{crt,key} (IP 127.0.0.1), client.{crt,key}."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    for ca in ("ca", "ca2"):
        openssl("req", "-x509", *ec, "-keyout", ca + ".key", "-out", ca + ".crt", "-days", "2",
                "-subj", "/CN=kdp-test-" + ca, "-addext", "basicConstraints=critical,CA:TRUE",
                "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)
    exts = {"server": "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
            "client": "extendedKeyUsage=clientAuth\n"}
    for name, ext in exts.items():
        with open(os.path.join(d, name + ".ext"), "w") as f:
            f.write(ext)
        openssl("req", *ec, "-keyout", name + ".key", "-out", name + ".csr",
                "-subj", "/CN=" + ("127.0.0.1" if name == "server" else "kdp-client"), cwd=d)
        openssl("x509", "-req", "-in", name + ".csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                "-CAcreateserial", "-out", name + ".crt", "-days", "2", "-extfile", name + ".ext",
                cwd=d)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, code, body, ctype="application/json"):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def chunk(self, data):
        data = data.encode() if isinstance(data, str) else data
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def start_chunked(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()

    def do_GET(self):
        path = self.path
        if path == "/get":
            if self.headers.get("Authorization") != "Bearer " + TOKEN:
                return self.answer(401, '{"kind":"Status","code":401}')
            return self.answer(200, '{"ok":true,"accept":"%s"}' % self.headers.get("Accept"))
        if path.startswith("/code/"):
            code = int(path[6:])
            return self.answer(code, '{"kind":"Status","code":%d}' % code)
        if path == "/slow":
            time.sleep(0.2)
            return self.answer(200, "slow")
        if path == "/stall":
            STOP.wait(10)
            return self.answer(200, "late")
        if path == "/big":
            return self.answer(200, "x" * 3000, "text/plain")
        if path == "/big-chunked":
            self.start_chunked()
            for _ in range(10):
                self.chunk("y" * 500)
            return self.chunk("")
        if path == "/watch":
            # four lines, split across chunks anywhere
            self.start_chunked()
            for part in ('{"n":1}\n{"n"', ':2}\n', '{"n":3', '}\r\n{"n":4}\n'):
                self.chunk(part)
                time.sleep(0.02)
            return self.chunk("")
        if path == "/watch-long":
            self.start_chunked()
            self.chunk('{"n":1}\n')
            for _ in range(5):
                self.chunk("z" * 500)
            self.chunk("\n")
            return self.chunk("")
        if path == "/watch-close":
            self.start_chunked()
            self.chunk('{"n":1}\n{"par')
            time.sleep(0.05)
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return None
        if path == "/watch-forever":
            self.start_chunked()
            n = 0
            try:
                while not STOP.wait(0.05) and n < 200:
                    n += 1
                    self.chunk('{"n":%d}\n' % n)
            except OSError:
                pass
            self.close_connection = True
            return None
        return self.answer(404, '{"kind":"Status","code":404}')

    def do_body(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n).decode()
        if self.path != "/echo":
            return self.answer(404, '{"kind":"Status","code":404}')
        return self.answer(201 if self.command == "POST" else 200, json.dumps(
            {"method": self.command, "ctype": self.headers.get("Content-Type"), "body": body}))

    do_POST = do_body
    do_PUT = do_body
    do_PATCH = do_body


class TLSServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def __init__(self, ctx):
        self.ctx = ctx
        super().__init__(("127.0.0.1", 0), Handler)

    def finish_request(self, request, client_address):
        # the handshake in the request's thread, not in the accepting one
        try:
            request = self.ctx.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):
            request.close()
            return
        try:
            super().finish_request(request, client_address)
        except OSError:
            pass
        finally:
            request.close()

    def handle_error(self, request, client_address):
        pass


def start_server(d, client_ca=None):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(d, "server.crt"), os.path.join(d, "server.key"))
    if client_ca:
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(client_ca)
    srv = TLSServer(ctx)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


class HttpTest(ProcTest):
    TEST_BOUND = 60.0

    @classmethod
    def setUpClass(cls):
        import tempfile
        cls.certs = tempfile.mkdtemp(prefix="kdp-certs-", dir="/tmp")
        make_certs(cls.certs)
        STOP.clear()
        cls.srv = start_server(cls.certs)
        cls.mtls = start_server(cls.certs, client_ca=os.path.join(cls.certs, "ca.crt"))
        cls.base = "https://127.0.0.1:%d" % cls.srv.server_address[1]
        cls.mtls_base = "https://127.0.0.1:%d" % cls.mtls.server_address[1]
        cls.ca = os.path.join(cls.certs, "ca.crt")

    @classmethod
    def tearDownClass(cls):
        STOP.set()
        for s in (cls.srv, cls.mtls):
            s.shutdown()
            s.server_close()
        import shutil
        shutil.rmtree(cls.certs, True)

    def calls(self, *lines, timeout=20, capath=None):
        """Runs the calls; returns ({id: [events]}, the idle summary). capath:
        a directory mounted over /etc/ssl/certs (libcurl's default CApath)
        for the run, in a mount namespace of its own."""
        argv = [binary("kdp-test-http")]
        if capath:
            argv = ["unshare", "--mount", "sh", "-c",
                    'mount --bind "$0" /etc/ssl/certs && exec "$1"', capath, argv[0]]
        r = run(argv, timeout=timeout, input="\n".join(lines) + "\n", check_rc=0, echo=False)
        rep = sanitizer_report(r.stderr)
        self.assertFalse(rep, rep)
        by_id = {}
        summary = None
        for line in r.stdout.splitlines():
            ev = json.loads(line)
            if ev.get("done"):
                summary = ev
            else:
                by_id.setdefault(ev["id"], []).append(ev)
        self.assertIsNotNone(summary, r.stdout + r.stderr)
        # idle once every call ended: nothing armed, watched, or woken
        self.assertEqual((summary["timeout_ms"], summary["watched"], summary["wakeups"]),
                         (-1, 0, 0), summary)
        return by_id, summary

    def one(self, spec, **kw):
        by_id, _ = self.calls("x " + spec, **kw)
        evs = by_id["x"]
        log("  %s -> %s" % (spec, evs[-1]))
        return evs

    def ca_arg(self):
        return "ca=" + self.ca

    def test_get_with_bearer_token(self):
        ev = self.one("GET %s/get %s token=%s header=Accept:application/json"
                      % (self.base, self.ca_arg(), TOKEN))[-1]
        self.assertEqual((ev["status"], ev["code"], ev["error"]), (0, 200, None))
        self.assertEqual(json.loads(ev["body"]), {"ok": True, "accept": "application/json"})
        ev = self.one("GET %s/get %s token=wrong" % (self.base, self.ca_arg()))[-1]
        self.assertEqual((ev["status"], ev["code"]), (0, 401))

    def test_post_put_json(self):
        for method, code in (("POST", 201), ("PUT", 200), ("PATCH", 200)):
            ev = self.one('%s %s/echo %s body={"a":[1,2]} ctype=application/json'
                          % (method, self.base, self.ca_arg()))[-1]
            self.assertEqual((ev["status"], ev["code"]), (0, code), ev)
            self.assertEqual(json.loads(ev["body"]), {"method": method, "ctype": "application/json",
                                                      "body": '{"a":[1,2]}'})

    def test_non_2xx_passed_through(self):
        for code in (409, 404, 403, 500):
            ev = self.one("GET %s/code/%d %s" % (self.base, code, self.ca_arg()))[-1]
            self.assertEqual((ev["status"], ev["code"], ev["error"]), (0, code, None))
            self.assertEqual(json.loads(ev["body"])["code"], code)
        # a watch answered 403: the body comes with done, not as lines
        evs = self.one("GET %s/code/403 %s stream=1" % (self.base, self.ca_arg()))
        self.assertEqual(len(evs), 1, evs)
        self.assertEqual((evs[0]["code"], json.loads(evs[0]["body"])["code"]), (403, 403))

    def test_wrong_ca_refused(self):
        ev = self.one("GET %s/get ca=%s token=%s"
                      % (self.base, os.path.join(self.certs, "ca2.crt"), TOKEN))[-1]
        self.assertEqual((ev["status"], ev["code"]), (-1, 0), ev)  # -EPERM
        self.assertIn("certificate verify failed", ev["error"])
        # no CA given: the system's CAs do not know ours either
        ev = self.one("GET %s/get token=%s" % (self.base, TOKEN))[-1]
        self.assertEqual(ev["status"], -1, ev)
        # a CA file that does not exist
        ev = self.one("GET %s/get ca=%s" % (self.base, self.path("nope.crt")))[-1]
        self.assertLess(ev["status"], 0, ev)
        self.assertTrue(ev["error"], ev)

    def test_only_the_configured_ca_trusted(self):
        """With a CA configured (a kubeconfig's, the service account's), it
        alone is trusted: not the CAs hashed in the system's CApath, where
        libcurl also looks by default (client-go trusts the configured CA
        only). Our server's CA is put there, in a mount namespace."""
        if os.geteuid() != 0 or not shutil.which("unshare") or not os.path.isdir("/etc/ssl/certs"):
            self.skipTest("needs root, unshare and /etc/ssl/certs (a mount namespace)")
        capath = self.path("capath")
        os.makedirs(capath)
        shutil.copy(self.ca, os.path.join(capath, "kdp-test-ca.pem"))
        openssl("rehash", capath, cwd=capath)
        # curl's default bundle, in the same directory, holds another CA
        shutil.copy(os.path.join(self.certs, "ca2.crt"), os.path.join(capath,
                                                                     "ca-certificates.crt"))
        # no CA configured: the system's trust, whose CApath now holds our CA
        # (the setup works: the CApath is what trusts the server)
        by_id, _ = self.calls("x GET %s/get token=%s" % (self.base, TOKEN), capath=capath)
        self.assertEqual((by_id["x"][-1]["status"], by_id["x"][-1]["code"]), (0, 200), by_id)
        # another CA configured: refused, and the token never sent
        by_id, _ = self.calls("x GET %s/get ca=%s token=%s"
                              % (self.base, os.path.join(self.certs, "ca2.crt"), TOKEN),
                              capath=capath)
        ev = by_id["x"][-1]
        self.assertEqual((ev["status"], ev["code"]), (-1, 0), ev)
        self.assertIn("certificate verify failed", ev["error"])

    def test_client_certificate(self):
        d = self.certs
        ev = self.one("GET %s/code/200 %s cert=%s key=%s" % (
            self.mtls_base, self.ca_arg(), os.path.join(d, "client.crt"),
            os.path.join(d, "client.key")))[-1]
        self.assertEqual((ev["status"], ev["code"]), (0, 200), ev)
        # the server requires one: without it, an error and no answer
        ev = self.one("GET %s/code/200 %s" % (self.mtls_base, self.ca_arg()))[-1]
        self.assertLess(ev["status"], 0, ev)
        self.assertEqual(ev["code"], 0, ev)
        self.assertTrue(ev["error"], ev)
        # an unreadable client key: -EINVAL before any byte is sent
        ev = self.one("GET %s/code/200 %s cert=%s key=%s" % (
            self.mtls_base, self.ca_arg(), os.path.join(d, "client.crt"), self.path("no.key")))[-1]
        self.assertEqual(ev["status"], -22, ev)

    def test_connection_refused(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()  # nothing listens there now
        ev = self.one("GET https://127.0.0.1:%d/get %s" % (port, self.ca_arg()))[-1]
        self.assertEqual((ev["status"], ev["code"]), (-111, 0), ev)  # -ECONNREFUSED
        self.assertIn("onnect", ev["error"])

    def test_total_timeout(self):
        t0 = time.monotonic()
        ev = self.one("GET %s/stall %s timeout=300" % (self.base, self.ca_arg()))[-1]
        took = time.monotonic() - t0
        self.assertEqual(ev["status"], -110, ev)  # -ETIMEDOUT
        self.assertIn("timed out", ev["error"])
        self.assertLess(took, 5.0)

    def test_body_bound(self):
        for path in ("big", "big-chunked"):
            ev = self.one("GET %s/%s %s max=1000" % (self.base, path, self.ca_arg()))[-1]
            self.assertEqual(ev["status"], -90, ev)  # -EMSGSIZE
            self.assertTrue(ev["error"], ev)
        ev = self.one("GET %s/big %s max=3000" % (self.base, self.ca_arg()))[-1]
        self.assertEqual((ev["status"], ev["len"]), (0, 3000), ev)

    def test_watch_lines_across_chunks(self):
        evs = self.one("GET %s/watch %s stream=1 token=%s" % (self.base, self.ca_arg(), TOKEN))
        self.assertEqual([e["line"] for e in evs[:-1]],
                         ['{"n":1}', '{"n":2}', '{"n":3}', '{"n":4}'])
        self.assertEqual((evs[-1]["status"], evs[-1]["code"], evs[-1]["len"]), (0, 200, 0))

    def test_watch_line_too_long(self):
        evs = self.one("GET %s/watch-long %s stream=1 max=1000" % (self.base, self.ca_arg()))
        self.assertEqual([e.get("line") for e in evs[:-1]], ['{"n":1}'])
        self.assertEqual(evs[-1]["status"], -90, evs)  # -EMSGSIZE
        self.assertIn("line", evs[-1]["error"])

    def test_watch_server_closes(self):
        evs = self.one("GET %s/watch-close %s stream=1" % (self.base, self.ca_arg()))
        self.assertEqual([e.get("line") for e in evs[:-1]], ['{"n":1}'])
        self.assertLess(evs[-1]["status"], 0, evs)
        self.assertTrue(evs[-1]["error"], evs)

    def test_cancel(self):
        by_id, _ = self.calls(
            "a GET %s/watch-forever %s stream=1 cancel_lines=3" % (self.base, self.ca_arg()),
            "b GET %s/watch-forever %s stream=1 cancel_ms=300" % (self.base, self.ca_arg()),
            "c GET %s/stall %s cancel_ms=200" % (self.base, self.ca_arg()))
        a = by_id["a"]
        self.assertEqual([e.get("line") for e in a[:3]], ['{"n":1}', '{"n":2}', '{"n":3}'])
        self.assertEqual(a[3:], [{"id": "a", "cancelled": True, "lines": 3}])  # no done after
        self.assertTrue(by_id["b"][-1].get("cancelled"), by_id["b"])
        self.assertNotIn("status", by_id["b"][-1])
        self.assertEqual(by_id["c"], [{"id": "c", "cancelled": True, "lines": 0}])

    def test_free_with_calls_in_flight(self):
        r = run([binary("kdp-test-http")], timeout=20, check_rc=0, echo=False, input="\n".join((
            "free_ms=300",
            "w GET %s/watch-forever %s stream=1" % (self.base, self.ca_arg()),
            "s GET %s/stall %s count=3" % (self.base, self.ca_arg()))) + "\n")
        self.assertFalse(sanitizer_report(r.stderr), r.stderr)
        evs = [json.loads(line) for line in r.stdout.splitlines()]
        freed = [i for i, e in enumerate(evs) if e.get("freed")]
        self.assertEqual(len(freed), 1, evs)
        self.assertEqual(evs[freed[0]]["active"], 4)
        # lines of the watch before, nothing after but the idle summary
        self.assertTrue(all("line" in e for e in evs[:freed[0]]), evs)
        self.assertGreater(freed[0], 0, evs)
        self.assertEqual(len(evs), freed[0] + 2, evs)
        s = evs[-1]
        self.assertEqual((s["timeout_ms"], s["wakeups"]), (-1, 0), s)

    def test_concurrent_and_cap(self):
        t0 = time.monotonic()
        by_id, summary = self.calls("c GET %s/slow %s count=100" % (self.base, self.ca_arg()),
                                    timeout=60)
        took = time.monotonic() - t0
        done = by_id["c"]
        self.assertEqual(len(done), 100)
        self.assertTrue(all(e["status"] == 0 and e["code"] == 200 for e in done), done)
        self.assertEqual(summary["max_active"], 64, summary)
        self.assertGreater(summary["eagain"], 0, summary)
        kdptest.figure("k8s_http_100_slow_gets_s", round(took, 2))


if __name__ == "__main__":
    unittest.main()
