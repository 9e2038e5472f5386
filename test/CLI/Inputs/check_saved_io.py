"""Checks what `kiln check-hlo --save-io IO_DIR` wrote against the manifest.

usage: check_saved_io.py DIR IO_DIR
Every rank has one input per manifest parameter (the rank parameter holding
the rank's id, int32) and one output per manifest output, each entry's bytes
inside its file; rank 0's loss output is the CPU runtime's loss (1e-5).
Standard library only.
"""
import json
import math
import os
import struct
import sys

art, io_dir = sys.argv[1], sys.argv[2]
manifest = json.load(open(os.path.join(art, "manifest.json")))
io = json.load(open(os.path.join(io_dir, "io.json")))
assert len(io["ranks"]) == manifest["world_size"], len(io["ranks"])


def value(data, entry, index=0):
    fmt = "<i" if entry["dtype"] == "int32" else "<f"
    return struct.unpack_from(fmt, data, entry["offset"] + 4 * index)[0]


for r, rank in enumerate(io["ranks"]):
    data = open(os.path.join(io_dir, rank["file"]), "rb").read()
    inputs, outputs = rank["inputs"], rank["outputs"]
    assert len(inputs) == len(manifest["parameters"]), (len(inputs), r)
    assert len(outputs) == len(manifest["outputs"]), (len(outputs), r)
    end = 0
    for entry, p in zip(inputs, manifest["parameters"]):
        assert entry["shape"] == p["shape"], (entry, p["name"])
        assert entry["dtype"] == ("int32" if p["dtype"] == "int32" else "float32"), (entry, p)
        end = entry["offset"] + 4 * math.prod(entry["shape"])
    assert end <= len(data), (end, len(data))
    rank_entry = inputs[[p["role"] for p in manifest["parameters"]].index("rank")]
    assert rank_entry["dtype"] == "int32" and value(data, rank_entry) == r, (r, rank_entry)
    last = outputs[-1]
    assert last["offset"] + 4 * math.prod(last["shape"]) == len(data), (last, len(data))
loss_index = next(o["index"] for o in manifest["outputs"] if o.get("output") == "loss")
data0 = open(os.path.join(io_dir, io["ranks"][0]["file"]), "rb").read()
loss = value(data0, io["ranks"][0]["outputs"][loss_index])
cpu = io["cpu_runtime"]["loss"]
assert abs(loss - cpu) <= 1e-5 * max(1.0, abs(cpu)), (loss, cpu)
print(f"saved io ok: {len(io['ranks'])} ranks, loss {loss:.6f}")
