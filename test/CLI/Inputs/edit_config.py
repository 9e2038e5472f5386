"""Writes a copy of a Hugging Face config.json with fields replaced.

usage: edit_config.py SRC_DIR DST_DIR FIELD=JSON [FIELD=JSON ...]
Copies SRC_DIR/config.json to DST_DIR/config.json with each FIELD set to the
JSON value (and links SRC_DIR's model.safetensors into DST_DIR if present).
"""
import json
import os
import sys

src, dst = sys.argv[1], sys.argv[2]
with open(os.path.join(src, "config.json")) as f:
    config = json.load(f)
for item in sys.argv[3:]:
    field, value = item.split("=", 1)
    config[field] = json.loads(value)
os.makedirs(dst, exist_ok=True)
with open(os.path.join(dst, "config.json"), "w") as f:
    json.dump(config, f)
weights = os.path.abspath(os.path.join(src, "model.safetensors"))
if os.path.exists(weights) and not os.path.exists(os.path.join(dst, "model.safetensors")):
    os.symlink(weights, os.path.join(dst, "model.safetensors"))
