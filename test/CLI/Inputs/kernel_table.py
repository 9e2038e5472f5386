"""Summarises a kernels.json that kiln compile wrote, one line per distinct
trace the binder would make: the count of calls, the function, its keyword
arguments, then each tensor argument in signature order (its name, what feeds
it: a Kiln operand or the output buffer of a result, its dtype and shape) and
each result with the argument position its buffer is at. Checks on the way
that a bound call's results alias exactly its output-buffer arguments."""
import collections
import json
import sys

table = json.load(open(sys.argv[1]))
calls = table["calls"]
bound = [c for c in calls if c["binding"] is not None]
print(f"{len(calls)} calls, {len(bound)} bound, {table['distinct_traces']} distinct traces, "
      f"target {table['target']}, lnc {table['lnc']}")
lines = collections.Counter()
for c in bound:
    b = c["binding"]
    args = []
    for a in b["arguments"]:
        source = (f"operand{a['kiln_operand']}" if "kiln_operand" in a
                  else f"result{a['output_of_result']}")
        args.append(f"{a['name']}={source}:{a['dtype']}{a['shape']}".replace(" ", ""))
        if "output_of_result" in a:
            r = c["results"][a["output_of_result"]]
            assert r.get("aliases_operand") == a["operand"], (c["instruction"], a)
            assert (r["dtype"], r["shape"]) == (a["dtype"], a["shape"]), (c["instruction"], a)
    assert sum("aliases_operand" in r for r in c["results"]) == \
        sum("output_of_result" in a for a in b["arguments"]), c["instruction"]
    keywords = json.dumps(b["keywords"], sort_keys=True, separators=(",", ":"))
    lines[f"{b['module']}.{b['function']} {c['direction']} {keywords}: {', '.join(args)}"] += 1
for line, n in sorted(lines.items()):
    print(f"{n} x {line}")
unbound = collections.Counter(f"{c['kiln_kernel']} {c['direction']}: {c['unbound']}"
                              for c in calls if c["binding"] is None)
for line, n in sorted(unbound.items()):
    print(f"{n} x unbound {line}")
