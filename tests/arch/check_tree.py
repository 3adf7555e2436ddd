#!/usr/bin/env python3
"""check_tree.py — the architecture rules the compiler does not check by itself.

Usage: check_tree.py SOURCE_DIR [OBJECT_DIR]

- an #include "..." names a header by its file name only (no folder, no ".."): headers are found
  through the include folders of the layers a target links, which is what refuses a cross-layer
  include (tests/arch/CMakeLists.txt shows it);
- no include runs back up the top-level folders' order (LAYER_DIRS): a file includes headers of
  its own top-level folder, of those below it, and include/'s, so that no target's dependency
  can make collector/ include a header of rank/ or cli/;
- every header's include guard is RANKSNAP_<FILE NAME>_H, so no two headers share one (two headers
  with one guard silently hide each other);
- only the options table (common/options.c) and the launcher (rank/mpi/launcher.c) read the
  environment;
- every source file starts with a comment "NAME — what it owns";
- with OBJECT_DIR, the build's object files: no cycle of calls between source files (an object
  that uses a symbol another defines depends on it).
"""
import collections
import os
import re
import subprocess
import sys

# the top-level folders of the layers, from the bottom
LAYER_DIRS = ["platform", "common", "alloc", "collector", "rank", "cli"]
# libc's names that rank/intercept/driver.c interposes for the whole process: a file calling them
# calls the system, not driver.c
INTERPOSED = {"dlsym"}
ENV_READERS = {"common/options.c", "rank/mpi/launcher.c"}


def sources(root):
    for top in LAYER_DIRS:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if f.endswith((".c", ".h")):
                    yield os.path.relpath(os.path.join(dirpath, f), root)


def top_of(rel):
    return rel.split(os.sep, 1)[0]


def check_sources(root):
    errors = []
    guards = {}
    # where each header name lives: its top-level folders' places in LAYER_DIRS
    levels = collections.defaultdict(dict)
    for rel in sources(root):
        if rel.endswith(".h"):
            levels[os.path.basename(rel)].setdefault(LAYER_DIRS.index(top_of(rel)), rel)
    for rel in sources(root):
        text = open(os.path.join(root, rel), encoding="utf-8").read()
        level = LAYER_DIRS.index(top_of(rel))
        for m in re.finditer(r'^\s*#\s*include\s+"([^"]+)"', text, re.M):
            if "/" in m.group(1):
                errors.append(f"{rel}: #include \"{m.group(1)}\": include headers by name, not by path")
            found = levels.get(m.group(1), {})
            if found and min(found) > level:
                up = found[min(found)]
                errors.append(f"{rel}: #include \"{m.group(1)}\": {up} is in {top_of(up)}/, above "
                              f"{top_of(rel)}/ (the top-level folders from the bottom: "
                              f"{', '.join(LAYER_DIRS)})")
        if rel.endswith(".h"):
            g = re.search(r"^#ifndef\s+(\w+)\s*\n#define\s+\1", text, re.M)
            want = "RANKSNAP_" + re.sub(r"\W", "_", os.path.basename(rel)[:-2]).upper() + "_H"
            if not g:
                errors.append(f"{rel}: no include guard")
            elif g.group(1) != want:
                errors.append(f"{rel}: include guard {g.group(1)}, expected {want}")
            elif g.group(1) in guards:
                errors.append(f"{rel}: include guard {g.group(1)} is also {guards[g.group(1)]}'s")
            else:
                guards[g.group(1)] = rel
        if rel not in ENV_READERS and re.search(r"\b(secure_)?getenv\s*\(", text):
            errors.append(f"{rel}: reads the environment; options belong to common/options.c, "
                          "launcher variables to rank/mpi/launcher.c")
        name = os.path.basename(rel)
        head = text.lstrip()[:400]
        if not re.match(r"/\*[\s*]*" + re.escape(name) + r"\s+—", head):
            errors.append(f"{rel}: does not start with a comment naming {name} and what it owns")
    return errors


def check_cycles(objdir):
    objs = []
    for dirpath, _, files in os.walk(objdir):
        objs += [os.path.join(dirpath, f) for f in files if f.endswith(".o")]
    defined, used = {}, collections.defaultdict(set)
    names = {}
    for o in objs:
        # object files of the layers only (the tests' are not part of the design)
        if "/tests/" in o or "CMakeFiles/rs_" not in o:
            continue
        name = os.path.basename(o)[: -len(".c.o")] if o.endswith(".c.o") else os.path.basename(o)
        names[o] = name
        out = subprocess.run(["nm", o], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            p = line.split()
            if len(p) == 3 and p[1] in "TDBRC":
                defined.setdefault(p[2], name)
            elif len(p) == 2 and p[0] == "U" and p[1] not in INTERPOSED:
                used[name].add(p[1])
    graph = collections.defaultdict(set)
    for f, syms in used.items():
        for s in syms:
            d = defined.get(s)
            if d and d != f:
                graph[f].add(d)
    # Tarjan's strongly connected components
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
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

    for v in sorted(set(names.values())):
        if v not in index:
            visit(v)
    return [f"cycle of calls between {', '.join(c)}" for c in out], len(set(names.values()))


def main():
    root = sys.argv[1]
    errors = check_sources(root)
    n_objs = 0
    if len(sys.argv) > 2:
        cyc, n_objs = check_cycles(sys.argv[2])
        if n_objs == 0:
            errors.append(f"{sys.argv[2]}: no layer object files found")
        errors += cyc
    for e in errors:
        print(e)
    if errors:
        return 1
    print(f"ok: {len(list(sources(root)))} source files, {n_objs} object files, no cycle")
    return 0


if __name__ == "__main__":
    sys.exit(main())
