#!/usr/bin/python3
"""`cmake --install` into a throwaway prefix, then a program outside the tree
built against it every way a user would.

    KDP_BUILD_DIR=build tests/packaging/test_install.py      (ctest sets the environment)

1. Installs the build into BUILD/packaging/install/stage and checks the tree:
   kdp.h, libkdp.so -> libkdp.so.SOVERSION -> libkdp.so.VERSION (SONAME
   libkdp.so.SOVERSION, no RPATH), libkdp.a, kdp.pc, the CMake package; and
   that no installed .pc or .cmake file names the prefix or the build tree.
2. Moves the prefix somewhere else (the tree must be relocatable).
3. Builds tests/packaging/consumer/main.c and runs it:
   - `pkg-config --cflags --libs kdp` (libkdp.so);
   - `pkg-config --static --cflags --libs kdp` with -static (no dynamic
     section at all; skipped in sanitizer builds, which cannot link -static);
   - find_package(kdp) with kdp::kdp and with kdp::kdp_static;
   - find_package(kdp) asking for the next minor version must fail;
   - without the .pc files of nghttp2 and protobuf-c, kdp::kdp still works
     and find_package(kdp COMPONENTS static) fails with a clear message.
"""
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
BUILD = os.path.abspath(os.environ.get("KDP_BUILD_DIR") or os.path.join(SRC, "build"))
VERSION = os.environ.get("KDP_VERSION", "")
SOVERSION = os.environ.get("KDP_SOVERSION", "")
CMAKE = os.environ.get("KDP_CMAKE") or "cmake"
CC = os.environ.get("KDP_CC") or "cc"
SAN_FLAGS = os.environ.get("KDP_SAN_FLAGS", "").split()
CFLAGS = ["-std=c11", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Werror"] + SAN_FLAGS

failures = []


def log(*a):
    print(*a, flush=True)


def run(argv, env=None, check=True, cwd=None):
    log("+ " + " ".join(argv))
    full_env = dict(os.environ)
    full_env.update(env or {})
    p = subprocess.run(argv, env=full_env, cwd=cwd, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, universal_newlines=True, timeout=240)
    if p.stdout.strip():
        log(p.stdout.rstrip())
    if check and p.returncode != 0:
        raise AssertionError("%s exited %d" % (argv[0], p.returncode))
    return p


def check(cond, what):
    log(("ok: " if cond else "FAILED: ") + what)
    if not cond:
        failures.append(what)


def readelf_d(path):
    return run(["readelf", "-d", path]).stdout


def needed(path):
    return [l.split("[")[1].split("]")[0] for l in readelf_d(path).splitlines()
            if "(NEEDED)" in l]


def find_libdir(prefix):
    for d in ("lib", "lib64", os.path.join("lib", "x86_64-linux-gnu")):
        if os.path.exists(os.path.join(prefix, d, "pkgconfig", "kdp.pc")):
            return d
    raise AssertionError("no kdp.pc under %s" % prefix)


def check_tree(stage):
    libdir = find_libdir(stage)
    lib = os.path.join(stage, libdir)
    check(open(os.path.join(stage, "include", "kdp.h")).read()
          == open(os.path.join(SRC, "include", "kdp.h")).read(), "include/kdp.h installed as is")
    real = "libkdp.so." + VERSION
    check(os.path.isfile(os.path.join(lib, real)) and not os.path.islink(os.path.join(lib, real)),
          "%s/%s is the library" % (libdir, real))
    check(os.readlink(os.path.join(lib, "libkdp.so." + SOVERSION)) == real,
          "libkdp.so.%s -> %s" % (SOVERSION, real))
    check(os.readlink(os.path.join(lib, "libkdp.so")) == "libkdp.so." + SOVERSION,
          "libkdp.so -> libkdp.so.%s (the link-time name)" % SOVERSION)
    dyn = readelf_d(os.path.join(lib, real))
    check("Library soname: [libkdp.so.%s]" % SOVERSION in dyn, "SONAME libkdp.so.%s" % SOVERSION)
    check("RPATH" not in dyn and "RUNPATH" not in dyn, "no RPATH/RUNPATH in the installed .so")
    check(os.path.isfile(os.path.join(lib, "libkdp.a")), "libkdp.a installed")
    # libkdp-dra: libkdp with the DRA driver (kdp_dra.h), same SONAME rules
    check(open(os.path.join(stage, "include", "kdp_dra.h")).read()
          == open(os.path.join(SRC, "include", "kdp_dra.h")).read(),
          "include/kdp_dra.h installed as is")
    dreal = "libkdp-dra.so." + VERSION
    check(os.readlink(os.path.join(lib, "libkdp-dra.so." + SOVERSION)) == dreal,
          "libkdp-dra.so.%s -> %s" % (SOVERSION, dreal))
    check("Library soname: [libkdp-dra.so.%s]" % SOVERSION
          in readelf_d(os.path.join(lib, dreal)), "SONAME libkdp-dra.so.%s" % SOVERSION)
    check(os.path.isfile(os.path.join(lib, "libkdp-dra.a")), "libkdp-dra.a installed")
    plain = needed(os.path.join(lib, real))
    check(not any(n.startswith(("libcurl", "libjansson", "libyaml")) for n in plain),
          "libkdp.so needs neither libcurl, jansson nor libyaml (%s)" % ", ".join(plain))
    cmake_dir = os.path.join(lib, "cmake", "kdp")
    for f in ("kdpConfig.cmake", "kdpConfigVersion.cmake", "kdpTargets.cmake"):
        check(os.path.isfile(os.path.join(cmake_dir, f)), "cmake/kdp/%s installed" % f)
    texts = [os.path.join(lib, "pkgconfig", "kdp.pc"), os.path.join(lib, "pkgconfig", "kdp-dra.pc")]
    texts += [os.path.join(cmake_dir, f) for f in os.listdir(cmake_dir)]
    for t in texts:
        body = open(t).read()
        check(stage not in body and BUILD not in body,
              "%s names neither the prefix nor the build tree" % os.path.relpath(t, stage))
    check_documented(stage, libdir)
    return libdir


def check_documented(stage, libdir):
    """Every installed file is named in deploy.md's table of what the install
    puts below the prefix (a directory named there covers what is in it)."""
    text = open(os.path.join(SRC, "docs", "deploy.md")).read()
    table = text.split("This installs, below the prefix:", 1)[1].split("\n\n", 2)[1]
    named = set(re.findall(r"`([^`]+)`", table))
    for root, _, files in os.walk(stage):
        for f in files:
            rel = os.path.relpath(os.path.join(root, f), stage)
            generic = rel.replace(libdir + "/", "lib/", 1)
            ok = (generic in named or os.path.basename(rel) in named
                  or any(n.endswith("/") and generic.startswith(n) for n in named))
            check(ok, "%s is named in docs/deploy.md's install table" % generic)


def main():
    if not VERSION or not SOVERSION:
        raise AssertionError("KDP_VERSION and KDP_SOVERSION must be set (ctest does)")
    work = os.path.join(BUILD, "packaging", "install")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    stage = os.path.join(work, "stage")
    run([CMAKE, "--install", BUILD, "--prefix", stage])
    libdir = check_tree(stage)

    prefix = os.path.join(work, "moved", "prefix")
    os.makedirs(os.path.dirname(prefix))
    os.rename(stage, prefix)
    lib = os.path.join(prefix, libdir)
    log("moved the installed tree to %s" % prefix)
    consumer_src = os.path.join(HERE, "consumer")
    main_c = os.path.join(consumer_src, "main.c")
    pc_env = {"PKG_CONFIG_PATH": os.path.join(lib, "pkgconfig")}
    dpdir = os.path.join(work, "dp")
    os.makedirs(dpdir)

    # pkg-config, shared
    check(run(["pkg-config", "--modversion", "kdp"], env=pc_env).stdout.strip() == VERSION,
          "pkg-config --modversion kdp = %s" % VERSION)
    flags = run(["pkg-config", "--cflags", "--libs", "kdp"], env=pc_env).stdout.split()
    norm = [f[:2] + os.path.normpath(f[2:]) if f[:2] in ("-I", "-L") else f for f in flags]
    check("-L" + lib in norm and "-I" + os.path.join(prefix, "include") in norm,
          "pkg-config points into the moved prefix")
    exe = os.path.join(work, "consumer-pkgconfig")
    run([CC] + CFLAGS + [main_c, "-o", exe] + flags)
    check("libkdp.so." + SOVERSION in needed(exe), "the pkg-config consumer needs libkdp.so.%s"
          % SOVERSION)
    ldd = run(["ldd", exe], env={"LD_LIBRARY_PATH": lib}).stdout
    check(os.path.join(lib, "libkdp.so." + SOVERSION) in ldd, "it loads the installed libkdp")
    run([exe, dpdir], env={"LD_LIBRARY_PATH": lib})

    # pkg-config kdp-dra, shared: a DRA driver's build
    dflags = run(["pkg-config", "--cflags", "--libs", "kdp-dra"], env=pc_env).stdout.split()
    exe = os.path.join(work, "consumer-dra")
    run([CC] + CFLAGS + [os.path.join(consumer_src, "dra_main.c"), "-o", exe] + dflags)
    check("libkdp-dra.so." + SOVERSION in needed(exe),
          "the kdp-dra consumer needs libkdp-dra.so.%s" % SOVERSION)
    run([exe], env={"LD_LIBRARY_PATH": lib})

    # pkg-config --static, fully static
    if SAN_FLAGS:
        log("skip: pkg-config --static -static consumer (sanitizer runtimes cannot link -static)")
    else:
        sflags = run(["pkg-config", "--static", "--cflags", "--libs", "kdp"], env=pc_env).stdout
        sflags = sflags.split()
        check("-lnghttp2" in sflags and "-lprotobuf-c" in sflags and "-pthread" in sflags,
              "pkg-config --static lists nghttp2, protobuf-c and -pthread")
        exe = os.path.join(work, "consumer-pkgconfig-static")
        run([CC] + CFLAGS + ["-static", main_c, "-o", exe] + sflags)
        check("There is no dynamic section" in readelf_d(exe),
              "the -static consumer has no dynamic section")
        run([exe, dpdir])

    # find_package(kdp)
    major, minor = VERSION.split(".")[:2]
    cdir = os.path.join(work, "consumer-cmake")
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    cfg = [CMAKE, "-S", consumer_src, "-B", cdir] + gen + [
        "-DCMAKE_PREFIX_PATH=" + prefix, "-DCMAKE_C_COMPILER=" + CC,
        "-DCMAKE_C_FLAGS=" + " ".join(SAN_FLAGS), "-DKDP_WANT_VERSION=%s.%s" % (major, minor)]
    run(cfg)
    cache = open(os.path.join(cdir, "CMakeCache.txt")).read()
    check("kdp_DIR:PATH=" + os.path.join(lib, "cmake", "kdp") in cache,
          "find_package found the moved prefix's kdpConfig.cmake")
    run([CMAKE, "--build", cdir, "-j", "2"])
    shared = os.path.join(cdir, "consumer_shared")
    static = os.path.join(cdir, "consumer_static")
    check("libkdp.so." + SOVERSION in needed(shared), "kdp::kdp links libkdp.so.%s" % SOVERSION)
    check(os.path.join(lib, "libkdp.so." + SOVERSION) in run(["ldd", shared]).stdout,
          "kdp::kdp consumer finds the installed libkdp without LD_LIBRARY_PATH (build RPATH)")
    check(not any(n.startswith("libkdp") for n in needed(static)),
          "kdp::kdp_static consumer does not need libkdp.so")
    run([shared, dpdir])
    run([static, dpdir])
    dra = os.path.join(cdir, "consumer_dra")
    check("libkdp-dra.so." + SOVERSION in needed(dra),
          "kdp::kdp_dra links libkdp-dra.so.%s" % SOVERSION)
    run([dra])

    # the version file: 0.x accepts the same minor only (docs/api.md)
    bad = run(cfg[:4] + [os.path.join(work, "consumer-cmake-next")] + cfg[5:-1] +
              ["-DKDP_WANT_VERSION=%s.%d" % (major, int(minor) + 1)], check=False)
    said = " ".join(bad.stdout.split())
    check(bad.returncode != 0 and "compatible with requested version" in said
          and "version: %s" % VERSION in said,
          "find_package(kdp %s.%d) is refused (kdpConfigVersion.cmake)" % (major, int(minor) + 1))

    # without nghttp2's and protobuf-c's .pc files: kdp::kdp works, kdp::kdp_static is refused
    nodeps = {"PKG_CONFIG_LIBDIR": os.path.join(work, "no-pc-files"), "PKG_CONFIG_PATH": ""}
    os.makedirs(nodeps["PKG_CONFIG_LIBDIR"])
    shared_only = os.path.join(work, "consumer-cmake-shared-only")
    run(cfg[:4] + [shared_only] + cfg[5:] + ["-DKDP_WANT_COMPONENTS=shared"], env=nodeps)
    run([CMAKE, "--build", shared_only], env=nodeps)
    run([os.path.join(shared_only, "consumer_shared"), dpdir])
    check(not os.path.exists(os.path.join(shared_only, "consumer_static")),
          "without the -dev .pc files of nghttp2 and protobuf-c, kdp::kdp still builds and runs")
    bad = run(cfg[:4] + [os.path.join(work, "consumer-cmake-static-nodeps")] + cfg[5:] +
              ["-DKDP_WANT_COMPONENTS=static"], env=nodeps, check=False)
    said = " ".join(bad.stdout.split())
    check(bad.returncode != 0 and "kdp::kdp_static needs pkg-config with libnghttp2" in said,
          "... and find_package(kdp COMPONENTS static) fails saying what is missing")

    if failures:
        log("%d check(s) failed:" % len(failures))
        for f in failures:
            log("  " + f)
        return 1
    log("test_install: every check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
