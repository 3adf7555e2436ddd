#!/usr/bin/env python3
"""check_text.py — what a text file of the project must never carry, checked over every text file
under SOURCE_DIR (build folders and hidden ones left out).

Usage: check_text.py SOURCE_DIR

- a merge's conflict markers ("<<<<<<< " and ">>>>>>> " opening a line): a conflict committed
  by mistake reads as two contradictory versions of the truth;
- in a document (README.md, CONTRIBUTING.md, docs/), a command the project does not ship and a
  contributor cannot install (the authors' own helpers): a reader cannot run it;
- in a document, a dated check record ("Checked on: <machine>, driver ... (2026-11-22)", "Verified
  on ...", a date as YYYY-MM-DD): a lab note that goes stale. When and where something was checked
  belongs in the commit body; a document says what holds for its reader (what is supported, which
  versions it is tested with).
"""
import os
import re
import sys

TEXT = (".c", ".h", ".cpp", ".cu", ".py", ".sh", ".md", ".txt", ".cmake", ".js", ".css", ".in",
        ".map", ".supp", ".json")
MARKER = re.compile(r"^(<{7}|>{7}) ", re.M)
# commands that exist only on the authors' machines, as a doc would name them
NOT_SHIPPED = re.compile(r"`(duplicates|issues)( --?\w+| (list|show|resolved|blocked|note))\b")
# a record of when or on what something was checked, as a lab note writes it
DATED = re.compile(r"(?i)\b(?:checked|verified) on\b|\b(?:19|20)\d\d-[01]\d-[0-3]\d\b")


def text_files(root):
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not d.startswith("build"))
        for f in sorted(files):
            if f.endswith(TEXT) or f == "CMakeLists.txt" or f == "ranksnap-run":
                yield os.path.relpath(os.path.join(dirpath, f), root)


def is_doc(rel):
    return rel.endswith(".md")


def main():
    root = sys.argv[1]
    errors, n = [], 0
    for rel in text_files(root):
        n += 1
        try:
            text = open(os.path.join(root, rel), encoding="utf-8").read()
        except UnicodeDecodeError:
            continue
        for m in MARKER.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            errors.append(f"{rel}:{line}: a merge's conflict marker")
        if is_doc(rel):
            for m in NOT_SHIPPED.finditer(text):
                line = text.count("\n", 0, m.start()) + 1
                errors.append(f"{rel}:{line}: names `{m.group(1)}`, a command the project does "
                              "not ship")
            for line, l in enumerate(text.split("\n"), 1):
                m = DATED.search(l)
                if m:
                    errors.append(f"{rel}:{line}: a dated check record (\"{m.group(0)}\"): say what "
                                  "is supported; the when and where go in the commit body")
    for e in errors:
        print(e)
    if errors:
        return 1
    print(f"ok: {n} text files, no conflict marker, no command the project does not ship, "
          "no dated check record")
    return 0


if __name__ == "__main__":
    sys.exit(main())
