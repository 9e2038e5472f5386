"""Copies a kiln compile directory with its manifest.json edited.

usage: edit_manifest.py SRC_DIR DST_DIR STATEMENT
STATEMENT is Python run with the manifest as `m` (e.g. "m['world_size'] = 5");
model.hlo.pb is copied unchanged.
"""
import json
import os
import shutil
import sys

src, dst, statement = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(dst, exist_ok=True)
shutil.copy(os.path.join(src, "model.hlo.pb"), os.path.join(dst, "model.hlo.pb"))
m = json.load(open(os.path.join(src, "manifest.json")))
exec(statement, {"m": m})
json.dump(m, open(os.path.join(dst, "manifest.json"), "w"))
