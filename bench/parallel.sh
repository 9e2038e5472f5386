#!/usr/bin/env bash
# One training step of a small Qwen3 with the real vocabulary (configs/qwen3-tiny:
# 4 layers, hidden 128, vocab 151936) at global batch 4 x seq 256, in one run:
# 1 rank of 2 threads (the baseline), FSDP2, TP2 and TP2 with sequence
# parallelism on 2 ranks of 1 thread.
# Reports tokens/s (mean of steps 2..N), the ratio to the baseline and the
# seconds each rank spends in collectives. Usage: bench/parallel.sh [BUILD] [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
STEPS=${2:-5}
KILN=$BUILD/tools/kiln/kiln
MPIEXEC=mpiexec.mpich
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# A fixed global batch of 4 rows of 257 token ids (the first 1028 ids of a
# seeded draw; the data do not change the cost).
python3 -c "
import json, random
r = random.Random(0)
json.dump([[r.randrange(151936) for _ in range(257)] for _ in range(4)], open('$work/tokens.json', 'w'))"

run() { # name, ranks, threads, local batch, extra options...
  local name=$1 ranks=$2 threads=$3 local_batch=$4
  shift 4
  local launch=()
  [ "$ranks" -gt 1 ] && launch=($MPIEXEC -n "$ranks")
  OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads "${launch[@]}" "$KILN" train \
    --model.hf_path=configs/qwen3-tiny --training.steps="$STEPS" \
    --training.local_batch_size="$local_batch" --training.seq_len=256 \
    --lr_scheduler.warmup_steps=0 --data.tokens_file="$work/tokens.json" \
    --metrics.log_freq=1 --metrics.jsonl="$work/$name.jsonl" "$@" > /dev/null
  python3 - "$work/$name.jsonl" "$name" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"tokens_per_s"' in l][1:]
tps = sum(r["tokens_per_s"] for r in rows) / len(rows)
coll = sum(r["collective_s"] for r in rows) / len(rows)
sec = sum(r["seconds"] for r in rows) / len(rows)
print(f"{sys.argv[2]:<26} {tps:9.0f} tok/s  {sec:6.3f} s/step  {coll:6.3f} s in collectives")
open(sys.argv[1] + ".tps", "w").write(str(tps))
PY
}

echo "qwen3-tiny (vocab 151936), global batch 4 x seq 256, steps 2..$STEPS"
run one-rank-2-threads 1 2 4
run fsdp2-2-ranks 2 1 2
run tp2-2-ranks 2 1 4 --parallelism.tensor_parallel_degree=2 \
  --parallelism.enable_sequence_parallel=false
run tp2-sp-2-ranks 2 1 4 --parallelism.tensor_parallel_degree=2
base=$(cat "$work/one-rank-2-threads.jsonl.tps")
for name in fsdp2-2-ranks tp2-2-ranks tp2-sp-2-ranks; do
  python3 -c "print(f'{\"$name\":<26} {$(cat "$work/$name.jsonl.tps") / $base:.2f}x the 1-rank tokens/s')"
done
