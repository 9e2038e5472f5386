"""Writes a Qwen3-MoE checkpoint with its experts fused as Transformers v5
holds them (and writes them with save_pretrained(save_original_format=False)):
per layer, mlp.experts.gate_up_proj [E, 2I, H] (each expert's gate_proj rows,
then its up_proj rows) and mlp.experts.down_proj [E, H, I], in place of the
per-expert mlp.experts.E.{gate,up,down}_proj.weight keys.

usage: fuse_experts.py SRC.safetensors DST.safetensors

Byte-level and independent of Kiln: in row-major order, stacking tensors
along a new first dimension, and concatenating them along their first, are
both concatenations of their bytes.
"""
import json
import re
import struct
import sys

src, dst = sys.argv[1:3]
data = open(src, "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
body = data[8 + n:]
metadata = header.pop("__metadata__", None)

tensors = {}  # name -> (dtype, shape, bytes)
experts = {}  # (layer prefix, expert) -> {proj: (dtype, shape, bytes)}
for key, entry in header.items():
    begin, end = entry["data_offsets"]
    value = (entry["dtype"], entry["shape"], body[begin:end])
    m = re.fullmatch(r"(.*\.mlp\.experts)\.(\d+)\.(gate|up|down)_proj\.weight", key)
    if m:
        experts.setdefault(m.group(1), {}).setdefault(int(m.group(2)), {})[m.group(3)] = value
    else:
        tensors[key] = value

for prefix, by_expert in experts.items():
    count = len(by_expert)
    assert sorted(by_expert) == list(range(count)), (prefix, sorted(by_expert))
    dtype, (inter, hidden), _ = by_expert[0]["gate"]
    gate_up = b"".join(by_expert[e]["gate"][2] + by_expert[e]["up"][2] for e in range(count))
    down = b"".join(by_expert[e]["down"][2] for e in range(count))
    tensors[prefix + ".gate_up_proj"] = (dtype, [count, 2 * inter, hidden], gate_up)
    tensors[prefix + ".down_proj"] = (dtype, [count, hidden, inter], down)

out_header, out_body = {}, b""
if metadata is not None:
    out_header["__metadata__"] = metadata
for key in sorted(tensors):
    dtype, shape, chunk = tensors[key]
    out_header[key] = {"dtype": dtype, "shape": shape,
                       "data_offsets": [len(out_body), len(out_body) + len(chunk)]}
    out_body += chunk
text = json.dumps(out_header).encode()
text += b" " * (-len(text) % 8)
open(dst, "wb").write(struct.pack("<Q", len(text)) + text + out_body)
