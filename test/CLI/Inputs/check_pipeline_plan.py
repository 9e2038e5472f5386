"""Checks kiln plan --json under pipeline parallelism against the same run's
plan on one rank (same model, batch and target).

- The stages split the work: the pipeline ranks' FLOPs together are the
  one-rank step's within 0.1% (the tied table's summed gradient and each
  rank's share of the norm are the only extra work).
- Compute summed over the ranks is at least the one rank's and within 25% of
  it: smaller microbatches pay each op's fixed overhead more often.
- The step is the schedule's runs one after another, then the slowest
  rank's update; the bubble is the schedule's idle share, so each run's
  makespan is at least the busiest rank's share of the compute.
- Every transfer is one microbatch of the residual stream at the target's
  compute width: --transfer-bytes.
"""
import argparse
import json
import sys

parser = argparse.ArgumentParser()
parser.add_argument("one_rank")
parser.add_argument("pipelined", nargs="+")
parser.add_argument("--transfer-bytes", type=int, required=True)
args = parser.parse_args()

one = json.load(open(args.one_rank))
errors = []
for path in args.pipelined:
    plan = json.load(open(path))
    p = plan["pipeline"]
    name = f"{path} ({p['schedule']}, pp {p['degree']})"
    flops = sum(p["flops"])
    if abs(flops / one["flops_per_rank"] - 1) > 1e-3:
        errors.append(f"{name}: FLOPs over the ranks {flops:.6g} vs one rank's "
                      f"{one['flops_per_rank']:.6g}")
    compute = sum(p["compute_seconds"])
    if not one["compute_seconds"] <= compute <= 1.25 * one["compute_seconds"]:
        errors.append(f"{name}: compute over the ranks {compute} s vs one rank's "
                      f"{one['compute_seconds']} s")
    step = p["schedule_runs"] * p["makespan_seconds"] + max(p["update_seconds"])
    if abs(plan["step_seconds"] / step - 1) > 1e-9:
        errors.append(f"{name}: step {plan['step_seconds']} s, not runs x makespan + the "
                      f"slowest update = {step} s")
    busiest = max(c - u for c, u in zip(p["compute_seconds"], p["update_seconds"]))
    if p["makespan_seconds"] * p["schedule_runs"] < busiest * (1 - 1e-9):
        errors.append(f"{name}: makespan {p['makespan_seconds']} s shorter than the busiest "
                      f"rank's compute {busiest / p['schedule_runs']} s per run")
    if not 0 < p["bubble_fraction"] < 1:
        errors.append(f"{name}: bubble {p['bubble_fraction']}")
    if p["transfer_bytes"] != args.transfer_bytes:
        errors.append(f"{name}: transfers of {p['transfer_bytes']} bytes, expected "
                      f"{args.transfer_bytes}")
    print(f"{name}: FLOPs x{flops / one['flops_per_rank']:.6f}, compute "
          f"x{compute / one['compute_seconds']:.3f} of one rank's, bubble "
          f"{100 * p['bubble_fraction']:.1f}%")
if errors:
    sys.exit("\n".join(errors))
print("pipeline plans consistent")
