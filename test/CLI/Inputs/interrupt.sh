#!/usr/bin/env bash
# Usage: interrupt.sh <metrics.jsonl> <command...>
# Starts the command, waits until it has logged $MIN_STEPS (default 2) steps
# to the JSON Lines file, sends it $SIGNAL (default INT, as Ctrl-C would)
# and exits with the command's status.
set -u
jsonl=$1
shift
"$@" &
pid=$!
for _ in $(seq 600); do
  [ -f "$jsonl" ] && [ "$(grep -c '"step"' "$jsonl")" -ge "${MIN_STEPS:-2}" ] && break
  sleep 0.05
done
sleep "${EXTRA_SLEEP:-0}"
kill -"${SIGNAL:-INT}" "$pid"
wait "$pid"
