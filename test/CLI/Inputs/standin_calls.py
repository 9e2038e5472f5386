"""Prints the calls the stand-in NKI frontend received (its JSON-lines log),
one line each: the API, the kernel, the LNC and target, then every argument
in the order of the kernel's signature (tensors as dtype[shape])."""
import json
import sys

for line in open(sys.argv[1]):
    call = json.loads(line)
    args = []
    for name, value in call["arguments"]:
        if isinstance(value, dict):
            value = f"{value['dtype']}{value['shape']}".replace(" ", "")
        args.append(f"{name}={value}")
    order = [n for n, _ in call["arguments"]]
    assert order == [p for p in call["parameters"] if p in order], "not in signature order"
    print(f"{call['api']} {call['function']} lnc {call['lnc']} target {call['target']}: "
          + " ".join(args))
