#!/usr/bin/python3
"""The image deploy/Dockerfile.dra builds, checked without Docker (container
builds cannot run here): its binary, built the way the Dockerfile builds it,
the runtime stage's packages against that binary's libraries, and the binary
run the way deploy/dra/daemonset.yaml runs it.

    KDP_BUILD_DIR=build KDP_BIN_DIR=build/bin tests/packaging/test_dra_image.py

1. Reads deploy/Dockerfile.dra: ARG BINARY's default; a Debian 12 build stage
   that installs libcurl4-openssl-dev and libjansson-dev and runs
   deploy/build-dynamic.sh for $BINARY; a debian:12-slim runtime stage that
   installs its packages with --no-install-recommends and removes apt's
   lists, copies that one file, runs as USER 0:0 with it as ENTRYPOINT.
2. Copies exactly the files the build stage copies into a temp dir and runs
   deploy/build-dynamic.sh there (-Werror).
3. Dynamically linked and stripped; every library it needs (and
   libmicrohttpd, dlopen()ed for --metrics-address) comes from a package the
   runtime stage installs, and what those load from their dependencies
   (test_metrics_image's checks).
4. Runs it as the DaemonSet does: the args of deploy/dra/daemonset.yaml,
   NODE_NAME and POD_UID as the downward API gives them, the in-cluster
   configuration (KUBERNETES_SERVICE_HOST/_PORT and a service-account
   directory with token and ca.crt) and no kubeconfig, against the API-server
   emulator (kdp-test-apiserver) and the kubelet emulator's DRA side
   (kdp-test-kubelet): the registration socket is <driver>-<POD_UID>-reg.sock,
   the kubelet registers it, the node's ResourceSlice is published owned by the
   Node, a claim is prepared (its CDI spec written), and SIGTERM ends it with
   status 0 and its sockets removed. Its idle RSS is printed.
Everything runs in a temp dir that is removed; every process is stopped; a
watchdog bounds the whole test.
"""
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid

import yaml

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "pylib"))
import kdptest  # noqa: E402
from kdptest import dockerfile, log  # noqa: E402
from kdptest.apiserver import ApiServer  # noqa: E402
from kdptest.kubelet import Kubelet  # noqa: E402
from kdptest.proc import _tmpdirs  # noqa: E402
import test_metrics_image as tmi  # noqa: E402

SRC = kdptest.REPO
NODE = "node-a"


def check(cond, what):
    tmi.check(cond, what)


def daemonset_args():
    """The driver container's args in deploy/dra/daemonset.yaml."""
    with open(os.path.join(SRC, "deploy", "dra", "daemonset.yaml")) as f:
        ds = yaml.safe_load(f)
    c = ds["spec"]["template"]["spec"]["containers"][0]
    return list(c.get("args", []))


def driver_of(args):
    return args[args.index("--dra") + 1] if "--dra" in args else None


def wait(cond, timeout, what):
    kdptest.wait_for(cond, timeout, what, 0.05)


def driver_runs(binary, work):
    """The binary as the DaemonSet runs it, against both emulators."""
    args = daemonset_args()
    driver = driver_of(args)
    check(driver is not None, "deploy/dra/daemonset.yaml passes --dra DRIVER (%s)" % driver)
    if driver is None:
        return
    root = os.path.join(work, "root")
    gophers = os.path.join(work, "gophers")
    cdi = os.path.join(work, "cdi")
    for d in (os.path.join(root, "device-plugins"), os.path.join(root, "plugins_registry"),
              gophers, cdi):
        os.makedirs(d, exist_ok=True)
    for g in ("g0", "g1"):
        open(os.path.join(gophers, g), "w").close()
    # The DaemonSet's args, with the host paths of this test: the devices
    # directory, and the kubelet root and CDI directory the image leaves at
    # their defaults (/var/lib/kubelet, /var/run/cdi: the mounts).
    argv = [binary]
    i = 0
    while i < len(args):
        if args[i] == "--devices-dir":
            argv += ["--devices-dir", gophers]
            i += 2
            continue
        argv.append(args[i])
        i += 1
    argv += ["--kubelet-root", root, "--cdi-dir", cdi]
    pod_uid = str(uuid.uuid4())
    api = ApiServer(os.path.join(work, "api"), nodes=[NODE])
    kl = Kubelet(os.path.join(root, "device-plugins"), registry=os.path.join(root, "plugins_registry"))
    proc = None
    try:
        api.start()
        kl.start()
        env = {k: v for k, v in os.environ.items()
               if k not in ("KUBECONFIG", "KDP_METRICS_ADDRESS")}
        env.update(api.incluster_env())
        env.update({"NODE_NAME": NODE, "POD_UID": pod_uid,
                    "KDP_SERVICEACCOUNT_DIR": api.serviceaccount})
        proc = kdptest.Proc(argv, "gopher-dra (as the DaemonSet runs it)", env=env, stdin=False)
        t0 = time.monotonic()
        proc.start()
        reg = kl.wait_dra_registered(driver, kdptest.T)
        check(os.path.basename(reg.get("registration_socket", "")) ==
              "%s-%s-reg.sock" % (driver, pod_uid),
              "the registration socket is <driver>-<POD_UID>-reg.sock (%s)"
              % reg.get("registration_socket"))
        check(reg.get("service") == "v1.DRAPlugin", "the kubelet chose v1.DRAPlugin (%s)"
              % reg.get("service"))

        def published():
            return [s for s in api.slices() if s["spec"].get("driver") == driver]
        wait(lambda: sum(len(s["spec"].get("devices") or []) for s in published()) == 2,
             kdptest.T, "the node's slice with both gophers")
        log("start to slices published, in-cluster: %.0f ms" % ((time.monotonic() - t0) * 1000))
        s = published()[0]
        owners = s["metadata"].get("ownerReferences") or []
        check(s["spec"].get("nodeName") == NODE and s["spec"]["pool"]["name"] == NODE,
              "the slice names the node (nodeName and pool %s)" % NODE)
        check(len(owners) == 1 and owners[0].get("kind") == "Node" and
              owners[0].get("name") == NODE and owners[0].get("uid"),
              "the slice is owned by the Node (%s)" % owners)
        dev = sorted(d["name"] for d in s["spec"]["devices"])[0]
        uid = api.create_claim("default", "c1", driver, NODE, "gopher", [dev])
        r = kl.dra_prepare(driver, ["default/c1/" + uid])
        c = r.get("by_uid", {}).get(uid, {})
        check(r.get("ok") and c.get("result") == "prepared" and c["devices"][0]["cdi_device_ids"],
              "a claim is prepared with the service-account token, CDI IDs given (%s)" % c)
        check(bool(glob.glob(os.path.join(cdi, "*.json"))), "its CDI spec is written")
        time.sleep(1)
        log("idle RSS of the DRA gopher (in-cluster, 2 devices): %d KiB" % tmi.rss_kib(proc.pid))
    finally:
        rc = proc.stop() if proc else None
        if proc:
            log(proc.log_text())
        kl.stop()
        api.stop()
    check(rc == 0, "SIGTERM: exit status 0 (got %s)" % rc)
    left = [p for p in glob.glob(os.path.join(root, "**", "*.sock"), recursive=True)
            if not p.endswith("kubelet.sock")]
    check(not left, "its sockets are removed at exit (left: %s)" % left)


def main():
    path = os.path.join(SRC, "deploy", "Dockerfile.dra")
    args, stages = dockerfile.parse(path)
    binary = args.get("BINARY")
    check(binary is not None, "Dockerfile.dra: ARG BINARY has a default (%s)" % binary)
    check(len(stages) == 2, "Dockerfile.dra: two stages")
    if tmi.failures:
        return 1
    build, final = stages
    check(build["from"].startswith("debian:12"), "the build stage is Debian 12")
    build_pkgs, _, _ = dockerfile.apt_install(build)
    for p in ("libcurl4-openssl-dev", "libjansson-dev"):
        check(p in build_pkgs, "the build stage installs %s" % p)
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
    check(final["user"] == "0:0", "USER 0:0 (the owner of the kubelet's directories)")
    missing = [p for p in runtime_pkgs
               if not tmi.quiet(["dpkg-query", "-W", "-f", "${Status}", p]).endswith("installed")]
    check(not missing, "the runtime packages are installed here (Debian 12, as the image), "
          "so their files can be checked (missing: %s)" % missing)
    if tmi.failures:
        return 1
    closure = tmi.depends_closure(runtime_pkgs)
    added = closure - tmi.depends_closure(["apt"])
    log("added to debian:12-slim (beyond apt's dependencies): %s, %d kB installed"
        % (" ".join(sorted(added)), tmi.installed_kb(added)))

    work = tempfile.mkdtemp(prefix="kdp-dra-image-", dir="/tmp")
    _tmpdirs.add(work)
    watchdog = kdptest.Watchdog(540, "test_dra_image").start()
    try:
        src = os.path.join(work, "src")
        dockerfile.stage_sources(build["copy"], src)
        out = os.path.join(work, binary)
        tmi.run([os.path.join(src, "deploy", "build-dynamic.sh"), os.path.join(work, "build"),
                 binary, out], env=dict(os.environ, JOBS="2"))
        tmi.check_libraries(out, binary, runtime_pkgs, closure)
        have = all(os.path.exists(os.path.join(kdptest.bin_dir(), b))
                   for b in ("kdp-test-kubelet", "kdp-test-apiserver"))
        if have:
            # A short directory: the registration socket's path holds the
            # driver name and a 36-character pod UID, and a unix socket's
            # path is at most 107 bytes (/var/lib/kubelet/plugins_registry
            # leaves room; a deep temp dir would not).
            run_dir = tempfile.mkdtemp(prefix="kd", dir="/tmp")
            _tmpdirs.add(run_dir)
            try:
                driver_runs(out, run_dir)
            finally:
                shutil.rmtree(run_dir, ignore_errors=True)
                _tmpdirs.discard(run_dir)
        else:
            log("skip: the run against the emulators (no kdp-test-kubelet or "
                "kdp-test-apiserver in %s: KDP_INTEROP=OFF)" % kdptest.bin_dir())
    finally:
        watchdog.cancel()
        shutil.rmtree(work, ignore_errors=True)
        _tmpdirs.discard(work)

    if tmi.failures:
        log("%d check(s) failed:" % len(tmi.failures))
        for f in tmi.failures:
            log("  " + f)
        return 1
    log("test_dra_image: every check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
