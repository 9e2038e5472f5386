"""Checks `kiln plan --fit T --json` against the plan of the profile it wrote
(-o), validated independently: under the written profile, each fitted run's
planned tokens/s error (kiln plan --validate --json) is the fit's
error_after, the fit does not worsen the rms log error, only the fitted
factors moved, and every run has a leave-one-out error.
Usage: check_fit.py FIT_JSON VALIDATE_JSON PROFILE_JSON"""
import json
import math
import sys

fit = json.load(open(sys.argv[1]))
validated = {r["name"]: r for r in json.load(open(sys.argv[2]))["runs"]}
profile = json.load(open(sys.argv[3]))
assert fit["rms_log_error_after"] <= fit["rms_log_error_before"] + 1e-12, fit
def written(name):
    """A parameter's value in the written profile."""
    if name == "allocator_overhead":
        return profile[name]
    if name.endswith("_latency"):
        return profile["interconnect"][name[: -len("_latency")]]["latency_seconds"]
    return profile["efficiency"][name]

for name, before in fit["before"].items():
    after = fit["after"][name]
    if name in fit["fitted"]:
        assert abs(written(name) - after) < 1e-12, (name, written(name))
    else:
        assert after == before, (name, before, after)
        assert written(name) == before, name
rms = 0
for run in fit["runs"]:
    figure = validated[run["name"]]["figures"][run["figure"]]
    assert abs(figure["error"] - run["error_after"]) < 1e-9, (run["name"], figure, run)
    rms += math.log(1 + figure["error"]) ** 2
    assert run["leave_one_out"] is not None, run["name"]
rms = math.sqrt(rms / len(fit["runs"]))
assert abs(rms - fit["rms_log_error_after"]) < 1e-9, (rms, fit["rms_log_error_after"])
assert "fitted by kiln plan --fit" in profile["sources"]["efficiency"]
print("%d runs: the written profile plans the fit's errors; rms %.4f -> %.4f" % (
    len(fit["runs"]), fit["rms_log_error_before"], fit["rms_log_error_after"]))
