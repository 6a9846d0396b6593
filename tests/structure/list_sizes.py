#!/usr/bin/env python3
"""Lists library source files over ~700 lines and functions over ~120 (STYLE.md,
"Layers and sizes"): an audit aid, not a ctest check. Functions are found by
brace matching after stripping comments and literals: a block whose head has
a parameter list and that sits only inside namespaces and classes.

usage: tests/structure/list_sizes.py [ROOT] [MAX_FUNCTION_LINES] [MAX_FILE_LINES]
"""
import os
import re
import sys

LAYERS = ["util", "storage", "cuda", "indexer", "search", "tools"]


def sources(root):
    for layer in LAYERS:
        for folder, _, names in os.walk(os.path.join(root, layer)):
            for name in sorted(names):
                if name.endswith((".h", ".cc", ".cu", ".cuh")):
                    yield os.path.join(folder, name)


def strip(src):
    src = re.sub(r"//[^\n]*", "", src)
    src = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), src, flags=re.S)
    src = re.sub(r'R"\((.*?)\)"', lambda m: '""' + "\n" * m.group(0).count("\n"), src, flags=re.S)
    src = re.sub(r'"(\\.|[^"\\\n])*"', '""', src)
    return re.sub(r"'(\\.|[^'\\\n])*'", "''", src)


def functions(src):
    """(first line, lines, head) of every function body."""
    stack, line, start = [], 1, 0
    for i, ch in enumerate(src):
        if ch == "\n":
            line += 1
        elif ch == "{":
            head = src[start:i]
            in_container = all(kind == "c" for kind, _, _ in stack)
            if re.search(r"\b(namespace|class|struct|union|enum)\b[^;()]*$", head) or re.search(
                    r'extern\s*""\s*$', head):
                stack.append(("c", line, head))
            elif in_container and "(" in head:
                stack.append(("f", line, head))
            else:
                stack.append(("b", line, head))
            start = i + 1
        elif ch == "}":
            if stack:
                kind, first, head = stack.pop()
                if kind == "f":
                    yield first, line - first + 1, " ".join(head.split())
            start = i + 1
        elif ch == ";":
            start = i + 1


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    max_function = int(sys.argv[2]) if len(sys.argv) > 2 else 120
    max_file = int(sys.argv[3]) if len(sys.argv) > 3 else 700
    long_files, long_functions = [], []
    for path in sources(root):
        text = open(path, errors="replace").read()
        rel = os.path.relpath(path, root)
        if text.count("\n") > max_file:
            long_files.append((text.count("\n"), rel))
        for first, lines, head in functions(strip(text)):
            if lines > max_function:
                long_functions.append((lines, "%s:%d" % (rel, first), head[-80:]))
    print("files over %d lines: %d" % (max_file, len(long_files)))
    for n, rel in sorted(long_files, reverse=True):
        print("  %5d %s" % (n, rel))
    print("functions over %d lines: %d" % (max_function, len(long_functions)))
    for n, where, head in sorted(long_functions, reverse=True):
        print("  %5d %s %s" % (n, where, head))
    return 1 if long_files or long_functions else 0


if __name__ == "__main__":
    sys.exit(main())
