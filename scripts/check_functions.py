#!/usr/bin/env python3
"""Checks that no function in src/ is longer than 80 lines, except the few that are one dispatch or
embedded data (ALLOWED). A function is a definition whose signature starts at column 0 or inside a
class body and whose body's braces are counted, strings, characters and comments skipped."""
import pathlib
import re
import sys

LIMIT = 80
# The Jinja evaluator's dispatch over node kinds and operators, and the web page embedded as data.
ALLOWED = {("src/jinja/eval.cpp", "eval_inner"), ("src/jinja/eval.cpp", "eval_binary"),
           ("src/server/web_ui.cpp", "web_ui_html")}

root = pathlib.Path(__file__).resolve().parent.parent
token = re.compile(r'//[^\n]*|/\*.*?\*/|R"(\w*)\((?:.|\n)*?\)\1"|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|[{}]', re.S)
head = re.compile(r"(?:^|[\s*&:])(~?\w+)\s*\([^;{}]*\)\s*(?:const\s*)?(?:noexcept\s*)?(?:override\s*)?(?:->[^{;]*)?"
                  r"(?::[^;{]*)?$", re.S)
not_functions = {"if", "for", "while", "switch", "catch", "return", "sizeof", "decltype", "alignas", "static_assert"}


def long_functions(path):
    text = path.read_text()
    stack = []  # (name or None, line) per open brace
    last = 0
    for m in token.finditer(text):
        t = m.group(0)
        if t == "{":
            before = text[last:m.start()]
            fn = head.search(before.split(";")[-1].split("}")[-1])
            name = fn.group(1) if fn and fn.group(1) not in not_functions else None
            inside = any(n for n, _ in stack)
            stack.append((None if inside else name, text.count("\n", 0, m.start()) + 1))
            last = m.end()
        elif t == "}":
            if stack:
                name, start = stack.pop()
                end = text.count("\n", 0, m.start()) + 1
                if name and end - start + 1 > LIMIT:
                    yield name, start, end - start + 1
            last = m.end()
        else:
            last = m.end()


problems = []
for path in sorted((root / "src").rglob("*.[ch]*")):
    rel = str(path.relative_to(root))
    for name, line, n in long_functions(path):
        if (rel, name) not in ALLOWED:
            problems.append(f"{rel}:{line}: {name} is {n} lines (at most {LIMIT}); split it into named steps")
for p in problems:
    print(p)
print(f"functions: {len(problems)} over {LIMIT} lines")
sys.exit(1 if problems else 0)
