"""What both stand-in APIs do for one trace: bind, record, answer."""

import base64
import dataclasses
import enum
import inspect
import json
import os

import numpy as np


def describe(value):
    """JSON for the log and payload: a tensor as its shape and dtype, an
    enum member as Class.member, an object (a spec dataclass) as
    Class(field=..., ...) with its fields that are set."""
    if isinstance(value, np.ndarray):
        return {"shape": list(value.shape), "dtype": str(value.dtype)}
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    if dataclasses.is_dataclass(value):
        fields = [f"{f.name}={describe(getattr(value, f.name))}"
                  for f in dataclasses.fields(value) if getattr(value, f.name) is not None]
        return f"{type(value).__name__}({', '.join(fields)})"
    return value


def trace(api, func, inputs, lnc, target, artifacts):
    signature = inspect.signature(func)
    bound = signature.bind(**inputs)  # TypeError on a name the kernel lacks
    tensors = [name for name, v in bound.arguments.items() if isinstance(v, np.ndarray)]
    returns = list(getattr(func, "standin_returns", []))
    fresh = func.standin_results(bound.arguments) if hasattr(func, "standin_results") else []
    if os.environ.get("KILN_NKI_STANDIN_FAIL") == "results":
        returns, fresh = (returns[:-1], fresh) if returns else (returns, fresh[:-1])
    artifact = os.path.join(os.path.abspath(artifacts), f"{func.__name__}.standin.klir")
    with open(artifact, "w") as f:
        f.write("stand-in traced kernel\n")
    keywords = {n: describe(v) for n, v in bound.arguments.items()
                if not isinstance(v, np.ndarray)}
    payload = base64.b64encode(json.dumps({
        "standin": api, "function": f"{func.__module__}.{func.__name__}",
        "operands": tensors, "keywords": keywords, "lnc": lnc, "target": target,
        "klir_binary": artifact}, sort_keys=True).encode()).decode()
    record = {"api": api, "function": f"{func.__module__}.{func.__name__}", "lnc": lnc,
              "target": target, "parameters": list(signature.parameters),
              "arguments": [[n, describe(v)] for n, v in bound.arguments.items()]}
    log = os.environ.get("KILN_NKI_STANDIN_LOG")
    if log:
        with open(log, "a") as f:
            f.write(json.dumps(record) + "\n")
    results = [bound.arguments[n] for n in returns] + list(fresh)
    aliases = {tensors.index(n): i for i, n in enumerate(returns)}
    return payload, results, aliases
