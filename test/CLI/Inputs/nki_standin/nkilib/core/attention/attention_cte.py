"""Stand-in: attention_cte's signature as aws-neuron/nki-library @ d2ad3a57
has it (src/nkilib_src/nkilib/core/attention/attention_cte.py; softmax_dtype
and mm_out_dtype default to nl.float32 there). With cache_softmax it returns
(output, neg_max, sum_recip): q's shape (tp_q, not tp_out), then
[batch, 128, ceil(seqlen_q / 128)] float32 twice."""

import numpy as np

import nki


def _results(a):
    q = a["q"]
    stats = np.zeros((q.shape[0], 128, -(-q.shape[1] // 128)), dtype=np.float32)
    return [np.zeros_like(q), stats, stats.copy()] if a.get("cache_softmax") else [np.zeros_like(q)]


@nki.jit
@nki.standin_results(_results)
def attention_cte(q, k, v, scale=1.0, causal_mask=True, k_prior=None, v_prior=None,
                  prior_used_len=None, sink=None, sliding_window=None, tp_q=True, tp_k=False,
                  tp_out=False, cache_softmax=False, softmax_dtype="float32",
                  mm_out_dtype="float32", cp_offset=None, global_cp_deg=None,
                  cp_strided_q_slicing=False, bound_min=None, bound_max=None):
    raise NotImplementedError("stand-in: the NKI Library kernel runs only on Neuron")
