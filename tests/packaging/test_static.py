#!/usr/bin/python3
"""The binary deploy/Dockerfile puts in its image, built the way the Dockerfile
builds it (container builds cannot run here).

    KDP_BUILD_DIR=build KDP_BIN_DIR=build/bin tests/packaging/test_static.py

1. Reads deploy/Dockerfile: the BINARY build argument's default, the files
   the build stage copies, its RUN of deploy/build-static.sh, and a final
   stage FROM scratch whose ENTRYPOINT is the copied binary.
2. Copies exactly those files into BUILD/packaging/static/src and runs
   deploy/build-static.sh there (KDP_STATIC_TOOLS=ON, -Werror) for the
   default binary and for kdp-example-gopher.
3. Checks each: under 2 MB (the image is this file and nothing else), no
   dynamic section (readelf -d), `file` says statically linked, and it runs
   (--help prints its usage).
4. The static gopher registers with the kubelet emulator (KDP_BIN_DIR/
   kdp-test-kubelet, when the build has it: KDP_INTEROP), streams its
   devices, answers an Allocate, and exits 0 on SIGTERM with its socket
   removed. Its idle RSS is printed.
5. The same, confined the way deploy/ confines it (as root, when unshare
   works): uid 0 with no capability at all and no_new_privs (the DaemonSet's
   drop ALL + allowPrivilegeEscalation false; the unit's empty
   CapabilityBoundingSet + NoNewPrivileges), every mount read-only but the
   device-plugin directory, 0750 like the kubelet's (readOnlyRootFilesystem;
   ProtectSystem=strict + ReadWritePaths), and a network namespace of its own
   (PrivateNetwork). Not checked here: seccomp filters and systemd itself.
"""
import os
import shutil
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
import kdptest  # noqa: E402
from kdptest import dockerfile, log, proc_status  # noqa: E402
from kdptest.kubelet import Kubelet  # noqa: E402

SRC = kdptest.REPO
BUILD = os.path.abspath(os.environ.get("KDP_BUILD_DIR") or os.path.join(SRC, "build"))
MAX_BYTES = 2 * 1000 * 1000
GOPHER = "kdp-example-gopher"
RES = "example.com/gopher"

failures = []


def check(cond, what):
    log(("ok: " if cond else "FAILED: ") + what)
    if not cond:
        failures.append(what)


def run(argv, check_rc=True, **kw):
    """kdptest.run (bounded) with stderr in stdout, which is logged."""
    p = kdptest.run(argv, 280, echo=False, stderr=subprocess.STDOUT, **kw)
    if p.stdout.strip():
        log(p.stdout.rstrip())
    if check_rc and p.returncode != 0:
        raise AssertionError("%s exited %d" % (argv[0], p.returncode))
    return p


def check_binary(path, name):
    size = os.path.getsize(path)
    log("%s: %d bytes (%.2f MiB)" % (name, size, size / 1048576.0))
    check(size < MAX_BYTES, "%s is under 2 MB (%d bytes)" % (name, size))
    check("There is no dynamic section" in run(["readelf", "-d", path]).stdout,
          "%s has no dynamic section" % name)
    check("statically linked" in run(["file", "-b", path]).stdout,
          "file(1) says %s is statically linked" % name)
    p = run([path, "--help"], check_rc=False)
    check(p.returncode in (0, 2) and "usage" in p.stdout.lower(),
          "%s runs and prints its usage" % name)


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


# Run as: sh -c SANDBOX sh DPDIR BINARY ARGS..., inside unshare -m -n.
SANDBOX = r"""
set -e
dp=$1
shift
mount --bind "$dp" "$dp"
for m in $(awk '{print $2}' /proc/self/mounts | sort -u); do
    mount -o remount,bind,ro "$m" 2>/dev/null || true
done
mount -o remount,bind,rw "$dp"
exec setpriv --no-new-privs --inh-caps=-all --ambient-caps=-all --bounding-set=-all -- "$@"
"""


def sandbox_works():
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("setpriv"):
        return False
    p = kdptest.run(["unshare", "-m", "-n", "--propagation", "private", "sh", "-c",
                     "mount -o remount,bind,ro / && ! touch /.kdp-ro-probe 2>/dev/null"], 30)
    return p.returncode == 0


def gopher_against_emulator(gopher, sandboxed=False):
    bin_dir = kdptest.bin_dir()
    if not os.path.exists(os.path.join(bin_dir, "kdp-test-kubelet")):
        log("skip: registration with the kubelet emulator (no %s/kdp-test-kubelet: "
            "KDP_INTEROP=OFF)" % bin_dir)
        return
    how = "confined like deploy/ confines it" if sandboxed else "as is"
    if sandboxed and not sandbox_works():
        log("skip: the confined run (needs root, unshare -m -n and setpriv)")
        return
    root = os.path.join(BUILD, "packaging", "static", "sandbox" if sandboxed else "run")
    shutil.rmtree(root, ignore_errors=True)
    dp = os.path.join(root, "device-plugins")
    devices = os.path.join(root, "gophers")
    os.makedirs(dp)
    os.chmod(dp, 0o750)
    os.makedirs(devices)
    for name in ("g1", "g2"):
        open(os.path.join(devices, name), "w").close()
    argv = [gopher, "--device-plugin-dir", dp, "--devices-dir", devices]
    if sandboxed:
        argv = ["unshare", "-m", "-n", "--propagation", "private", "sh", "-c", SANDBOX, "sh",
                dp] + argv
    with Kubelet(dp) as kl, kdptest.Proc(argv, "static gopher", stdin=False) as proc:
        try:
            kl.wait_event("registered", 10, resource=RES)
            check(True, "the static gopher (%s) registered with the kubelet emulator" % how)
            if sandboxed:
                st = proc_status(proc.pid)
                check(st.get("CapEff") == "0000000000000000" and
                      st.get("CapBnd") == "0000000000000000" and st.get("NoNewPrivs") == "1"
                      and st.get("Uid", "").split()[:1] == ["0"],
                      "... as uid 0 with no capability and no_new_privs (%s)" %
                      {k: st.get(k) for k in ("Uid", "CapEff", "CapBnd", "NoNewPrivs")})
                mi = open("/proc/%d/mountinfo" % proc.pid).read().splitlines()
                root_ro = any(l.split()[4] == "/" and "ro" in l.split()[5].split(",")
                              for l in mi)
                check(root_ro, "... with a read-only /")
                check(os.readlink("/proc/%d/ns/net" % proc.pid) !=
                      os.readlink("/proc/self/ns/net"), "... in a network namespace of its own")
            ev = kl.wait_event(lambda e: e.get("event") == "devices" and e.get("n") == 2, 10)
            check(ev["healthy"] == 2, "it streamed its two devices")
            r = kl.command("allocate %s g1,g2" % RES)
            envs = r.get("response", {}).get("container_responses", [{}])[0].get("envs", {})
            check(r.get("ok") and envs.get("GOPHER") == "g1,g2", "Allocate answered GOPHER=g1,g2")
            if not sandboxed:
                time.sleep(1)
                log("idle RSS of the static gopher: %d KiB" % rss_kib(proc.pid))
        finally:
            rc = proc.stop()  # SIGTERM
            log(proc.log_text())
        check(rc == 0, "SIGTERM: exit status 0 (got %s)" % rc)
        check(not os.path.exists(os.path.join(dp, "gopher.sock")), "its socket was removed")


def main():
    path = os.path.join(SRC, "deploy", "Dockerfile")
    args, stages = dockerfile.parse(path)
    binary = args.get("BINARY")
    check(binary is not None, "Dockerfile: ARG BINARY has a default (%s)" % binary)
    check(len(stages) == 2, "Dockerfile: two stages")
    build, final = stages[0], stages[-1]
    check(build["from"].startswith("debian:12"), "Dockerfile: the build stage is Debian 12")
    check(any("deploy/build-static.sh" in r and "$BINARY" in r for r in build["run"]),
          "Dockerfile: the build stage runs deploy/build-static.sh for $BINARY")
    check(final["from"] == "scratch", "Dockerfile: the final stage is FROM scratch")
    check(len(final["copy_from"]) == 1 and final["copy_from"][0][0] == build["name"],
          "Dockerfile: the final stage copies one file from the build stage")
    dest = final["copy_from"][0][2] if final["copy_from"] else None
    check(final["entrypoint"] == '["%s"]' % dest, "Dockerfile: ENTRYPOINT is that file")
    if failures:
        return 1

    work = os.path.join(BUILD, "packaging", "static")
    src = os.path.join(work, "src")
    dockerfile.stage_sources(build["copy"], src)
    names = [binary] + ([GOPHER] if binary != GOPHER else [])
    out = {}
    for name in names:
        out[name] = os.path.join(work, name)
        run([os.path.join(src, "deploy", "build-static.sh"), os.path.join(work, "build"), name,
             out[name]], env=dict(os.environ, JOBS="2"))
        check_binary(out[name], name)
    gopher_against_emulator(out[GOPHER])
    gopher_against_emulator(out[GOPHER], sandboxed=True)

    if failures:
        log("%d check(s) failed:" % len(failures))
        for f in failures:
            log("  " + f)
        return 1
    log("test_static: every check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
