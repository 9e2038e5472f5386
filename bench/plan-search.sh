#!/usr/bin/env bash
# kiln plan --search as it runs (candidates planned from reduced layer
# counts and scaled) against every candidate's whole model
# (--search-whole-model, the reference; both pruned, one worker per core),
# in one run: Qwen3-32B on one trn2.48xlarge (54 candidates) and, with --large,
# Qwen3-235B-A22B on four (219; its whole-model search takes minutes).
# Prints each search's seconds and the ratio, and checks that both find the
# same layouts fitting, the same memory per rank for every candidate both
# planned, and step times within 0.1% (docs/planner.md#layout-search).
# Usage: bench/plan-search.sh [BUILD] [--large]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
KILN=$BUILD/tools/kiln/kiln
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

searches=("qwen3-32b 1")
[[ "${2:-}" == "--large" ]] && searches+=("qwen3-235b-a22b 4")

for s in "${searches[@]}"; do
  read -r model nodes <<<"$s"
  for mode in scaled whole; do
    extra=()
    [[ $mode == whole ]] && extra=(--search-whole-model)
    "$KILN" plan --model "$model" --target trn2.48xlarge --nodes "$nodes" \
      --training.seq_len=4096 --training.local_batch_size=1 --search --json \
      --search-top 100000 "${extra[@]}" > "$work/$model.$mode.json" 2>/dev/null
  done
  python3 - "$work/$model.scaled.json" "$work/$model.whole.json" "$model" <<'PY'
import json, sys
scaled, whole = (json.load(open(f)) for f in sys.argv[1:3])
def key(e):
    return (e["dp_replicate"], e["dp_shard"], e["tp"], e["ep"], e["sequence_parallel"],
            json.dumps(e["activation_checkpoint"], sort_keys=True), e["local_batch_size"])
S = {key(e): e for e in scaled["fitting"] + scaled["not_fitting"]}
W = {key(e): e for e in whole["fitting"] + whole["not_fitting"]}
assert {key(e) for e in scaled["fitting"]} == {key(e) for e in whole["fitting"]}, "fitting sets differ"
worst = 0.0
for k, w in W.items():
    s = S.get(k)
    if s is None or "memory_per_rank_bytes" not in s or "memory_per_rank_bytes" not in w:
        continue  # pruned: not planned
    assert s["memory_per_rank_bytes"] == w["memory_per_rank_bytes"], (k, s, w)
    worst = max(worst, abs(s["step_seconds"] / w["step_seconds"] - 1))
assert worst <= 1e-3, worst
ts, tw = scaled["search_seconds"], whole["search_seconds"]
print(f"{sys.argv[3]:<16} {whole['layouts_planned']:>4} candidates  whole {tw:7.2f} s  "
      f"scaled {ts:6.2f} s ({scaled['layouts_planned']} planned, {scaled['layouts_pruned']} "
      f"layouts pruned)  {tw / ts:5.1f}x  memory equal, step within {100 * worst:.3f}%")
PY
done
