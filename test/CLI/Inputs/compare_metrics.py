"""Compares the per-step losses, grad norms and validation losses of two kiln
metrics.jsonl files.

usage: compare_metrics.py A.jsonl B.jsonl TOLERANCE [GRAD_NORM_RTOL]
TOLERANCE is absolute; with GRAD_NORM_RTOL, grad norms are compared relative
to A's instead. Prints one line per step and 'N passed, M failed'; exits 1 on
any mismatch.
"""
import json
import sys


def steps(path, key):
    with open(path) as f:
        return {r["step"]: r for r in map(json.loads, f) if key in r}


tol = float(sys.argv[3])
grad_rtol = float(sys.argv[4]) if len(sys.argv) > 4 else None
a, b = steps(sys.argv[1], "loss"), steps(sys.argv[2], "loss")
va, vb = steps(sys.argv[1], "validation_loss"), steps(sys.argv[2], "validation_loss")
passed = failed = 0
if sorted(a) != sorted(b) or not a or sorted(va) != sorted(vb):
    print(f"steps differ: {sorted(a)} vs {sorted(b)}, validation {sorted(va)} vs {sorted(vb)}")
    sys.exit(1)
checks = [(a, b, step, key) for step in sorted(a) for key in ("loss", "grad_norm")]
checks += [(va, vb, step, "validation_loss") for step in sorted(va)]
for x, y, step, key in checks:
    diff = abs(x[step][key] - y[step][key])
    if key == "grad_norm" and grad_rtol is not None:
        ok = diff <= grad_rtol * abs(x[step][key])
    else:
        ok = diff <= tol
    passed += ok
    failed += not ok
    print(f"step {step} {key} {x[step][key]:.7f} {y[step][key]:.7f} diff {diff:.1e} "
          f"{'ok' if ok else 'MISMATCH'}")
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
