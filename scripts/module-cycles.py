#!/usr/bin/env python3
"""List the import circles between the files of each crate.

A file of a crate reaches another through its crate-internal paths:
`use crate::…`, `use super::…`, `use self::…`, a `use` of a child module
by name, and the same paths written inline (`crate::x::f()`). A path names
the deepest module file it goes through (`crate::router::jobs::JobId` is
`router/jobs.rs`, or `router/jobs/mod.rs`; `crate::Foo` is `lib.rs`).

A module may use its own submodules (a `mod.rs` re-exporting its
children, a struct whose impl blocks sit in child files): those downward
edges do not count. Every other edge (sideways, upward) does, and a set of
files that reach each other through such edges is a circle. Test code
(`#[cfg(test)] mod … { … }` to the end of a file) is left out.

Usage: scripts/module-cycles.py [ROOT]   (ROOT: the workspace, default .)
Prints each circle with the edges inside it; exits 1 if there is one.
"""

import os
import re
import sys

TEST_MODULE = re.compile(r"#\[cfg\(test\)\]\s*(?:pub(?:\([\w:]+\))?\s+)?mod\s+\w+\s*\{")
LINE_COMMENT = re.compile(r"//.*")
BLOCK_COMMENT = re.compile(r"/\*.*?\*/", re.S)
STRING = re.compile(r'"(?:\\.|[^"\\])*"')
USE_ITEM = re.compile(r"\buse\s+([^;]*);")
INLINE_PATH = re.compile(r"(?<![\w:])((?:crate|super|self)(?:::\w+)+)")


def code_of(text):
    """The file's code without comments, strings and test modules."""
    m = TEST_MODULE.search(text)
    if m:
        text = text[: m.start()]
    text = BLOCK_COMMENT.sub(" ", text)
    text = "\n".join(LINE_COMMENT.sub("", line) for line in text.split("\n"))
    return STRING.sub('""', text)


def expand(tree):
    """`a::{b, c::{d, self}}` -> ["a::b", "a::c::d", "a::c"]."""
    tree = " ".join(tree.split())
    brace = tree.find("{")
    if brace < 0:
        return [strip_alias(tree).replace(" ", "")]
    prefix = tree[:brace].replace(" ", "").rstrip(":")
    inner = tree[brace + 1 : tree.rfind("}")]
    parts, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    parts.append(cur)
    out = []
    for part in filter(str.strip, parts):
        for sub in expand(part.strip()):
            if sub in ("self", "*"):
                out.append(prefix)
            else:
                out.append(f"{prefix}::{sub}" if prefix else sub)
    return out


def crate_modules(src):
    """Module path (tuple) -> file, for the files under `src`."""
    mods = {}
    for dirpath, _, files in os.walk(src):
        for name in files:
            if not name.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(dirpath, name), src)
            parts = rel[:-3].split(os.sep)
            if parts == ["lib"] or parts == ["main"]:
                key = ()
                if key in mods and parts == ["main"]:
                    continue  # lib.rs is the root that crate:: names
            elif parts[-1] == "mod":
                key = tuple(parts[:-1])
            else:
                key = tuple(parts)
            if parts[0] == "bin":
                continue  # separate crate roots
            mods[key] = rel
    return mods


def strip_alias(path):
    return re.sub(r"\s+as\s+\w+$", "", path.strip())


def resolve(path, here, mods):
    """The module a path reaches from module `here`, or None (extern)."""
    segs = [s for s in strip_alias(path).split("::") if s]
    if not segs:
        return None
    if segs[0] == "crate":
        base, rest = (), segs[1:]
    elif segs[0] in ("super", "self"):
        base = here
        while segs and segs[0] in ("super", "self"):
            if segs[0] == "super":
                base = base[:-1]
            segs = segs[1:]
        rest = segs
    elif here + (segs[0],) in mods:
        base, rest = here, segs
    else:
        return None
    for k in range(len(rest), -1, -1):
        key = base + tuple(rest[:k])
        if key in mods:
            return key
    return None


def edges_of(crate_src):
    mods = crate_modules(crate_src)
    edges = {}
    for here, rel in mods.items():
        with open(os.path.join(crate_src, rel), encoding="utf-8") as f:
            code = code_of(f.read())
        paths = []
        for m in USE_ITEM.finditer(code):
            paths += expand(m.group(1))
        paths += [m.group(1) for m in INLINE_PATH.finditer(code)]
        for p in paths:
            target = resolve(p, here, mods)
            if target is None or target[: len(here)] == here:
                continue  # extern, itself, or one of its own submodules
            edges.setdefault(mods[here], {}).setdefault(mods[target], set()).add(
                strip_alias(p).split("::")[-1]
            )
    return mods, edges


def circles(nodes, edges):
    """Strongly connected components with more than one file (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    found = 0
    for crate in sorted(os.listdir(root)):
        src = os.path.join(root, crate, "src")
        if not os.path.isfile(os.path.join(root, crate, "Cargo.toml")) or not os.path.isdir(src):
            continue
        mods, edges = edges_of(src)
        for comp in circles(mods.values(), edges):
            found += 1
            print(f"{crate}: {len(comp)} files reach each other:")
            for a in comp:
                for b in comp:
                    if b in edges.get(a, {}):
                        names = ", ".join(sorted(edges[a][b]))
                        print(f"  {a} -> {b}  ({names})")
    if found:
        print(f"{found} circle(s)")
        return 1
    print("no import circles between files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
