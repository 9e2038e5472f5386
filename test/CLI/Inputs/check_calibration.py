"""Checks kiln calibrate-cpu's fit.

Every fitted efficiency must be a fraction in (0, 1] and the op overhead a
positive time under a second. The plan with the fitted factors must come
within --time-factor of the measured step: each factor is fitted so that its
op class's planned seconds equal the measured ones, so only the capped
classes and the ops of no class may part them (a loaded machine moves the
measured ops, not this agreement, by much).
"""
import argparse
import json
import re
import sys

parser = argparse.ArgumentParser()
parser.add_argument("log")
parser.add_argument("--time-factor", type=float, required=True)
parser.add_argument("--classes", required=True,
                    help="comma-separated efficiency fields the table must fit")
parser.add_argument("--gemms", action="store_true",
                    help="the table has a gemm_seconds row (GEMMs timed at their shapes) "
                         "whose planned seconds are within --time-factor of the measured")
args = parser.parse_args()

text = open(args.log).read()
fitted = re.search(r'fitted "efficiency": (\{.*\})', text)
if not fitted:
    sys.exit(f"no fitted efficiency object in {args.log}")
efficiency = json.loads(fitted.group(1))
for name in args.classes.split(","):
    if not re.search(rf"^  efficiency\.{name} +[0-9]+ ", text, re.M):
        sys.exit(f"no table row for efficiency.{name}")
    value = efficiency.get(name)
    if name == "op_overhead_seconds":
        if not (isinstance(value, float) and 0 < value < 1):
            sys.exit(f"op_overhead_seconds {value} is not a time in (0, 1) s")
    elif not (isinstance(value, (int, float)) and 0 < value <= 1):
        sys.exit(f"efficiency.{name} {value} is not a fraction in (0, 1]")
if args.gemms:
    row = re.search(r"^  gemm_seconds +([0-9]+) +[0-9.]+ +[0-9.]+ +([0-9.]+)s +([0-9.]+)s +measured ",
                    text, re.M)
    if not row:
        sys.exit(f"no gemm_seconds row in {args.log}")
    count, gemmMeasured, gemmPlanned = int(row.group(1)), float(row.group(2)), float(row.group(3))
    if count == 0 or not 1 / args.time_factor <= gemmPlanned / gemmMeasured <= args.time_factor:
        sys.exit(f"{count} GEMM-timed ops planned {gemmPlanned} s against {gemmMeasured} s measured")
step = re.search(r"step: measured ([0-9.]+) s \(fastest\), planned ([0-9.]+) s with the "
                 r"shipped profile, ([0-9.]+) s with the fitted factors", text)
if not step:
    sys.exit(f"no step line in {args.log}")
measured, shipped, refitted = map(float, step.groups())
ratio = refitted / measured
if not 1 / args.time_factor <= ratio <= args.time_factor:
    sys.exit(f"the fitted plan {refitted} s is {ratio:.2f}x the measured step {measured} s")
print(f"ok: fitted plan {ratio:.2f}x the measured step; {json.dumps(efficiency)}")
