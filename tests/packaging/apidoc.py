#!/usr/bin/python3
"""docs/api.md's reference part, generated from include/kdp.h's comments,
then include/kdp_dra.h's (the DRA driver, in libkdp-dra).

    tests/packaging/apidoc.py --write            regenerate docs/api.md
    tests/packaging/apidoc.py --check [--lib build/lib/libkdp.so]
                                      [--dra-lib build/lib/libkdp-dra.so]

docs/api.md is hand-written down to the GENERATED marker line; everything
after it is generated here from the header: one entry per declaration group
(a comment and the declarations right below it), under the header's own
section banners. --check (ctest: packaging_apidoc) fails when docs/api.md
differs from what --write would write, or when a KDP_EXPORT function is
missing from it; with --lib, also when the library's exported kdp* symbols
are not exactly the header's KDP_EXPORT functions (nothing internal leaks,
nothing declared is missing); with --dra-lib, the same for libkdp-dra and
the two headers' functions.
"""
import argparse
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
HEADER = os.path.join(SRC, "include", "kdp.h")
DRA_HEADER = os.path.join(SRC, "include", "kdp_dra.h")
DOC = os.path.join(SRC, "docs", "api.md")
MARKER = ("<!-- GENERATED from include/kdp.h by tests/packaging/apidoc.py --write: "
          "edit the header, not the text below. -->")

SKIP_DIRECTIVES = re.compile(r"#\s*(include|ifndef|ifdef|if|elif|else|endif|undef)\b")


def strip_comments(text):
    return re.sub(r"/\*.*?\*/", " ", text, flags=re.S)


def comment_text(block):
    """The prose of a /* ... */ block, without the stars."""
    body = block.strip()[2:-2]
    lines = []
    for line in body.split("\n"):
        line = re.sub(r"^\s*\* ?", "", line) if line.strip().startswith("*") else line.strip()
        lines.append(line.rstrip())
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join(lines)


def decl_names(decl):
    """The names a declaration introduces (functions, typedefs, macros)."""
    code = strip_comments(decl).strip()
    m = re.match(r"#\s*define\s+(\w+)", code)
    if m:
        return [] if m.group(1).startswith("KDP__") else [m.group(1)]
    code = re.sub(r"\bKDP_EXPORT\b", "", code)
    code = re.sub(r"__attribute__\s*\(\(.*?\)\)", "", code, flags=re.S)
    if code.startswith("typedef"):
        flat = re.sub(r"\{.*\}", " ", code, flags=re.S)  # members are not names
        m = re.search(r"\(\s*\*\s*(\w+)\s*\)\s*\(", flat)  # a function pointer type
        if m:
            return [m.group(1)]
        return [re.findall(r"(\w+)\s*;", flat)[-1]]
    m = re.match(r"struct\s+(\w+)\s*\{", code)  # a struct typedef'd before
    if m:
        return [m.group(1)]
    m = re.search(r"(\w+)\s*\(", code)
    return [m.group(1)] if m else []


def exported_functions(header_text):
    out = []
    for m in re.finditer(r"^KDP_EXPORT\b(.*?);", strip_comments(header_text), flags=re.S | re.M):
        fn = re.search(r"(\w+)\s*\(", re.sub(r"__attribute__\s*\(\(.*?\)\)", "", m.group(1)))
        if fn:
            out.append(fn.group(1))
    return out


def parse(header_text):
    """Returns (overview, [section]); section = {title, intro, items}; item =
    {doc, decls}."""
    text = header_text
    lines = text.split("\n")
    i, n = 0, len(lines)
    overview = None
    sections = [{"title": "Version", "intro": "", "items": []}]
    item = None
    pending = None  # a comment waiting for its declarations

    def flush():
        nonlocal item
        if item and item["decls"]:
            sections[-1]["items"].append(item)
        item = None

    while i < n:
        line = lines[i]
        s = line.strip()
        if not s:
            flush()
            i += 1
            continue
        if s.startswith("/*"):
            j = i
            while "*/" not in lines[j]:
                j += 1
            block = "\n".join(lines[i:j + 1])
            i = j + 1
            if "SPDX-License-Identifier" in block:
                continue
            if overview is None:
                overview = comment_text(block)
                continue
            if re.match(r"/\*\s*-{8,}", s):  # a section banner
                flush()
                body = comment_text(block).split("\n")
                body = [b for b in body if not re.match(r"^-{8,}$", b.strip())]
                title, sep, _ = body[0].partition(": ")
                intro = "\n".join(body if sep else body[1:]).strip()
                sections.append({"title": title.strip(), "intro": intro, "items": []})
                pending = None
                continue
            flush()
            pending = comment_text(block)
            continue
        if SKIP_DIRECTIVES.match(s) or s in ('extern "C" {', "}") or \
                re.match(r"#\s*define\s+(KDP_H|KDP_EXPORT)\b", s):
            flush()
            pending = None
            i += 1
            continue
        # a declaration: up to ';' at depth 0, or a (continued) #define
        j = i
        if s.startswith("#"):
            while lines[j].rstrip().endswith("\\"):
                j += 1
        else:
            while True:
                chunk = strip_comments("\n".join(lines[i:j + 1]))
                if chunk.count("{") == chunk.count("}") and chunk.rstrip().endswith(";"):
                    break
                j += 1
        decl = "\n".join(lines[i:j + 1])
        i = j + 1
        if item is None:
            item = {"doc": pending or "", "decls": []}
            pending = None
        item["decls"].append(decl)
    flush()
    return overview, [sec for sec in sections if sec["items"]]


def render(header_text, dra_text=None):
    out = [MARKER, ""] + render_one(header_text, "Reference", "kdp.h")
    if dra_text is not None:
        out += ["", ""] + render_one(dra_text, "Reference: DRA (kdp_dra.h, libkdp-dra)",
                                     "kdp_dra.h")
    return "\n".join(out).rstrip() + "\n"


def render_one(header_text, title, name):
    overview, sections = parse(header_text)
    out = ["## " + title, ""]
    out.append("From [`include/%s`](../include/%s); the header's own overview:" % (name, name))
    out.append("")
    out += ["> " + l if l else ">" for l in overview.split("\n")]
    out.append("")
    out.append("| section | declarations |")
    out.append("|---|---|")
    for sec in sections:
        names = [nm for it in sec["items"] for d in it["decls"] for nm in decl_names(d)]
        out.append("| [%s](#%s) | %s |" % (sec["title"], anchor(sec["title"]),
                                           ", ".join("`%s`" % nm for nm in names)))
    out.append("")
    for sec in sections:
        out.append("### " + sec["title"])
        out.append("")
        if sec["intro"]:
            out.append(prose(sec["intro"]))
            out.append("")
        for it in sec["items"]:
            names = [nm for d in it["decls"] for nm in decl_names(d)]
            out.append("#### " + ", ".join("`%s`" % nm for nm in names))
            out.append("")
            out.append("```c")
            for d in it["decls"]:
                out.append(re.sub(r"\bKDP_EXPORT ", "", d))
            out.append("```")
            out.append("")
            if it["doc"]:
                out.append(prose(it["doc"]))
                out.append("")
    while out and not out[-1]:
        out.pop()
    return out


def prose(text):
    """Comment text as Markdown that renders as written: no headings, lists,
    emphasis or HTML made by accident (line breaks stay; Markdown joins them)."""
    out = []
    for line in text.split("\n"):
        line = line.replace("<", "&lt;")
        line = line.replace("*", "\\*").replace("`", "\\`")
        line = re.sub(r"^(\s*)([#>|]|[-+](?=\s))", r"\1\\\2", line)
        line = re.sub(r"^(\s*\d+)\.(?=\s)", r"\1\\.", line)
        out.append(line.strip())
    return "\n".join(out)


def anchor(title):
    a = re.sub(r"[^\w\- ]", "", title.lower()).strip()
    return re.sub(r" ", "-", a)


def compose(doc_text, header_text, dra_text=None):
    head = doc_text.split(MARKER)[0] if MARKER in doc_text else doc_text.rstrip() + "\n\n"
    return head + render(header_text, dra_text)


def library_exports(lib):
    out = subprocess.run(["nm", "-D", "--defined-only", lib], stdout=subprocess.PIPE,
                         universal_newlines=True, check=True).stdout
    syms = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2].startswith("kdp"):
            syms.add(parts[2])
    return syms


def main():
    ap = argparse.ArgumentParser()
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--write", action="store_true")
    g.add_argument("--check", action="store_true")
    ap.add_argument("--lib", help="libkdp.so whose exports must match the header")
    ap.add_argument("--dra-lib", help="libkdp-dra.so whose exports must match both headers")
    args = ap.parse_args()
    header = open(HEADER).read()
    dra = open(DRA_HEADER).read()
    doc = open(DOC).read() if os.path.exists(DOC) else "# kdp API\n"
    want = compose(doc, header, dra)
    if args.write:
        if want != doc:
            open(DOC, "w").write(want)
            print("apidoc: wrote %s" % DOC)
        else:
            print("apidoc: %s is up to date" % DOC)
        return 0

    bad = []
    if MARKER not in doc:
        bad.append("docs/api.md has no GENERATED marker line")
    exported = exported_functions(header)
    dra_exported = exported_functions(dra)
    missing = [f for f in exported + dra_exported
               if not re.search(r"`%s`" % re.escape(f), doc)]
    if missing:
        bad.append("KDP_EXPORT functions missing from docs/api.md: " + ", ".join(missing))
    if want != doc:
        import difflib
        diff = difflib.unified_diff(doc.split("\n"), want.split("\n"), "docs/api.md",
                                    "generated", lineterm="", n=1)
        print("\n".join(list(diff)[:80]))
        bad.append("docs/api.md is not what include/kdp.h and kdp_dra.h generate")
    print("apidoc: %d KDP_EXPORT functions in include/kdp.h" % len(exported))
    if args.lib:
        syms = library_exports(args.lib)
        extra = sorted(syms - set(exported))
        absent = sorted(set(exported) - syms)
        if extra:
            bad.append("%s exports kdp* symbols the header does not declare: %s"
                       % (args.lib, ", ".join(extra)))
        if absent:
            bad.append("%s does not export: %s" % (args.lib, ", ".join(absent)))
        print("apidoc: %s exports %d kdp* symbols" % (os.path.basename(args.lib), len(syms)))
    if args.dra_lib:
        syms = library_exports(args.dra_lib)
        want_syms = set(exported) | set(dra_exported)
        extra = sorted(syms - want_syms)
        absent = sorted(want_syms - syms)
        if extra:
            bad.append("%s exports kdp* symbols the headers do not declare: %s"
                       % (args.dra_lib, ", ".join(extra)))
        if absent:
            bad.append("%s does not export: %s" % (args.dra_lib, ", ".join(absent)))
        print("apidoc: %s exports %d kdp* symbols" % (os.path.basename(args.dra_lib), len(syms)))
    for b in bad:
        print("FAILED: " + b)
    if bad:
        print("fix: edit include/kdp.h or kdp_dra.h, then run tests/packaging/apidoc.py --write")
        return 1
    print("apidoc: docs/api.md matches include/kdp.h")
    return 0


if __name__ == "__main__":
    sys.exit(main())
