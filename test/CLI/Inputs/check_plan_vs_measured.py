"""Checks kiln train's closing "planned vs measured" line.

The peak memory must agree within 2% (the plan and the executor count the
same buffers); --pipelined: a pipelined run, whose peak the executor does not
measure, states its planned peak alone. The step time is checked within a
factor of --time-factor of the fastest measured step: tests share a loaded
machine, where the probe at start-up and the steps after it can run several
times apart; docs/planner.md reports the measured errors.
"""
import argparse
import re
import sys

parser = argparse.ArgumentParser()
parser.add_argument("log")
parser.add_argument("--time-factor", type=float, required=True)
parser.add_argument("--pipelined", action="store_true")
args = parser.parse_args()

step = r"planned vs measured: step ([0-9.]+) s vs ([0-9.]+) s .*"
pattern = re.compile(step + (r"peak memory ([0-9.]+) MB planned for pp rank [0-9]+, not measured"
                             if args.pipelined else
                             r"peak memory ([0-9.]+) MB vs ([0-9.]+) MB"))
matches = [pattern.search(line) for line in open(args.log)]
matches = [m for m in matches if m]
if len(matches) != 1:
    sys.exit(f"expected one 'planned vs measured' line in {args.log}, found {len(matches)}")
planned_s, measured_s = map(float, matches[0].groups()[:2])
peak = ""
if not args.pipelined:
    planned_mb, measured_mb = map(float, matches[0].groups()[2:])
    if measured_mb <= 0 or abs(planned_mb / measured_mb - 1) > 0.02:
        sys.exit(f"planned peak {planned_mb} MB is not within 2% of the measured {measured_mb} MB")
    peak = f", peak {planned_mb / measured_mb:.4f}x"
ratio = planned_s / measured_s
if not 1 / args.time_factor <= ratio <= args.time_factor:
    sys.exit(f"planned step {planned_s} s is {ratio:.2f}x the measured {measured_s} s, "
             f"outside a factor of {args.time_factor}")
print(f"ok: step {ratio:.2f}x{peak}")
