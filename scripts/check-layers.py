#!/usr/bin/env python3
"""The layers of Kiln's libraries, bottom first, and a check that no library
includes a header of a layer above its own (lib/<layer>/ and
include/kiln/<layer>/ alike). Layers on one line are siblings: they may not
include each other either. Runtime, Data and Config stay free of MLIR.

usage: check-layers.py [REPO]   (exits 1 and names each offending include)
"""
import os
import re
import sys

LAYERS = [
    ["Support"],
    ["Runtime"],
    ["Data"],
    ["Config"],
    ["Dialect/Kiln/IR", "Dialect/Hlo/IR"],
    ["Analysis"],
    ["Backend/CPU"],
    ["CustomKernels"],
    ["Dialect/Kiln/Transforms", "Conversion/KilnToHlo", "Dialect/Hlo/Transforms"],
    ["Backend/Neuron"],
    ["Frontend"],
    ["Planner"],
    ["Pipeline"],
    ["Driver"],
]
MLIR_FREE = {"Runtime", "Data", "Config"}
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}


def layer_of(path):
    """The layer a path under lib/ or include/kiln/ belongs to (longest match)."""
    best = None
    for name in RANK:
        if path == name or path.startswith(name + "/"):
            if best is None or len(name) > len(best):
                best = name
    return best


def main():
    repo = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    problems, files = [], 0
    for root in ("lib", "include/kiln"):
        top = os.path.join(repo, root)
        for folder, _, names in os.walk(top):
            for name in names:
                if not name.endswith((".h", ".cpp", ".td", ".in")):
                    continue
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, top)
                own = layer_of(rel)
                if own is None:
                    if os.path.dirname(rel):
                        problems.append(f"{root}/{rel}: in no layer of scripts/check-layers.py")
                    continue
                files += 1
                for n, line in enumerate(open(path, encoding="utf-8"), 1):
                    m = re.match(r'\s*(?:#include|include)\s+"([^"]+)"', line)
                    if not m:
                        continue
                    target = m.group(1)
                    where = f"{root}/{rel}:{n}"
                    if own in MLIR_FREE and target.startswith(("mlir/", "llvm/")):
                        problems.append(f"{where}: {own} stays free of MLIR, includes {target}")
                    if not target.startswith("kiln/"):
                        continue
                    theirs = layer_of(target[len("kiln/"):])
                    if theirs is None:
                        problems.append(f"{where}: {target} is in no layer")
                    elif theirs != own and RANK[theirs] >= RANK[own]:
                        relation = "a sibling" if RANK[theirs] == RANK[own] else "a layer above"
                        problems.append(f"{where}: {own} includes {target}, {relation} ({theirs})")
    for p in problems:
        print(p)
    if problems:
        sys.exit(f"{len(problems)} include(s) break the layering")
    print(f"{files} files in {sum(map(len, LAYERS))} libraries over {len(LAYERS)} layers; "
          "none includes a layer above its own")


main()
