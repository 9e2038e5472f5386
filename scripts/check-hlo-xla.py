#!/usr/bin/env python3
"""Runs the HLO module `kiln compile` wrote through XLA itself and compares.

usage: check-hlo-xla.py DIR IO_DIR [--platform cpu|cuda] [--tolerance T]

DIR holds what `kiln compile` wrote (model.hlo.pb, manifest.json); IO_DIR
what `kiln check-hlo DIR --save-io IO_DIR` wrote: every rank's arguments, as
the manifest says to feed them (the rank parameter included), and the
results of Kiln's reference evaluator. The module is compiled by XLA
(jaxlib's PJRT client) for one replica per rank, its collectives
cross-replica as the module states, executed once on every rank, and each
rank's every output compared with Kiln's evaluator, and the loss with the
CPU runtime's, within the tolerance (relative above 1).

This is the check of the module by the compiler it is written for (XLA's
parser, verifier and passes); neuronx-cc is XLA-based but has its own
conventions, which `kiln check-hlo --neuron` checks. jax and jaxlib are
needed here only: Kiln never imports Python. On the CPU platform the script
asks for as many host devices as there are ranks
(--xla_force_host_platform_device_count).
"""
import argparse
import json
import os
import sys

import numpy as np


def load_io(io_dir):
    io = json.load(open(os.path.join(io_dir, "io.json")))
    ranks = []
    for rank in io["ranks"]:
        data = open(os.path.join(io_dir, rank["file"]), "rb").read()

        def arrays(entries):
            out = []
            for e in entries:
                dtype = np.int32 if e["dtype"] == "int32" else np.float32
                n = int(np.prod(e["shape"], dtype=np.int64))
                a = np.frombuffer(data, dtype=dtype, count=n, offset=e["offset"])
                out.append(a.reshape(e["shape"]).copy())
            return out

        ranks.append((arrays(rank["inputs"]), arrays(rank["outputs"])))
    return io, ranks


def strip_aliases(proto):
    """The module without input_output_alias (HloModuleProto field 8), at the
    wire level: for a client that refuses to alias undonated buffers."""
    out, i = bytearray(), 0

    def varint(at):
        value, shift = 0, 0
        while True:
            b = proto[at]
            value |= (b & 0x7F) << shift
            at += 1
            if not b & 0x80:
                return value, at
            shift += 7

    while i < len(proto):
        start = i
        key, i = varint(i)
        wire = key & 7
        if wire == 0:
            _, i = varint(i)
        elif wire == 1:
            i += 8
        elif wire == 2:
            n, i = varint(i)
            i += n
        elif wire == 5:
            i += 4
        else:
            raise ValueError(f"wire type {wire} at byte {start}")
        if key >> 3 != 8:
            out += proto[start:i]
    return bytes(out)


def to_mlir(xc, proto):
    """StableHLO of the HloModuleProto, by whichever converter this jaxlib has."""
    errors = []
    mlir = getattr(xc._xla, "mlir", None)
    for name in ("hlo_to_stablehlo",):
        fn = getattr(mlir, name, None) if mlir else None
        if fn:
            try:
                return fn(proto), f"_xla.mlir.{name}"
            except Exception as e:  # noqa: BLE001 - report every attempt
                errors.append(f"{name}: {e}")
    fn = getattr(mlir, "xla_computation_to_mlir_module", None) if mlir else None
    if fn and hasattr(xc, "XlaComputation"):
        try:
            return fn(xc.XlaComputation(proto)), "_xla.mlir.xla_computation_to_mlir_module"
        except Exception as e:  # noqa: BLE001
            errors.append(f"xla_computation_to_mlir_module: {e}")
    raise RuntimeError("no HloModuleProto -> StableHLO converter worked: " + "; ".join(errors))


def compile_module(xc, backend, module, devices):
    n = len(devices)
    options = xc.CompileOptions()
    build = options.executable_build_options
    build.num_replicas = n
    build.num_partitions = 1
    build.device_assignment = xc.DeviceAssignment.create(np.array([[d.id] for d in devices]))
    errors = []
    if hasattr(backend, "compile_and_load"):
        try:
            return backend.compile_and_load(module, xc.DeviceList(tuple(devices)), options)
        except Exception as e:  # noqa: BLE001
            errors.append(f"compile_and_load: {e}")
    if hasattr(backend, "compile"):
        for args in ((module, options), (module, xc.DeviceList(tuple(devices)), options)):
            try:
                return backend.compile(*args)
            except Exception as e:  # noqa: BLE001
                errors.append(f"compile{len(args)}: {e}")
    raise RuntimeError("; ".join(errors))


def execute(jax, executable, per_rank_args, devices):
    """Each rank's outputs (numpy), executing once on every device."""
    n_args = len(per_rank_args[0])
    buffers = [[jax.device_put(per_rank_args[r][i], devices[r]) for r in range(len(devices))]
               for i in range(n_args)]
    if hasattr(executable, "execute_sharded"):
        results = executable.execute_sharded(buffers)
        per_output = results.disassemble_into_single_device_arrays()
    else:
        per_output = executable.execute_sharded_on_local_devices(buffers)
    return [[np.asarray(per_output[o][r]) for o in range(len(per_output))]
            for r in range(len(devices))]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dir")
    parser.add_argument("io_dir")
    parser.add_argument("--platform", default="cpu")
    parser.add_argument("--tolerance", type=float, default=1e-4)
    args = parser.parse_args()

    manifest = json.load(open(os.path.join(args.dir, "manifest.json")))
    world = manifest["world_size"]
    if args.platform == "cpu" and "xla_force_host_platform_device_count" not in os.environ.get(
            "XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                                   f" --xla_force_host_platform_device_count={world}")
    import jax
    from jax._src.lib import xla_client as xc

    io, ranks = load_io(args.io_dir)
    if len(ranks) != world:
        sys.exit(f"check-hlo-xla: {args.io_dir} has {len(ranks)} ranks, the manifest {world}")
    backend = jax.devices(args.platform)[0].client
    devices = jax.devices(args.platform)[:world]
    if len(devices) < world:
        sys.exit(f"check-hlo-xla: {world} ranks but {len(devices)} {args.platform} devices")
    proto = open(os.path.join(args.dir, "model.hlo.pb"), "rb").read()
    print(f"jax {jax.__version__} on {args.platform}: {world} replica(s), "
          f"{len(proto)} bytes of HloModuleProto")

    outputs, how = None, []
    for label, data in (("as written", proto), ("input_output_alias removed", strip_aliases(proto))):
        try:
            module, converter = to_mlir(xc, data)
            executable = compile_module(xc, backend, module, devices)
            outputs = execute(jax, executable, [r[0] for r in ranks], devices)
            how.append(f"{label}: converted by {converter}, compiled and run")
            break
        except Exception as e:  # noqa: BLE001
            how.append(f"{label}: {type(e).__name__}: {str(e)[:600]}")
    for line in how:
        print("  " + line)
    if outputs is None:
        sys.exit("check-hlo-xla: XLA did not compile and run the module")

    worst, where = 0.0, ""
    for r, (_, expected) in enumerate(ranks):
        if len(outputs[r]) != len(expected):
            sys.exit(f"rank {r}: XLA returned {len(outputs[r])} outputs, Kiln's evaluator "
                     f"{len(expected)}")
        for o, (got, want) in enumerate(zip(outputs[r], expected)):
            if got.shape != want.shape:
                sys.exit(f"rank {r} output {o}: shape {got.shape} vs {want.shape}")
            diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
            rel = diff / np.maximum(1.0, np.abs(want.astype(np.float64)))
            if rel.size and rel.max() > worst:
                worst, where = float(rel.max()), f"rank {r} output {o} ({manifest['outputs'][o]})"
    loss_index = next(o["index"] for o in manifest["outputs"] if o.get("output") == "loss")
    loss = float(outputs[0][loss_index])
    cpu = io["cpu_runtime"]["loss"]
    print(f"loss       XLA {loss:.8f}  Kiln evaluator {float(ranks[0][1][loss_index]):.8f}  "
          f"CPU runtime {cpu:.8f}")
    print(f"every output of every rank: max relative |XLA - evaluator| {worst:.2e}"
          + (f" at {where}" if where else ""))
    ok = worst <= args.tolerance and abs(loss - cpu) <= args.tolerance * max(1.0, abs(cpu))
    print(f"{'match' if ok else 'MISMATCH'} (tolerance {args.tolerance:g})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
