"""Dockerfiles read without Docker (no container builds run here): the
packaging tests parse deploy/Dockerfile*, then build what a stage builds
from exactly the files it copies.

    args, stages = parse(path)
    stage_sources(stages[0]["copy"], dst_root)
    apt_install(stages[-1])      # the packages a stage's RUN lines install

Only what deploy/'s Dockerfiles use: ARG, FROM [AS], COPY [--from=],
WORKDIR, RUN, ENV, USER, ENTRYPOINT; line continuations and comments.
"""
import os
import shlex
import shutil

from .proc import REPO


def _logical_lines(path):
    lines, cur = [], ""
    with open(path) as f:
        for raw in f:
            line = raw.rstrip("\n")
            if line.lstrip().startswith("#"):
                continue  # comments, also between continued lines (as Docker does)
            if line.endswith("\\"):
                cur += line[:-1] + " "
                continue
            cur += line
            if cur.strip():
                lines.append(cur.strip())
            cur = ""
    if cur.strip():
        lines.append(cur.strip())
    return lines


def parse(path):
    """Returns (args, stages). args: the global ARGs (before the first FROM)
    with their defaults (None without one). Each stage is a dict: from, name
    (AS NAME or None), copy [(sources, dest)], copy_from [(stage, src,
    dest)], run [command text], env {name: value}, user, entrypoint (the
    text after ENTRYPOINT), workdir."""
    args, stages = {}, []
    for line in _logical_lines(path):
        word, _, rest = line.partition(" ")
        word, rest = word.upper(), rest.strip()
        if word == "FROM":
            parts = rest.split()
            stages.append({"from": parts[0],
                           "name": parts[2] if len(parts) > 2 and parts[1].upper() == "AS"
                           else None,
                           "copy": [], "copy_from": [], "run": [], "env": {}, "user": None,
                           "entrypoint": None, "workdir": None})
        elif word == "ARG" and not stages:
            name, eq, default = rest.partition("=")
            args[name] = default if eq else None
        elif not stages:
            continue
        elif word == "COPY":
            a = shlex.split(rest)
            if a[0].startswith("--from="):
                stages[-1]["copy_from"].append((a[0][7:], a[1], a[2]))
            else:
                stages[-1]["copy"].append((a[:-1], a[-1]))
        elif word == "RUN":
            stages[-1]["run"].append(rest)
        elif word == "ENV":
            # ENV NAME=VALUE [NAME=VALUE...] or the old ENV NAME VALUE
            a = shlex.split(rest)
            if "=" in a[0]:
                for kv in a:
                    k, _, v = kv.partition("=")
                    stages[-1]["env"][k] = v
            else:
                stages[-1]["env"][a[0]] = " ".join(a[1:])
        elif word == "USER":
            stages[-1]["user"] = rest
        elif word == "ENTRYPOINT":
            stages[-1]["entrypoint"] = rest
        elif word == "WORKDIR":
            stages[-1]["workdir"] = rest
    return args, stages


def stage_sources(copies, dst_root, src=REPO):
    """Copies what a stage's COPY lines copy from the context src into
    dst_root (its WORKDIR), emptied first. mtimes are kept (copy2), so a
    build tree reused across runs rebuilds only what changed."""
    shutil.rmtree(dst_root, ignore_errors=True)
    os.makedirs(dst_root)
    for sources, dest in copies:
        target = os.path.join(dst_root, dest)
        for s in sources:
            sp = os.path.join(src, s)
            if os.path.isdir(sp):  # Docker copies a directory's contents, not the directory
                shutil.copytree(sp, target, dirs_exist_ok=True, copy_function=shutil.copy2)
            else:
                os.makedirs(target, exist_ok=True)
                shutil.copy2(sp, os.path.join(target, os.path.basename(s)))


def apt_install(stage):
    """The packages a stage's RUN lines give `apt-get install` (options
    left out), and whether every such install has --no-install-recommends,
    and whether the stage removes /var/lib/apt/lists: (packages, no_recommends,
    lists_removed)."""
    pkgs, no_rec, removed, installs = [], True, False, 0
    for text in stage["run"]:
        words = shlex.split(text)
        cmds, cur = [], []
        for w in words:
            if w in ("&&", "||", ";"):
                cmds.append(cur)
                cur = []
            else:
                cur.append(w)
        cmds.append(cur)
        for c in cmds:
            if len(c) >= 2 and c[0] in ("apt-get", "apt") and "install" in c:
                installs += 1
                rest = c[c.index("install") + 1:]
                no_rec &= "--no-install-recommends" in c
                pkgs += [w for w in rest if not w.startswith("-")]
            if c[:2] == ["rm", "-rf"] and any(w.rstrip("/").rstrip("*").rstrip("/") ==
                                              "/var/lib/apt/lists" for w in c[2:]):
                removed = True
    return pkgs, no_rec and installs > 0, removed
