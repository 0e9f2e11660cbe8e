#!/usr/bin/python3
"""The image deploy/Dockerfile.metrics builds, checked without Docker
(container builds cannot run here): its binary, built the way the Dockerfile
builds it, and the runtime stage's packages against that binary's libraries.

    KDP_BUILD_DIR=build KDP_BIN_DIR=build/bin tests/packaging/test_metrics_image.py

1. Reads deploy/Dockerfile.metrics: ARG BINARY's default; a Debian 12 build
   stage that installs libmicrohttpd-dev and runs deploy/build-dynamic.sh for
   $BINARY; a debian:12-slim runtime stage that installs its packages with
   --no-install-recommends and removes apt's lists, copies that one file,
   runs as USER 0:0 with it as ENTRYPOINT, and sets KDP_METRICS_ADDRESS=:PORT.
2. Copies exactly the files the build stage copies into a temp dir and runs
   deploy/build-dynamic.sh there (-Werror) for the default binary and for
   kdp-generic (the other binary the image is documented for).
3. For each: dynamically linked and stripped; every NEEDED library
   (readelf -d), resolved by ldd, and libmicrohttpd (the soname kdp
   dlopen()s, read from src/runtime/mhdlib.c) belongs (dpkg -S) to a package
   the runtime stage installs (libc6 excepted: it is in debian:12-slim); the
   libraries those load in turn belong to a package in the Depends closure
   of that list (what apt installs with it). Runs (--help).
4. The gopher against the kubelet emulator (KDP_BIN_DIR/kdp-test-kubelet),
   with --metrics-address 127.0.0.1:0: /healthz 503 before the kubelet is
   there (what keeps the overlay's pod not Ready), 200 once registered,
   /metrics with kdp_build_info and kdp_plugin_up 1; the same with the
   address from $KDP_METRICS_ADDRESS alone (how the image and the overlay
   set it); exits 0 on SIGTERM. Its idle RSS is printed.
5. The same confined as the DaemonSet confines it (as root, when unshare
   works; test_static.py's sandbox): uid 0 with no capability and
   no_new_privs, every mount read-only but the device-plugin directory, a
   network namespace of its own (loopback up), with the image's own
   KDP_METRICS_ADDRESS (:9400): libmicrohttpd loads from a read-only file
   system, port 9400 binds without a capability, and the endpoint answers
   inside that namespace (nsenter).
Everything runs in a temp dir that is removed; every process is stopped; a
watchdog bounds the whole test.
"""
import http.client
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
import kdptest  # noqa: E402
from kdptest import dockerfile, log  # noqa: E402
from kdptest.kubelet import Kubelet  # noqa: E402
from kdptest.proc import _tmpdirs  # noqa: E402
# The confinement of the static image's test, applied to this binary.
from test_static import SANDBOX, proc_status, sandbox_works  # noqa: E402

SRC = kdptest.REPO
GOPHER = "kdp-example-gopher"
OTHER = "kdp-generic"
RES = "example.com/gopher"
SERVING = r"metrics: serving /metrics and /healthz on (\S+)"
# In debian:12-slim already, so not in the install list (apt-get would find
# it installed); every other package a library comes from must be listed.
BASE_PACKAGES = {"libc6"}

failures = []


def check(cond, what):
    log(("ok: " if cond else "FAILED: ") + what)
    if not cond:
        failures.append(what)


def run(argv, check_rc=True, timeout=280, **kw):
    """kdptest.run (bounded) with stderr in stdout, which is logged."""
    p = kdptest.run(argv, timeout, echo=False, stderr=subprocess.STDOUT, **kw)
    if p.stdout.strip():
        log(p.stdout.rstrip())
    if check_rc and p.returncode != 0:
        raise AssertionError("%s exited %d" % (argv[0], p.returncode))
    return p


def quiet(argv, must=False):
    """Output of a query command (not logged); '' if it fails, or with must
    an AssertionError."""
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=60)
    if must and p.returncode != 0:
        raise AssertionError("%s exited %d: %s" % (" ".join(argv), p.returncode, p.stderr))
    return p.stdout if p.returncode == 0 else ""


def mhd_soname():
    text = open(os.path.join(SRC, "src", "runtime", "mhdlib.c")).read()
    m = re.search(r'#define MHD_SONAME "([^"]+)"', text)
    assert m, "src/runtime/mhdlib.c no longer defines MHD_SONAME"
    return m.group(1)


def needed(path):
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]",
                      quiet(["readelf", "-d", path], must=True))


def ldd(path):
    """{soname: resolved path} of everything path loads (the loader's view)."""
    out = {}
    for line in quiet(["ldd", path], must=True).splitlines():
        m = re.match(r"\s*(\S+) => (\S+) \(", line)
        if m:
            out[m.group(1)] = m.group(2)
        m = re.match(r"\s*(/\S+) \(", line)  # the dynamic loader itself
        if m:
            out[os.path.basename(m.group(1))] = m.group(1)
    return out


def ldconfig_path(soname):
    for line in quiet(["ldconfig", "-p"]).splitlines():
        m = re.match(r"\s*(\S+) \(libc6,x86-64[^)]*\) => (\S+)", line)
        if m and m.group(1) == soname:
            return m.group(2)
    return None


def package_of(path):
    """The Debian package that ships path (dpkg -S), trying the merged-/usr
    twins too (dpkg knows a file under the path its package names)."""
    cands = [path, os.path.realpath(path)]
    for c in list(cands):
        if c.startswith("/usr/lib/"):
            cands.append(c[4:])
        elif c.startswith("/lib"):
            cands.append("/usr" + c)
    for c in cands:
        out = quiet(["dpkg", "-S", c])
        for line in out.splitlines():
            pkg, _, f = line.partition(": ")
            if f.strip() == c and not pkg.startswith("diversion"):
                return pkg.split(":")[0]
    return None


def depends_closure(pkgs):
    """pkgs and every package they Depend or Pre-Depend on, recursively, as
    installed here (Debian 12, as the image): what apt-get installs."""
    seen, todo = set(), list(pkgs)
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        deps = quiet(["dpkg-query", "-W", "-f", "${Depends}, ${Pre-Depends}", p])
        for clause in deps.split(","):
            alts = [a.strip().split(" ")[0].split(":")[0] for a in clause.split("|")
                    if a.strip()]
            installed = [a for a in alts
                         if quiet(["dpkg-query", "-W", "-f", "${Status}", a]).endswith(
                             "installed")]
            todo += installed[:1]
    return seen


def installed_kb(pkgs):
    total = 0
    for p in pkgs:
        s = quiet(["dpkg-query", "-W", "-f", "${Installed-Size}", p]).strip()
        total += int(s) if s.isdigit() else 0
    return total


def check_libraries(path, name, runtime_pkgs, closure):
    size = os.path.getsize(path)
    log("%s: %d bytes (%.2f MiB)" % (name, size, size / 1048576.0))
    what = quiet(["file", "-b", path], must=True)
    check("dynamically linked" in what and re.search(r"\bstripped", what.replace(
        "not stripped", "")), "%s is dynamically linked and stripped (%s)" % (name, what.strip()))
    libs = needed(path)
    log("%s NEEDED: %s" % (name, ", ".join(libs)))
    check(libs and not any(lib.startswith("libkdp") for lib in libs),
          "%s needs shared libraries, and not libkdp (linked in from libkdp.a)" % name)
    resolved = ldd(path)
    mhd = mhd_soname()
    mhd_path = ldconfig_path(mhd)
    check(mhd_path is not None, "%s (dlopen()ed by kdp) resolves here: %s" % (mhd, mhd_path))
    direct = [(lib, resolved.get(lib)) for lib in libs] + [(mhd, mhd_path)]
    for lib, p in direct:
        pkg = package_of(p) if p else None
        where = "in debian:12-slim" if pkg in BASE_PACKAGES else "which the runtime stage installs"
        check(pkg is not None and (pkg in runtime_pkgs or pkg in BASE_PACKAGES),
              "%s: %s (%s) is from %s, %s" % (name, lib, p, pkg, where))
    # What those load in turn: apt installs it with them (Depends).
    indirect = dict(resolved)
    if mhd_path:
        indirect.update(ldd(mhd_path))
    for lib, p in sorted(indirect.items()):
        if lib in libs or lib == mhd:
            continue
        pkg = package_of(p)
        check(pkg is not None and pkg in closure | BASE_PACKAGES,
              "%s: %s (%s, loaded by a library above) is from %s, which apt installs "
              "with the runtime stage's list" % (name, lib, p, pkg))
    p = run([path, "--help"], check_rc=False)
    check(p.returncode in (0, 2) and "usage" in p.stdout.lower(),
          "%s runs and prints its usage" % name)


def get(addr, path, netns_pid=None):
    """(status, body) of GET path; with netns_pid, from inside that
    process's network namespace (nsenter, then this same function)."""
    if netns_pid:
        code = ("import sys; sys.path.insert(0, %r); import test_metrics_image as t; "
                "s, b = t.get(%r, %r); print(s); print(b, end='')"
                % (os.path.dirname(os.path.abspath(__file__)), addr, path))
        p = kdptest.run(["nsenter", "--net=/proc/%d/ns/net" % netns_pid, sys.executable,
                         "-B", "-c", code], 30, echo=False)
        if p.returncode != 0:
            raise AssertionError("GET %s in the plugin's namespace: %s" % (path, p.stderr))
        status, _, body = p.stdout.partition("\n")
        return int(status), body
    host, _, port = addr.rpartition(":")
    c = http.client.HTTPConnection(host.strip("[]") or "127.0.0.1", int(port), timeout=kdptest.T)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read().decode("utf-8", errors="replace")
    finally:
        c.close()


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def gopher_serves(gopher, root, how, env_address=None, sandboxed=False):
    """The gopher registers with the emulator and serves the endpoint; the
    address from --metrics-address or, with env_address, $KDP_METRICS_ADDRESS;
    sandboxed: confined as the DaemonSet confines it, in its own network
    namespace."""
    run_dir = os.path.join(root, how)
    dp = os.path.join(run_dir, "dp")
    devices = os.path.join(run_dir, "gophers")
    os.makedirs(dp)
    os.makedirs(devices)
    for name in ("g1", "g2"):
        open(os.path.join(devices, name), "w").close()
    argv = [gopher, "--device-plugin-dir", dp, "--devices-dir", devices]
    env = dict(os.environ)
    env.pop("KDP_METRICS_ADDRESS", None)
    if env_address:
        env["KDP_METRICS_ADDRESS"] = env_address
    else:
        argv += ["--metrics-address", "127.0.0.1:0"]
    if sandboxed:
        os.chmod(dp, 0o750)
        script = SANDBOX.replace("set -e\n", "set -e\nip link set lo up\n", 1)
        argv = ["unshare", "-m", "-n", "--propagation", "private", "sh", "-c", script, "sh",
                dp] + argv
    proc = kdptest.Proc(argv, "gopher (%s)" % how, env=env, stdin=False)
    ns = None
    kl = None
    try:
        proc.start()
        addr = re.search(SERVING, proc.wait_log(SERVING)).group(1)
        check(True, "%s: serves the endpoint on %s" % (how, addr))
        if env_address and env_address.startswith(":"):
            check(addr.endswith(env_address), "%s: ... every interface, port %s"
                  % (how, env_address[1:]))
        if sandboxed:
            ns = proc.pid
            st = proc_status(proc.pid)
            check(st.get("CapEff") == "0000000000000000" and
                  st.get("CapBnd") == "0000000000000000" and st.get("NoNewPrivs") == "1"
                  and st.get("Uid", "").split()[:1] == ["0"],
                  "%s: as uid 0 with no capability and no_new_privs (%s)" %
                  (how, {k: st.get(k) for k in ("Uid", "CapEff", "CapBnd", "NoNewPrivs")}))
            mi = open("/proc/%d/mountinfo" % proc.pid).read().splitlines()
            check(any(x.split()[4] == "/" and "ro" in x.split()[5].split(",") for x in mi),
                  "%s: with a read-only /" % how)
            check(os.readlink("/proc/%d/ns/net" % proc.pid) != os.readlink("/proc/self/ns/net"),
                  "%s: in a network namespace of its own" % how)
        get_ = lambda path: get(addr, path, ns)  # noqa: E731
        proc.wait_log(r"waiting for the kubelet")
        st, body = get_("/healthz")
        check(st == 503 and "waiting for kubelet.sock" in body,
              "%s: /healthz 503 before the kubelet is there (%d %r)" % (how, st, body.strip()))
        kl = Kubelet(dp).start()
        kl.wait_event("registered", 10, resource=RES)
        check(True, "%s: registered with the kubelet emulator" % how)
        # registered is logged as the kubelet accepts; /healthz follows at once
        kdptest.wait_for(lambda: get_("/healthz")[0] == 200, 10, "/healthz 200", 0.1)
        st, body = get_("/healthz")
        check(st == 200 and body.strip() == "ok", "%s: /healthz 200 ok once registered" % how)
        st, page = get_("/metrics")
        check(st == 200 and re.search(r'^kdp_build_info\{version="[^"]+"\} 1$', page, re.M),
              "%s: /metrics 200 with kdp_build_info" % how)
        check(re.search(r'^kdp_plugin_up\{resource="%s"\} 1$' % re.escape(RES), page, re.M),
              "%s: ... and kdp_plugin_up 1" % how)
        if not env_address and not sandboxed:
            time.sleep(1)
            log("idle RSS of the dynamic gopher with the endpoint on: %d KiB" %
                rss_kib(proc.pid))
    finally:
        rc = proc.stop()  # SIGTERM
        log(proc.log_text())
        if kl:
            kl.stop()
    check(rc == 0, "%s: SIGTERM: exit status 0 (got %s)" % (how, rc))


def main():
    path = os.path.join(SRC, "deploy", "Dockerfile.metrics")
    args, stages = dockerfile.parse(path)
    binary = args.get("BINARY")
    check(binary is not None, "Dockerfile.metrics: ARG BINARY has a default (%s)" % binary)
    check(len(stages) == 2, "Dockerfile.metrics: two stages")
    if failures:
        return 1
    build, final = stages
    check(build["from"].startswith("debian:12"), "the build stage is Debian 12")
    build_pkgs, _, _ = dockerfile.apt_install(build)
    check("libmicrohttpd-dev" in build_pkgs, "the build stage installs libmicrohttpd-dev")
    check(any("deploy/build-dynamic.sh" in r and "$BINARY" in r for r in build["run"]),
          "the build stage runs deploy/build-dynamic.sh for $BINARY")
    check(final["from"] == "debian:12-slim", "the runtime stage is debian:12-slim")
    runtime_pkgs, no_rec, lists_removed = dockerfile.apt_install(final)
    log("runtime packages: %s" % " ".join(runtime_pkgs))
    check(bool(runtime_pkgs) and no_rec,
          "the runtime stage installs its packages with --no-install-recommends")
    check(lists_removed, "the runtime stage removes /var/lib/apt/lists")
    check(not [p for p in runtime_pkgs if p.endswith("-dev")], "no -dev package at run time")
    check(len(final["copy_from"]) == 1 and final["copy_from"][0][0] == build["name"],
          "the runtime stage copies one file from the build stage")
    dest = final["copy_from"][0][2] if final["copy_from"] else None
    check(final["entrypoint"] == '["%s"]' % dest, "ENTRYPOINT is that file")
    check(final["user"] == "0:0", "USER 0:0 (the owner of the kubelet's directory)")
    addr = final["env"].get("KDP_METRICS_ADDRESS", "")
    check(re.fullmatch(r":\d+", addr) is not None,
          "ENV KDP_METRICS_ADDRESS=:PORT, every interface of the pod (%r)" % addr)
    missing = [p for p in runtime_pkgs
               if not quiet(["dpkg-query", "-W", "-f", "${Status}", p]).endswith("installed")]
    check(not missing, "the runtime packages are installed here (Debian 12, as the image), "
          "so their files can be checked (missing: %s)" % missing)
    if failures:
        return 1
    closure = depends_closure(runtime_pkgs)
    log("with their dependencies: %s" % " ".join(sorted(closure)))
    # A figure, not a check: debian:12-slim has apt, hence gnutls and libc6
    # with their dependencies; what the runtime stage adds beyond apt's.
    added = closure - depends_closure(["apt"])
    log("added to debian:12-slim (beyond apt's dependencies): %s, %d kB installed"
        % (" ".join(sorted(added)), installed_kb(added)))

    work = tempfile.mkdtemp(prefix="kdp-metrics-image-", dir="/tmp")
    _tmpdirs.add(work)
    watchdog = kdptest.Watchdog(540, "test_metrics_image").start()
    try:
        src = os.path.join(work, "src")
        dockerfile.stage_sources(build["copy"], src)
        out = {}
        for name in [binary] + [n for n in (GOPHER, OTHER) if n != binary]:
            out[name] = os.path.join(work, name)
            run([os.path.join(src, "deploy", "build-dynamic.sh"), os.path.join(work, "build"),
                 name, out[name]], env=dict(os.environ, JOBS="2"))
            check_libraries(out[name], name, runtime_pkgs, closure)
        if os.path.exists(os.path.join(kdptest.bin_dir(), "kdp-test-kubelet")):
            gopher_serves(out[GOPHER], work, "flag")
            gopher_serves(out[GOPHER], work, "env", env_address="127.0.0.1:0")
            if sandbox_works():
                gopher_serves(out[GOPHER], work, "confined", env_address=final["env"].get(
                    "KDP_METRICS_ADDRESS"), sandboxed=True)
            else:
                log("skip: the confined run (needs root, unshare -m -n and setpriv)")
        else:
            log("skip: the endpoint against the kubelet emulator (no %s/kdp-test-kubelet: "
                "KDP_INTEROP=OFF)" % kdptest.bin_dir())
    finally:
        watchdog.cancel()
        shutil.rmtree(work, ignore_errors=True)
        _tmpdirs.discard(work)

    if failures:
        log("%d check(s) failed:" % len(failures))
        for f in failures:
            log("  " + f)
        return 1
    log("test_metrics_image: every check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
