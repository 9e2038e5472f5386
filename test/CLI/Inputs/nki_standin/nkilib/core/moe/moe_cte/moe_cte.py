"""Stand-in: moe_cte's signature and spec classes as aws-neuron/nki-library
@ d2ad3a57 has them (src/nkilib_src/nkilib/core/moe/moe_cte/moe_cte.py; the
defaults that are nkilib objects are None here)."""

import dataclasses
import enum
from typing import Optional

import numpy as np

import nki


class MoECTEImplementation(enum.Enum):
    shard_on_block = 0
    shard_on_i = 1
    shard_on_i_hybrid = 2
    shard_on_i_dropping = 3
    shard_on_block_mx = 4
    shard_on_i_mx = 5
    shard_on_i_mx_hybrid = 6


@dataclasses.dataclass
class ShardOnIConfig:
    checkpoint_activation: bool = False
    expert_affinity_multiply_on_I: bool = False
    num_static_block: Optional[int] = None


@dataclasses.dataclass
class MoECTESpec:
    implementation: MoECTEImplementation
    shard_on_block: Optional[object] = None
    shard_on_I: Optional[ShardOnIConfig] = None

    def __post_init__(self):
        if self.implementation in (MoECTEImplementation.shard_on_i,
                                   MoECTEImplementation.shard_on_i_hybrid,
                                   MoECTEImplementation.shard_on_i_dropping) \
                and self.shard_on_I is None:
            self.shard_on_I = ShardOnIConfig()


def _results(a):
    """shard_on_i's: the output, hidden_states' shape, then with
    checkpoint_activation (affinity on H) gate_up_activations_T [N, 2, I, B]
    in the weights' dtype and down_activations [N, B, H] in down's."""
    spec = a["spec"]
    assert isinstance(spec, MoECTESpec), f"spec must be a MoECTESpec, not {spec!r}"
    out = [np.zeros_like(a["hidden_states"])]
    if spec.shard_on_I is not None and spec.shard_on_I.checkpoint_activation:
        n, b = a["block_to_expert"].shape[0], a["block_size"]
        e, i, h = a["down_proj_weight"].shape
        out.append(np.zeros((n, 2, i, b), dtype=a["gate_up_proj_weight"].dtype))
        out.append(np.zeros((n, b, h), dtype=a["down_proj_weight"].dtype))
    return out


@nki.jit
@nki.standin_results(_results)
def moe_cte(hidden_states, expert_affinities_masked, gate_up_proj_weight, down_proj_weight,
            token_position_to_id, block_to_expert, block_size, spec, conditions=None,
            gate_and_up_proj_bias=None, down_proj_bias=None, quantization_config=None,
            gate_up_activations_T=None, down_activations=None, activation_function=None,
            skip_dma=None, compute_dtype=None, is_tensor_update_accumulating=True,
            expert_affinities_scaling_mode=None, gate_clamp_upper_limit=None,
            gate_clamp_lower_limit=None, up_clamp_upper_limit=None, up_clamp_lower_limit=None):
    raise NotImplementedError("stand-in: the NKI Library kernel runs only on Neuron")
