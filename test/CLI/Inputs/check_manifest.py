"""Checks a kiln compile manifest of the dense fixture under FSDP2 x TP2."""
import json
import sys

m = json.load(open(sys.argv[1]))
assert m["world_size"] == 4, m["world_size"]
axes = {g["axis"]: g for g in m["grid"]}
assert axes["dp_shard"]["replica_groups"] == [[0, 2], [1, 3]], axes["dp_shard"]
assert axes["tp"]["replica_groups"] == [[0, 1], [2, 3]], axes["tp"]
params = {p.get("name"): p for p in m["parameters"]}
emb = params["model.embed_tokens.weight"]
assert emb["role"] == "param" and emb["dtype"] == "float32", emb
assert emb["whole_shape"] == [512, 64] and emb["shape"] == [128, 64], emb
assert [s["axes"] for s in emb["split"]] == [["tp", "dp_shard"]], emb["split"]
assert params["exp_avg.model.embed_tokens.weight"]["whole_shape"] == [512, 64]
assert params["input_ids"]["role"] == "input" and params["input_ids"]["dtype"] == "int32"
assert params["step"]["shape"] == [] and params["step"]["dtype"] == "int32"
# The rank: the last entry parameter, an int32 scalar fed each rank's id.
rank = m["parameters"][-1]
assert rank["role"] == "rank" and rank["dtype"] == "int32" and rank["shape"] == [], rank
# The runtime binds tensors by NEFF name: the manifest's names.
for p in m["parameters"]:
    assert p["neff_name"] == p["name"], p
for o in m["outputs"]:
    assert o["neff_name"] == (o.get("param") or o.get("state") or o.get("output")), o
assert m["target"]["neuron_max_communicators"] == 16
# Every parameter and state is updated in place: its output aliases it.
aliased = {a["parameter"] for a in m["input_output_alias"]}
assert all(a["kind"] == "must-alias" for a in m["input_output_alias"]), m["input_output_alias"]
for p in m["parameters"]:
    assert (p["parameter"] in aliased) == (p["role"] in ("param", "state")), p
outputs = [o.get("output") for o in m["outputs"]]
assert "loss" in outputs and "grad_norm" in outputs, outputs
assert m["hlo"]["distinct_replica_group_lists"] == 3
assert m["memory_plan_per_rank"]["peak_bytes"] > 0
print("manifest ok")
