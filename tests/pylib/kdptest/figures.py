"""Measured figures: printed, never asserted against a threshold.

    figure("exec -> registered", "%.1f ms" % ms)   # printed at once ("FIGURE ...")
    print_figures()                                 # all of them again (tearDownModule)
"""

from .proc import log

_FIGURES = []


def figure(name, value):
    """Records a measured figure (printed at once and by print_figures())."""
    line = "%s: %s" % (name, value)
    _FIGURES.append(line)
    log("FIGURE " + line)


def print_figures():
    if _FIGURES:
        log("\n=== measured figures ===\n" + "\n".join(_FIGURES))


def percentile(values, p):
    """The p-th percentile (nearest rank) of a non-empty list."""
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(round(p / 100.0 * len(s) + 0.5)) - 1))
    return s[k]
