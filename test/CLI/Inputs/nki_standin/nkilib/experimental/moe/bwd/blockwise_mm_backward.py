"""Stand-in: blockwise_mm_bwd's signature as aws-neuron/nki-library @ d2ad3a57
has it (src/nkilib_src/nkilib/experimental/moe/bwd/blockwise_mm_backward.py;
the defaults that are nkilib objects are None here). Without bias it returns
the gradients of hidden_states, expert_affinities_masked, gate_up_proj_weight
and down_proj_weight, each its input's shape and dtype."""

import numpy as np

import nki


def _results(a):
    return [np.zeros_like(a[n]) for n in ("hidden_states", "expert_affinities_masked",
                                          "gate_up_proj_weight", "down_proj_weight")]


@nki.jit
@nki.standin_results(_results)
def blockwise_mm_bwd(hidden_states, expert_affinities_masked, gate_up_proj_weight,
                     down_proj_weight, gate_up_proj_act_checkpoint_T, down_proj_act_checkpoint,
                     token_position_to_id, block_to_expert, output_hidden_states_grad,
                     block_size, skip_dma=None, compute_dtype=None,
                     is_tensor_update_accumulating=True, shard_option=None, affinity_option=None,
                     kernel_type_option=None, clamp_limits=None, bias=False,
                     activation_type=None, block_tile_size=None):
    raise NotImplementedError("stand-in: the NKI Library kernel runs only on Neuron")
