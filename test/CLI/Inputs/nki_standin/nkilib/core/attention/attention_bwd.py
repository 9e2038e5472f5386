"""Stand-in: attention_bwd's signature as aws-neuron/nki-library @ d2ad3a57
has it (src/nkilib_src/nkilib/core/attention/attention_bwd.py); it returns
(dq, dk, dv) shaped as q_ref, k_ref, v_ref."""

import numpy as np

import nki


@nki.jit
@nki.standin_results(lambda a: [np.zeros_like(a["q_ref"]), np.zeros_like(a["k_ref"]),
                                np.zeros_like(a["v_ref"])])
def attention_bwd(q_ref, k_ref, v_ref, o_ref, dy_ref, lse_ref, sinks_ref=None, bound_min=None,
                  bound_max=None, use_causal_mask=False, mixed_precision=False,
                  softmax_scale=None, sliding_window=None):
    raise NotImplementedError("stand-in: the NKI Library kernel runs only on Neuron")
