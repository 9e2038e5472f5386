"""Stand-in: rope_hf's signature as aws-neuron/nki-library @ d2ad3a57 has it
(src/nkilib_src/nkilib/core/embeddings/rope_hf.py); it returns (q_out, k_out)."""

import nki


@nki.jit
@nki.standin_returns("q_out", "k_out")
def rope_hf(q, k, q_out, k_out, cos=None, sin=None, rope_cache=None, backward=False):
    raise NotImplementedError("stand-in: the NKI Library kernel runs only on Neuron")
