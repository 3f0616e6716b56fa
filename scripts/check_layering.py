#!/usr/bin/env python3
"""Checks the module layering: every #include "module/..." in src/<m>/ names a module at or below <m>
(the order of CMakeLists.txt); nothing under src/runtime/ reaches generated protobuf, gRPC or the
gRPC client (net/remote_node.h), directly or through the headers it includes, and none of its code
names the transport (an include of net/ or a net:: name outside comments): it gets its transport
through exec::Transport. Tests follow the same rule: tests/<m>/ links (tests/CMakeLists.txt) and
includes only module m and the modules below it."""
import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parent.parent
src = root / "src"
order = re.search(r"foreach\(module ([^)]*)\)", (root / "CMakeLists.txt").read_text()).group(1).split()
rank = {m: i for i, m in enumerate(order)}
rank["cli"] = len(order)
include = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)
forbidden_in_runtime = ("strata.pb.h", "strata.grpc.pb.h", "net/remote_node.h", "grpcpp/")


def includes(path):
    return include.findall(path.read_text())


def transitive(path, seen):
    for inc in includes(path):
        if inc in seen:
            continue
        seen.add(inc)
        header = src / inc
        if header.is_file():
            transitive(header, seen)
    return seen


errors = []
for path in sorted(src.rglob("*.[ch]*")):
    module = path.relative_to(src).parts[0]
    if module not in rank:
        continue
    for inc in re.findall(r'^\s*#\s*include\s*"([^"]+)"', path.read_text(), re.M):
        target = inc.split("/")[0]
        if target in rank and rank[target] > rank[module]:
            errors.append(f"{path.relative_to(root)}: includes {inc} ({target} is above {module})")
    if module == "runtime":
        code = re.sub(r"//[^\n]*", "", path.read_text())
        for n, line in enumerate(code.splitlines(), 1):
            if re.search(r'#\s*include\s*"net/', line) or re.search(r"\bnet::", line):
                errors.append(f"{path.relative_to(root)}:{n}: names the transport ({line.strip()}); use exec::Transport")
        for inc in transitive(path, set()):
            if any(inc.startswith(f) or inc.endswith(f) for f in forbidden_in_runtime):
                errors.append(f"{path.relative_to(root)}: reaches {inc} (the runtime must not see the transport)")
# Test helpers in tests/testing/ that stand for a module: their users must be at or above it.
helper_module = {"testing/cluster.h": "runtime", "testing/synth_models.h": "tools", "testing/thread_group.h": "model"}
library_module = {"strata_testing_cluster": "runtime"}
tests = root / "tests"
cmake = (tests / "CMakeLists.txt").read_text()
links = {}
for m, libs in re.findall(r"set\(STRATA_TEST_LIBS_(\w+) ([^)]*)\)", cmake):
    links.setdefault(m, []).extend(libs.split())
for m, libs in re.findall(r"target_link_libraries\((\w+)_tests PRIVATE ([^)]*)\)", cmake):
    links.setdefault(m, []).extend(libs.split())
for m, libs in sorted(links.items()):
    for lib in libs:
        target = library_module.get(lib, lib.removeprefix("strata_") if lib.startswith("strata_") else None)
        if m in rank and target in rank and rank[target] > rank[m]:
            errors.append(f"tests/CMakeLists.txt: {m}_tests links {lib} ({target} is above {m})")
for path in sorted(tests.glob("*/*.[ch]*")):
    m = path.relative_to(tests).parts[0]
    if m not in rank:
        continue
    for inc in re.findall(r'^\s*#\s*include\s*"([^"]+)"', path.read_text(), re.M):
        target = helper_module.get(inc, inc.split("/")[0])
        if target in rank and rank[target] > rank[m]:
            errors.append(f"{path.relative_to(root)}: includes {inc} ({target} is above {m})")
for e in errors:
    print(e)
print(f"layering: {len(errors)} problem(s) in {len(order) + 1} modules")
sys.exit(1 if errors else 0)
