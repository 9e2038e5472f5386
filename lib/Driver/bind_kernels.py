#!/usr/bin/env python3
"""Binds the NKI custom calls of a Kiln Neuron artifact to their traced kernels.

kiln compile writes this script beside model.hlo.pb and kernels.json. Run it on
a machine with the Neuron SDK before neuronx-cc (compile.sh does): for every
custom call that kernels.json lists, it traces the NKI Library function the call
is bound to with the NKI frontend installed, at the call's shapes and keyword
arguments (each distinct trace once), and writes what the trace gives into the
module: the frontend's payload as the call's backend_config, the constants the
trace adds as operands after the call's own, its output aliases and
has_collectives. The traced kernels' artifacts stay in kernels/ (the payloads
name them by path). Kiln's module is kept as model.unbound.hlo.pb on the first
run and every run binds from it, so running twice gives the same module;
model.hlo.pb is replaced atomically.

usage: python3 bind_kernels.py [DIR] [--frontend auto|beta3|beta2|legacy]

Frontends, as NKIPy's nki_op.py drives them (aws-neuron/nkipy @ b91c9800):
  beta3   the nki package's nki.framework (CompileKernel; payload
          backend_config_b64, constants handled inside)
  beta2   the nki package's GenericKernel (bind_arguments,
          dump_config_with_boundargs; constants to append as operands)
  legacy  neuronxcc.nki's GenericKernel, the same calls
auto (the default) takes the first of beta3, beta2, legacy that imports.
Needs python3 with numpy and protobuf (the SDK's environment has both).
"""

import argparse
import base64
import contextlib
import dataclasses
import importlib
import json
import os
import sys

# The serialized FileDescriptorProto of Kiln's proto/hlo.proto (the subset of
# XLA's HloModuleProto Kiln writes), filled in by kiln compile so that the
# script reads and writes the module with any protobuf runtime, no generated
# code needed.
HLO_DESCRIPTOR = "__KILN_HLO_DESCRIPTOR__"


class BindError(Exception):
    pass


def hlo_module_class():
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    pool = descriptor_pool.DescriptorPool()
    pool.Add(descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(HLO_DESCRIPTOR)))
    descriptor = pool.FindMessageTypeByName("xla.HloModuleProto")
    if hasattr(message_factory, "GetMessageClass"):
        return message_factory.GetMessageClass(descriptor)
    return message_factory.MessageFactory(pool).GetPrototype(descriptor)


@dataclasses.dataclass
class Trace:
    """What a frontend's trace of one kernel at one set of shapes gives."""

    payload: object  # the backend_config: str or bytes
    constants: list  # numpy arrays appended as operands, in order
    results: list  # (dtype name, shape tuple) per result
    aliases: dict  # tensor argument position -> result index
    has_collectives: bool


def numpy_dtype(name):
    import numpy as np

    if name == "bfloat16":
        import ml_dtypes  # numpy has no bfloat16; the SDK ships ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def dtype_name(dtype):
    import numpy as np

    return "bfloat16" if str(dtype) == "bfloat16" else np.dtype(dtype).name


def trace_beta3(kernel, arguments, target, lnc, artifacts):
    from nki.framework.compiled import CompileKernel

    fields = {f.name: getattr(kernel, f.name) for f in dataclasses.fields(kernel) if f.name != "func"}
    fields["lnc"] = lnc
    compiled = CompileKernel(kernel.func, **fields, target=target, artifacts_dir=artifacts)
    nir = compiled._cached_compile_to_bir(
        frontend=compiled._frontend_cls(enable_backend_opt=compiled._enable_backend_opt),
        inputs=dict(arguments),
        compile_opts=compiled._compile_opts(),
    )
    config = nir.build_config()
    return Trace(
        payload=config.backend_config_b64,
        constants=[],
        results=[(dtype_name(s.dtype), tuple(s.shape)) for s in config.output_specs],
        aliases=dict(config.operand_output_aliases or {}),
        has_collectives=bool(config.has_collectives),
    )


@contextlib.contextmanager
def working_directory(path):
    """The frontend writes its artifacts where it runs (contextlib.chdir is
    3.11's; the SDK's Python may be older)."""
    previous = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(previous)


def trace_generic(kernel, arguments, target, lnc, artifacts):
    """beta2 and legacy: a GenericKernel traced with its arguments bound."""
    import numpy as np

    # NKI's SPMD launch: the grid spreads the kernel over the LNC's physical
    # cores (get_verified_program_sharding_info in nkilib reads it).
    if lnc > 1:
        kernel = kernel[lnc]
    kernel.is_framework_tensor = lambda t: isinstance(t, np.ndarray)
    kernel.map_framework_tensor = lambda t: (t.shape, t.dtype)
    kernel.translate_to_neuron_dtype = lambda d: d
    if dataclasses.is_dataclass(getattr(kernel, "opts", None)):
        kernel.opts = dataclasses.replace(kernel.opts, enable_const_rewrite=True)
    with working_directory(artifacts), kernel.bind_arguments(**arguments) as bound:
        config = kernel.dump_config_with_boundargs(bound)
    return Trace(
        payload=config.dumped_config,
        constants=list(config.constant_values or []),
        results=[(dtype_name(dtype), tuple(shape)) for dtype, shape in config.return_types],
        aliases=dict(config.operand_output_aliases or {}),
        has_collectives=bool(config.has_collectives),
    )


FRONTENDS = {
    "beta3": ("nki.framework.compiled", trace_beta3),
    "beta2": ("nki.compile", trace_generic),
    "legacy": ("neuronxcc.nki.compile", trace_generic),
}


def pick_frontend(name, calls):
    order = ["beta3", "beta2", "legacy"] if name == "auto" else [name]
    for candidate in order:
        module, tracer = FRONTENDS[candidate]
        try:
            importlib.import_module(module)
        except ImportError:
            continue
        return candidate, tracer
    tried = ", ".join(f"{FRONTENDS[c][0]} ({c})" for c in order)
    raise BindError(f"no NKI frontend is installed (tried {tried}): run it on a machine with "
                    f"the Neuron SDK ({len(calls)} custom calls to bind, the first "
                    f"{call_name(calls[0])})")


def call_name(call):
    return (f"custom call {call['instruction']} ({call['fqn']}, {call['kiln_kernel']} "
            f"{call['direction']})")


def kernel_function(binding, where):
    try:
        module = importlib.import_module(binding["module"])
    except ImportError as e:
        raise BindError(f"{where}: cannot import {binding['module']}: {e}") from e
    if not hasattr(module, binding["function"]):
        raise BindError(f"{where}: {binding['module']} has no function {binding['function']}")
    return getattr(module, binding["function"])


def python_name(qualified, where):
    """The class a qualified name names (nkilib.core.moe.moe_cte.MoECTESpec)."""
    module_name, _, name = qualified.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise BindError(f"{where}: cannot import {module_name} for {qualified}: {e}") from e
    if not hasattr(module, name):
        raise BindError(f"{where}: {module_name} has no {name}")
    return getattr(module, name)


def keyword_value(value, where):
    """A keyword as the kernel takes it: kernels.json writes an enum member
    as {"enum": class, "member": name} and an object (an nkilib spec) as
    {"object": class, "fields": {...}}; anything else is the value."""
    if isinstance(value, dict) and "enum" in value:
        enum = python_name(value["enum"], where)
        if not hasattr(enum, value["member"]):
            raise BindError(f"{where}: {value['enum']} has no member {value['member']}")
        return getattr(enum, value["member"])
    if isinstance(value, dict) and "object" in value:
        fields = {k: keyword_value(v, where) for k, v in value["fields"].items()}
        try:
            return python_name(value["object"], where)(**fields)
        except TypeError as e:
            raise BindError(f"{where}: {value['object']} does not take {sorted(fields)}: {e}") \
                from e
    return value


def trace_arguments(binding, where):
    """The arguments by name: an empty array per tensor, then the keywords."""
    import numpy as np

    arguments = {a["name"]: np.zeros(a["shape"], dtype=numpy_dtype(a["dtype"]))
                 for a in binding["arguments"]}
    arguments.update({k: keyword_value(v, where) for k, v in binding["keywords"].items()})
    return arguments


def check_trace(trace, call, binding, where):
    """A trace that does not fit the call it replaces is refused, naming it."""
    function = f"{binding['module']}.{binding['function']}"
    want = [(r["dtype"], tuple(r["shape"])) for r in call["results"]]
    if len(trace.results) != len(want):
        raise BindError(f"{where}: the trace of {function} returns {len(trace.results)} "
                        f"results, the call has {len(want)}")
    for i, (got, expected) in enumerate(zip(trace.results, want)):
        if got != expected:
            raise BindError(f"{where}: result {i} of the trace of {function} is {got[0]}"
                            f"{list(got[1])}, the call's is {expected[0]}{list(expected[1])}")
    call_aliases = {r["aliases_operand"]: i for i, r in enumerate(call["results"])
                    if "aliases_operand" in r}
    if trace.aliases != call_aliases:
        raise BindError(f"{where}: the trace of {function} aliases operands to results as "
                        f"{trace.aliases}, the call as {call_aliases}")


PRIMITIVE = {"float32": "F32", "bfloat16": "BF16", "int32": "S32", "uint32": "U32", "bool": "PRED"}


def set_literal(instruction, array, module_class, where):
    """A constant instruction holding `array` (XLA's literal fields)."""
    import numpy as np

    types = module_class.DESCRIPTOR.file.enum_types_by_name["PrimitiveType"]
    name = dtype_name(array.dtype)
    if name not in PRIMITIVE:
        raise BindError(f"{where}: the trace adds a {name} constant, which Kiln's module "
                        "cannot hold")
    for shape in (instruction.shape, instruction.literal.shape):
        shape.element_type = types.values_by_name[PRIMITIVE[name]].number
        shape.dimensions.extend(array.shape)
        shape.layout.minor_to_major.extend(reversed(range(array.ndim)))
        shape.is_dynamic_dimension.extend([False] * array.ndim)
    flat = array.reshape(-1)
    literal = instruction.literal
    if name == "float32":
        literal.f32s.extend(float(v) for v in flat)
    elif name == "bfloat16":
        literal.bf16s = np.ascontiguousarray(flat).view(np.uint16).astype("<u2").tobytes()
    elif name == "int32":
        literal.s32s.extend(int(v) for v in flat)
    elif name == "uint32":
        literal.u32s.extend(int(v) for v in flat)
    else:
        literal.preds.extend(bool(v) for v in flat)


def bind_module(module, calls, traces, module_class):
    """Writes each call's trace into its instruction; constants the trace
    adds become constant instructions just before the call, its operands
    after the call's own."""
    pending = {call["instruction"]: (call, traces[key], where) for call, (key, where) in calls}
    next_id = 1 + max(i.id for c in module.computations for i in c.instructions)
    for computation in module.computations:
        if not any(i.name in pending for i in computation.instructions):
            continue
        ordered = []
        for original in computation.instructions:
            instruction = type(original)()
            instruction.CopyFrom(original)
            entry = pending.pop(instruction.name, None)
            if entry is None:
                ordered.append(instruction)
                continue
            call, trace, where = entry
            if instruction.opcode != "custom-call":
                raise BindError(f"{where}: {instruction.name} is a {instruction.opcode}")
            for array in trace.constants:
                constant = type(original)()
                constant.id, constant.name, constant.opcode = next_id, f"constant.{next_id}", "constant"
                set_literal(constant, array, module_class, where)
                instruction.operand_ids.append(next_id)
                ordered.append(constant)
                next_id += 1
            payload = trace.payload
            instruction.backend_config = payload.encode() if isinstance(payload, str) else payload
            if trace.has_collectives:
                instruction.frontend_attributes.map["has_collectives"] = "1"
            del instruction.output_operand_aliasing[:]
            for operand, result in sorted(trace.aliases.items()):
                alias = instruction.output_operand_aliasing.add()
                if len(call["results"]) > 1:  # a tuple-shaped call
                    alias.output_shape_index.append(result)
                alias.operand_index = operand
            ordered.append(instruction)
        del computation.instructions[:]
        computation.instructions.extend(ordered)
    if pending:
        call, _, where = next(iter(pending.values()))
        raise BindError(f"{where}: model.hlo.pb has no instruction {call['instruction']}")


def write_atomic(path, data):
    temporary = path + ".tmp"
    with open(temporary, "wb") as f:
        f.write(data)
    os.replace(temporary, path)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dir", nargs="?", default=os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--frontend", default="auto", choices=["auto", *FRONTENDS])
    args = parser.parse_args(argv)
    directory = os.path.abspath(args.dir)
    with open(os.path.join(directory, "kernels.json")) as f:
        table = json.load(f)
    if not table["calls"]:
        print("bind_kernels: the module has no NKI custom calls: nothing to bind")
        return 0
    unbound = [c for c in table["calls"] if c["binding"] is None]
    if unbound:
        raise BindError(f"{call_name(unbound[0])} cannot be bound: {unbound[0]['unbound']}"
                        + (f" (and {len(unbound) - 1} more calls)" if len(unbound) > 1 else ""))
    frontend, tracer = pick_frontend(args.frontend, table["calls"])
    module_class = hlo_module_class()
    original = os.path.join(directory, "model.unbound.hlo.pb")
    bound_path = os.path.join(directory, "model.hlo.pb")
    source = original if os.path.exists(original) else bound_path
    with open(source, "rb") as f:
        data = f.read()
    module = module_class.FromString(data)

    traces, calls = {}, []
    for call in table["calls"]:
        binding, where = call["binding"], call_name(call)
        key = json.dumps([binding["module"], binding["function"], binding["keywords"],
                          [(a["name"], a["dtype"], a["shape"]) for a in binding["arguments"]]])
        if key not in traces:
            kernel = kernel_function(binding, where)
            arguments = trace_arguments(binding, where)
            artifacts = os.path.join(directory, "kernels", str(len(traces)))
            os.makedirs(artifacts, exist_ok=True)
            try:
                trace = tracer(kernel, arguments, table["target"], table["lnc"], artifacts)
            except Exception as e:
                raise BindError(f"{where}: tracing {binding['module']}.{binding['function']} "
                                f"with the {frontend} frontend failed: {type(e).__name__}: {e}") \
                    from e
            traces[key] = trace
        check_trace(traces[key], call, binding, where)
        calls.append((call, (key, where)))

    bind_module(module, calls, traces, module_class)
    if source != original:
        write_atomic(original, data)
    write_atomic(bound_path, module.SerializeToString())
    constants = sum(len(traces[key].constants) for _, (key, _) in calls)
    print(f"bind_kernels: {len(calls)} custom calls bound with the {frontend} NKI frontend "
          f"({len(traces)} traces in kernels/, {constants} constant operands added); "
          f"model.hlo.pb rewritten, Kiln's module kept as model.unbound.hlo.pb")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BindError as e:
        print(f"bind_kernels: error: {e}", file=sys.stderr)
        sys.exit(1)
    except OSError as e:
        print(f"bind_kernels: error: {e}", file=sys.stderr)
        sys.exit(1)
