"""The loss of a Qwen3 checkpoint on a token batch, in pure Python (double
precision), optionally with torchtitan's bf16 casts where kiln-mixed-precision
puts them: every parameter, each linear's input and output, attention's
queries and keys after rope, rounded to bf16 (round to nearest even). An independent reference for check-hlo.test.

usage: qwen3_forward.py MODEL_DIR TOKENS_JSON [float32|bfloat16]
"""
import json
import math
import struct
import sys

model_dir, tokens_path = sys.argv[1], sys.argv[2]
bf16 = len(sys.argv) > 3 and sys.argv[3] == "bfloat16"
cfg = json.load(open(model_dir + "/config.json"))
raw = open(model_dir + "/model.safetensors", "rb").read()
header_len = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + header_len])
base = 8 + header_len


def round_bf16(x):
    if not bf16:
        return x
    u = struct.unpack("<I", struct.pack("<f", x))[0]
    if (u & 0x7FFFFFFF) > 0x7F800000:
        return x  # NaN
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return struct.unpack("<f", struct.pack("<I", u))[0]


def param(key):
    entry = header[key]
    assert entry["dtype"] == "F32"
    a, b = entry["data_offsets"]
    values = [round_bf16(v) for v in struct.unpack("<%df" % ((b - a) // 4), raw[base + a:base + b])]
    shape = entry["shape"]
    if len(shape) == 1:
        return values
    return [values[i * shape[1]:(i + 1) * shape[1]] for i in range(shape[0])]


def linear(rows, weight):
    rows = [[round_bf16(x) for x in row] for row in rows]
    return [[round_bf16(sum(a * b for a, b in zip(row, w))) for w in weight] for row in rows]


def rms_norm(x, w, eps):
    inv = 1 / math.sqrt(sum(v * v for v in x) / len(x) + eps)
    return [w[i] * x[i] * inv for i in range(len(x))]


heads, kv_heads, d = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
eps, theta = cfg["rms_norm_eps"], cfg["rope_theta"]
inv_freq = [1.0 / theta ** (2 * i / d) for i in range(d // 2)]


def rope(v, pos):
    cos = [math.cos(pos * f) for f in inv_freq] * 2
    sin = [math.sin(pos * f) for f in inv_freq] * 2
    rotated = [-v[i + d // 2] for i in range(d // 2)] + [v[i] for i in range(d // 2)]
    return [v[i] * cos[i] + rotated[i] * sin[i] for i in range(d)]


def split_heads(rows, n, norm=None):
    return [[(rms_norm(r[j * d:(j + 1) * d], norm, eps) if norm else r[j * d:(j + 1) * d])
             for j in range(n)] for r in rows]


table = param("model.embed_tokens.weight")
total, count = 0.0, 0
for sequence in json.load(open(tokens_path)):
    ids, labels = sequence[:-1], sequence[1:]
    h = [list(table[t]) for t in ids]
    for layer in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % layer
        x = [rms_norm(v, param(p + "input_layernorm.weight"), eps) for v in h]
        q = split_heads(linear(x, param(p + "self_attn.q_proj.weight")), heads,
                        param(p + "self_attn.q_norm.weight"))
        k = split_heads(linear(x, param(p + "self_attn.k_proj.weight")), kv_heads,
                        param(p + "self_attn.k_norm.weight"))
        v = split_heads(linear(x, param(p + "self_attn.v_proj.weight")), kv_heads)
        q = [[[round_bf16(x) for x in rope(hv, pos)] for hv in row] for pos, row in enumerate(q)]
        k = [[[round_bf16(x) for x in rope(hv, pos)] for hv in row] for pos, row in enumerate(k)]
        attn = []
        for t in range(len(ids)):
            row = []
            for j in range(heads):
                g = j // (heads // kv_heads)
                scores = [sum(a * b for a, b in zip(q[t][j], k[u][g])) / math.sqrt(d)
                          for u in range(t + 1)]
                m = max(scores)
                e = [math.exp(s - m) for s in scores]
                z = sum(e)
                row += [sum(e[u] * v[u][g][i] for u in range(t + 1)) / z for i in range(d)]
            attn.append(row)
        o = linear(attn, param(p + "self_attn.o_proj.weight"))
        h = [[a + b for a, b in zip(hr, orow)] for hr, orow in zip(h, o)]
        x = [rms_norm(v, param(p + "post_attention_layernorm.weight"), eps) for v in h]
        gate = linear(x, param(p + "mlp.gate_proj.weight"))
        up = linear(x, param(p + "mlp.up_proj.weight"))
        act = [[g / (1 + math.exp(-g)) * u for g, u in zip(gr, ur)] for gr, ur in zip(gate, up)]
        down = linear(act, param(p + "mlp.down_proj.weight"))
        h = [[a + b for a, b in zip(hr, dr)] for hr, dr in zip(h, down)]
    x = [rms_norm(v, param("model.norm.weight"), eps) for v in h]
    logits = linear(x, table)  # tied embeddings
    for t, label in enumerate(labels):
        m = max(logits[t])
        total += m + math.log(sum(math.exp(z - m) for z in logits[t])) - logits[t][label]
        count += 1
print("loss %.7f" % (total / count))
