"""A /metrics page read by Prometheus's own text parser (kdp-promparse:
github.com/prometheus/common/expfmt, built by tests/metrics/build.sh)."""

import http.client
import json
import os
import socket
import subprocess

from kdptest import T
from kdptest.proc import bin_dir


def promparse_path():
    """$KDP_PROMPARSE, else <build>/metrics-go/kdp-promparse."""
    return os.environ.get("KDP_PROMPARSE") or os.path.join(bin_dir(), "..", "metrics-go",
                                                           "kdp-promparse")


def parse(text):
    """The page through Prometheus's own parser: {family: {...}}."""
    p = subprocess.run([promparse_path()], input=text, capture_output=True, text=True, timeout=T)
    if p.returncode != 0:
        raise AssertionError("Prometheus's parser refused the page: %s\n%s" % (p.stderr, text))
    return json.loads(p.stdout)


def value(fams, name, **labels):
    """The one series of name whose labels include labels."""
    hits = [m for m in fams[name]["metrics"]
            if all(m["labels"].get(k) == v for k, v in labels.items())]
    if len(hits) != 1:
        raise AssertionError("%s%s: %d series: %s" % (name, labels, len(hits), fams.get(name)))
    return hits[0]


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=T):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s


def get(address, path, method="GET", body=None, headers=None):
    """(status, headers, body text) of one request to address (HOST:PORT or
    a unix socket path)."""
    if address.startswith("/"):
        c = UnixHTTPConnection(address)
    else:
        host, port = address.rsplit(":", 1)
        c = http.client.HTTPConnection(host.strip("[]"), int(port), timeout=T)
    try:
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        return r.status, dict(r.getheaders()), r.read().decode()
    finally:
        c.close()
