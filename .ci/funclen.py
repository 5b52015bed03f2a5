#!/usr/bin/env python3
"""Lists C functions longer than a limit (default 80 lines, signature to
closing brace) and source files longer than a file limit (default 800
lines). Functions are found by the project's brace style (Linux: the
opening brace of a function stands alone in column 0). Generated files
(the word "generated" in their first 5 lines) are exempt from the file
limit, and so are the files .ci/long-files lists (each with its reason;
an entry whose file is back under the limit is itself an error, so the
list only shrinks). Exit 1 when any function or file outside tests/ is
over its limit."""
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

def allowed_long(root):
    here = os.path.dirname(os.path.abspath(__file__))
    out = {}
    try:
        for line in open(os.path.join(here, "long-files"), encoding="utf-8"):
            line = line.split("#", 1)[0].strip()
            if line:
                out[os.path.normpath(os.path.join(root, line.split()[0]))] = line
    except OSError:
        pass
    return out

def main():
    limit, file_limit = 80, 800
    args = sys.argv[1:]
    while args and args[0].startswith(("--limit=", "--file-limit=")):
        k, v = args[0].split("=", 1)
        if k == "--limit":
            limit = int(v)
        else:
            file_limit = int(v)
        args = args[1:]
    roots = args or ["."]
    bad = 0
    for root in roots:
        allowed = allowed_long(root)
        for d, dirs, files in os.walk(root):
            dirs[:] = [x for x in dirs if not x.startswith((".", "build")) and x != "tests"]
            for f in sorted(files):
                if f.endswith((".c", ".h", ".cu")):
                    p = os.path.join(d, f)
                    text = open(p, encoding="utf-8", errors="replace").read()
                    n_lines = text.count("\n")
                    generated = "generated" in "\n".join(text.split("\n")[:5]).lower()
                    listed = os.path.normpath(p) in allowed
                    if n_lines > file_limit and not generated and not listed:
                        print(f"{p}: {n_lines} lines (file limit {file_limit}; split it by concern)")
                        bad += 1
                    if listed and n_lines <= file_limit:
                        print(f"{p}: {n_lines} lines, under {file_limit}: remove it from .ci/long-files")
                        bad += 1
                    for name, line, n in functions(p):
                        if n > limit:
                            print(f"{p}:{line}: {name} is {n} lines (limit {limit})")
                            bad += 1
    if bad:
        print(f"{bad} functions or files over their limits ({limit}, {file_limit} lines)",
              file=sys.stderr)
    return 1 if bad else 0

sys.exit(main())
