"""Re-checks `kiln plan --validate --json` against the published-runs file,
independently of kiln's own arithmetic: for every figure of every run, the
published value is the file's, the error is planned / published - 1 and,
for a checked run, |error| <= the tolerance the file states.
Usage: check_validation.py RUNS_JSON VALIDATE_JSON"""
import json
import sys

runs = json.load(open(sys.argv[1]))["runs"]
report = json.load(open(sys.argv[2]))["runs"]
assert len(runs) == len(report), (len(runs), len(report))
checked = figures = 0
for run, got in zip(runs, report):
    assert got["name"] == run["name"], (got["name"], run["name"])
    assert set(got["figures"]) == set(run["published"]), (run["name"], got["figures"].keys())
    is_checked = run.get("checked", True)
    assert got["checked"] == is_checked, run["name"]
    assert got["fit"] == run.get("fit", True), run["name"]
    for name, published in run["published"].items():
        f = got["figures"][name]
        assert f["published"] == published, (run["name"], name)
        error = f["planned"] / published - 1
        assert abs(error - f["error"]) < 1e-9, (run["name"], name, error, f["error"])
        if is_checked:
            figures += 1
            tolerance = run["tolerance"][name]
            assert abs(error) <= tolerance, "%s: %s %+.1f%% outside %.0f%%" % (
                run["name"], name, 100 * error, 100 * tolerance)
    checked += is_checked
print("%d checked runs, %d figures within the file's tolerances" % (checked, figures))
