"""Writes a copy of a safetensors file with one tensor dropped or reshaped.

usage: edit_safetensors.py SRC DST drop NAME
       edit_safetensors.py SRC DST truncate NAME   (keeps its first half of dim 0)
The other tensors keep their bytes; the header is rewritten to match.
"""
import json
import struct
import sys

src, dst, action, name = sys.argv[1:5]
data = open(src, "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
body = data[8 + n:]
out_header, out_body = {}, b""
for key, entry in sorted(header.items(), key=lambda kv: kv[0]):
    if key == "__metadata__":
        out_header[key] = entry
        continue
    begin, end = entry["data_offsets"]
    chunk, shape = body[begin:end], list(entry["shape"])
    if key == name:
        if action == "drop":
            continue
        assert action == "truncate" and shape[0] >= 2, (action, shape)
        chunk = chunk[:len(chunk) // shape[0] * (shape[0] // 2)]
        shape[0] //= 2
    out_header[key] = {"dtype": entry["dtype"], "shape": shape,
                       "data_offsets": [len(out_body), len(out_body) + len(chunk)]}
    out_body += chunk
if name not in header:
    sys.exit(f"{src}: no tensor {name}")
text = json.dumps(out_header).encode()
text += b" " * (-len(text) % 8)
open(dst, "wb").write(struct.pack("<Q", len(text)) + text + out_body)
