#!/usr/bin/env bash
# Issue 31's speed target: Qwen3-32B captured, its stages partitioned for
# PP4 x TP4 x FSDP4 (64 ranks) and one rank's program printed (its stage's
# forward and backward and its update: kiln capture --rank), under 2 s;
# beside it, in the same run, the baseline of one rank's whole step at TP4 x
# FSDP16 (kiln capture --train-step --rank, the same 64 ranks without pp),
# each the median of 3 runs, and the ratio. Usage: bench/pipeline.sh [BUILD]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
KILN=$BUILD/tools/kiln/kiln
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

common=(--model qwen3-32b --seq 4096 --batch 4 --train-step --parallelism.world_size=64
        --parallelism.tensor_parallel_degree=4 --rank 21)
median() { # name, command...
  local name=$1
  shift
  for i in 1 2 3; do
    local start end
    start=$(date +%s.%N)
    "$@" -o "$work/$name.mlir" > /dev/null
    end=$(date +%s.%N)
    python3 -c "print($end - $start)"
  done | sort -n | sed -n 2p > "$work/$name.seconds"
}
median whole "$KILN" capture "${common[@]}"
median pipelined "$KILN" capture "${common[@]}" --parallelism.pipeline_parallel_degree=4 \
  --parallelism.data_parallel_shard_degree=4
whole=$(cat "$work/whole.seconds")
pipelined=$(cat "$work/pipelined.seconds")
printf 'qwen3-32b rank 21 of 64, captured, partitioned and printed (median of 3):\n'
printf '  TP4 x FSDP16, the whole step        %6.2f s  %8d lines\n' "$whole" \
  "$(wc -l < "$work/whole.mlir")"
printf '  PP4 x TP4 x FSDP4, its stage+update %6.2f s  %8d lines  %.2fx the whole step (target: under 2 s)\n' \
  "$pipelined" "$(wc -l < "$work/pipelined.mlir")" "$(python3 -c "print($pipelined / $whole)")"
