#!/usr/bin/env bash
# Compiled mode against eager (docs/compiled.md), in one run, alternating:
# configs/brown.json (qwen3-tiny, vocabulary 151936, batch 8 x seq 128, the
# fused loss) for STEPS steps on 1 rank of 2 threads, eager, compiled,
# eager, compiled; then FSDP2 on 2 ranks of 1 thread each (4 rows per rank,
# the same global batch) the same way. Reports tokens/s (mean of steps
# 2..N), peak RSS (rank 0's) and the compile time of each run, and
# compiled/eager ratios of each layout's two pairs' means.
# Usage: bench/compiled.sh [BUILD] [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
STEPS=${2:-20}
KILN=$BUILD/tools/kiln/kiln
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

run() { # name, launcher words ("" for none), extra options...
  local name=$1 launcher=$2
  shift 2
  # shellcheck disable=SC2086 # the launcher is words
  $launcher "$KILN" train --config configs/brown.json \
    --training.steps="$STEPS" --metrics.log_freq=1 --metrics.eval_freq=0 \
    --metrics.jsonl="$work/$name.jsonl" --metrics.loss_curve="" \
    --data.save_validation_tokens="" --checkpoint.enable=false \
    --checkpoint.folder="$work/$name-checkpoint" "$@" > "$work/$name.out" 2>&1 ||
    { cat "$work/$name.out"; exit 1; }
  python3 - "$work/$name" "$name" <<'PY'
import json, re, sys
rows = [json.loads(l) for l in open(sys.argv[1] + ".jsonl") if '"tokens_per_s"' in l]
tps = sum(r["tokens_per_s"] for r in rows[1:]) / len(rows[1:])
rss = max(r["rss_peak_bytes"] for r in rows) / 2**30
out = open(sys.argv[1] + ".out").read()
m = re.search(r"compile: the step compiled for the CPU in ([0-9.]+) s", out)
compile_s = f"compile {m.group(1)} s" if m else "eager"
print(f"{sys.argv[2]:<16} {tps:8.0f} tok/s  peak RSS {rss:5.2f} GiB  {compile_s}  "
      f"final loss {rows[-1]['loss']:.6f}")
open(sys.argv[1] + ".fig", "w").write(f"{tps} {rss}")
PY
}

ratios() { # eager and compiled name prefixes
  python3 - "$work" "$1" "$2" <<'PY'
import sys
fig = lambda n: [float(x) for x in open(f"{sys.argv[1]}/{n}.fig").read().split()]
e = [fig(sys.argv[2] + "-1"), fig(sys.argv[2] + "-2")]
c = [fig(sys.argv[3] + "-1"), fig(sys.argv[3] + "-2")]
mean = lambda xs, i: sum(x[i] for x in xs) / len(xs)
print(f"compiled / eager: {mean(c, 0) / mean(e, 0):.2f}x tokens/s, "
      f"{mean(c, 1) / mean(e, 1):.2f}x peak RSS (target: >= 1.2x at <= 1.0x)")
PY
}

one="env OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2"
echo "configs/brown.json, 1 rank x 2 threads, steps 2..$STEPS"
for i in 1 2; do
  run eager-"$i" "$one"
  run compiled-"$i" "$one" --compile.enable=true
done
ratios eager compiled

two="mpiexec.mpich -n 2 env OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1"
echo "configs/brown.json, FSDP2 on 2 ranks x 1 thread, steps 2..$STEPS"
for i in 1 2; do
  run fsdp-eager-"$i" "$two" --training.local_batch_size=4
  run fsdp-compiled-"$i" "$two" --training.local_batch_size=4 --compile.enable=true
done
ratios fsdp-eager fsdp-compiled
