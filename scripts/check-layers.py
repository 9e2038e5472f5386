#!/usr/bin/env python3
"""The layers of Kiln's libraries, bottom first, and a check that no library
includes a header of, or links, a layer above its own. A layer is a folder
under lib/ (headers under include/kiln/ alike), or under passes/ (headers
under include/kiln/Passes/); proto/ is the generated HLO protobuf library.
Layers on one line are siblings: they may not include or link each other
either. Runtime, Data and Config stay free of MLIR. The clients at the top
(tools/, bench/, fuzz/, test/unit/, test/mpi/) may use any layer, but only
headers and libraries that belong to one.

usage: check-layers.py [REPO]   (exits 1 and names each offending include or link)
"""
import os
import re
import sys

LAYERS = [
    ["Support", "Proto"],
    ["Runtime"],
    ["Data"],
    ["Config"],
    ["Dialect/Kiln/IR", "Dialect/Hlo/IR"],
    ["Analysis"],
    ["Backend/CPU"],
    ["CustomKernels"],
    ["Passes/Kiln", "Passes/KilnToHlo", "Passes/Hlo", "Passes/HloToLinalg"],
    ["Backend/Neuron", "Backend/Compiled"],
    ["Frontend"],
    ["Planner"],
    ["Pipeline"],
    ["Driver"],
]
MLIR_FREE = {"Runtime", "Data", "Config"}
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}
CLIENT = "client"
RANK[CLIENT] = len(LAYERS)

# Where each root's files sit: a prefix that turns a path under the root into
# a layer path (None: the root's files are clients, in no layer).
ROOTS = {
    "lib": "",
    "include/kiln": "",
    "passes": "Passes/",
    "proto": "Proto/",
    "tools": None,
    "bench": None,
    "fuzz": None,
    "test/unit": None,
    "test/mpi": None,
}
SOURCES = (".h", ".cpp", ".td", ".in")


def layer_of(path):
    """The layer a layer path belongs to (longest match)."""
    best = None
    for name in RANK:
        if name != CLIENT and (path == name or path.startswith(name + "/")):
            if best is None or len(name) > len(best):
                best = name
    return best


def walk(repo):
    """(root, path relative to the root, layer or CLIENT or None) of every file."""
    for root, prefix in ROOTS.items():
        top = os.path.join(repo, root)
        for folder, _, names in os.walk(top):
            for name in sorted(names):
                rel = os.path.relpath(os.path.join(folder, name), top)
                yield root, rel, CLIENT if prefix is None else layer_of(prefix + rel)


def below(own, theirs):
    """Whether layer `own` may use layer `theirs`."""
    return theirs == own or RANK[theirs] < RANK[own] or own == CLIENT


def relation(own, theirs):
    return "a sibling" if RANK[theirs] == RANK[own] else "a layer above"


def check_includes(repo, problems):
    files = 0
    for root, rel, own in walk(repo):
        if not rel.endswith(SOURCES):
            continue
        if own is None:
            if os.path.dirname(rel):
                problems.append(f"{root}/{rel}: in no layer of scripts/check-layers.py")
            continue
        files += 1
        path = os.path.join(repo, root, rel)
        for n, line in enumerate(open(path, encoding="utf-8"), 1):
            m = re.match(r'\s*(?:#include|include)\s+"([^"]+)"', line)
            if not m:
                continue
            target, where = m.group(1), f"{root}/{rel}:{n}"
            if own in MLIR_FREE and target.startswith(("mlir/", "llvm/")):
                problems.append(f"{where}: {own} stays free of MLIR, includes {target}")
            if not target.startswith("kiln/"):
                continue
            theirs = layer_of(target[len("kiln/"):])
            if theirs is None:
                problems.append(f"{where}: {target} is in no layer")
            elif not below(own, theirs):
                problems.append(f"{where}: {own} includes {target}, "
                                f"{relation(own, theirs)} ({theirs})")
    return files


def cmake_commands(text, command):
    """(first argument, the other arguments) of each `command(...)` call."""
    text = re.sub(r"#[^\n]*", "", text)
    for m in re.finditer(command + r"\(\s*([^\s)]+)([^)]*)\)", text):
        yield m.group(1), m.group(2).split()


def check_links(repo, problems):
    """Every Kiln library a CMake target links is in a layer below the target's."""
    lists = [(root, rel, own) for root, rel, own in walk(repo)
             if os.path.basename(rel) == "CMakeLists.txt" and root != "include/kiln"]
    texts = {(root, rel): open(os.path.join(repo, root, rel), encoding="utf-8").read()
             for root, rel, _ in lists}
    layer_of_target, linked = {}, []  # linked: (root, rel, own, target, libraries)
    for root, rel, own in lists:
        text = texts[root, rel]
        # proto/CMakeLists.txt's kiln_proto_library wraps add_library.
        for target, args in cmake_commands(
                text, r"(?:add_(?:mlir_(?:dialect_)?)?|kiln_proto_)library"):
            layer_of_target[target] = own
            if "LINK_LIBS" in args:  # MLIR's form: sources, then LINK_LIBS ...
                linked.append((root, rel, own, target, args[args.index("LINK_LIBS") + 1:]))
        for target, args in cmake_commands(text, "target_link_libraries"):
            linked.append((root, rel, own, target, args))
    links = 0
    for root, rel, own, target, libs in linked:
        for lib in libs:
            if not lib.startswith("Kiln"):
                continue  # keywords, upstream and system libraries
            links += 1
            where = f"{root}/{rel}: {target}"
            theirs = layer_of_target.get(lib)
            if own is None:
                problems.append(f"{where}: in no layer of scripts/check-layers.py")
            elif theirs is None:
                problems.append(f"{where} links {lib}, a library of no layer")
            elif not below(own, theirs):
                problems.append(f"{where} ({own}) links {lib}, "
                                f"{relation(own, theirs)} ({theirs})")
    return links


def main():
    repo = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    problems = []
    files = check_includes(repo, problems)
    links = check_links(repo, problems)
    for p in problems:
        print(p)
    if problems:
        sys.exit(f"{len(problems)} include(s) or link(s) break the layering")
    print(f"{files} files and {links} links in {sum(map(len, LAYERS))} libraries over "
          f"{len(LAYERS)} layers; none includes or links a layer above its own")


main()
