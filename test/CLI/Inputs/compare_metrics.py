"""Compares the per-step losses and grad norms of two kiln metrics.jsonl files.

usage: compare_metrics.py A.jsonl B.jsonl TOLERANCE
Prints one line per step and 'N passed, M failed'; exits 1 on any mismatch.
"""
import json
import sys


def steps(path):
    with open(path) as f:
        return {r["step"]: r for r in map(json.loads, f) if "loss" in r}


a, b, tol = steps(sys.argv[1]), steps(sys.argv[2]), float(sys.argv[3])
passed = failed = 0
if sorted(a) != sorted(b) or not a:
    print(f"steps differ: {sorted(a)} vs {sorted(b)}")
    sys.exit(1)
for step in sorted(a):
    for key in ("loss", "grad_norm"):
        diff = abs(a[step][key] - b[step][key])
        ok = diff <= tol
        passed += ok
        failed += not ok
        print(f"step {step} {key} {a[step][key]:.7f} {b[step][key]:.7f} diff {diff:.1e} "
              f"{'ok' if ok else 'MISMATCH'}")
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
