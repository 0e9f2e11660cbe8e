"""A /metrics page read by Prometheus's own text parser (kdp-promparse:
github.com/prometheus/common/expfmt, built by tests/metrics/build.sh)."""

import json
import os
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
