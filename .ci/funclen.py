#!/usr/bin/env python3
"""Lists C functions longer than a limit (default 80 lines, signature to
closing brace). Functions are found by the project's brace style (Linux:
the opening brace of a function stands alone in column 0). Exit 1 when any
function outside tests/ is over the limit."""
import os, re, sys

def functions(path):
    lines = open(path, encoding="utf-8", errors="replace").read().split("\n")
    i = 0
    while i < len(lines):
        if lines[i] == "{":
            # the signature starts at the first line above that begins in column 0
            s = i - 1
            while s > 0 and (lines[s].startswith((" ", "\t")) or lines[s] == ""):
                s -= 1
            j = i + 1
            while j < len(lines) and lines[j] != "}":
                j += 1
            m = re.search(r"(\w+)\s*\(", lines[s])
            yield (m.group(1) if m else "?"), s + 1, j - s + 1
            i = j
        i += 1

def main():
    limit = 80
    args = sys.argv[1:]
    if args and args[0].startswith("--limit="):
        limit = int(args[0].split("=", 1)[1]); args = args[1:]
    roots = args or ["."]
    bad = 0
    for root in roots:
        for d, dirs, files in os.walk(root):
            dirs[:] = [x for x in dirs if not x.startswith((".", "build")) and x != "tests"]
            for f in sorted(files):
                if f.endswith((".c", ".h", ".cu")):
                    p = os.path.join(d, f)
                    for name, line, n in functions(p):
                        if n > limit:
                            print(f"{p}:{line}: {name} is {n} lines (limit {limit})")
                            bad += 1
    if bad:
        print(f"{bad} functions over {limit} lines", file=sys.stderr)
    return 1 if bad else 0

sys.exit(main())
