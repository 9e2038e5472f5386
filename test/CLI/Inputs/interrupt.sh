#!/usr/bin/env bash
# Usage: interrupt.sh <metrics.jsonl> <command...>
# Starts the command, waits until it has logged two steps to the JSON Lines
# file, sends it SIGINT (as Ctrl-C would) and exits with the command's status.
set -u
jsonl=$1
shift
"$@" &
pid=$!
for _ in $(seq 600); do
  [ -f "$jsonl" ] && [ "$(grep -c '"step"' "$jsonl")" -ge 2 ] && break
  sleep 0.05
done
kill -INT "$pid"
wait "$pid"
