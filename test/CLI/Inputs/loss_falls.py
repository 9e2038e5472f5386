"""Checks that a kiln metrics.jsonl shows learning: the last validation loss
is below the first by at least MARGIN.

usage: loss_falls.py METRICS.jsonl MARGIN
Prints the first and last validation losses; exits 1 unless the loss fell.
"""
import json
import sys

with open(sys.argv[1]) as f:
    losses = [r["validation_loss"] for r in map(json.loads, f) if "validation_loss" in r]
margin = float(sys.argv[2])
if len(losses) < 2:
    print(f"need two validation losses, got {len(losses)}")
    sys.exit(1)
fell = losses[0] - losses[-1]
print(f"validation loss {losses[0]:.4f} -> {losses[-1]:.4f}: "
      f"{'fell' if fell >= margin else 'did not fall'} by {fell:.4f} (margin {margin})")
sys.exit(0 if fell >= margin else 1)
