"""Stand-in: the package's exports as aws-neuron/nki-library @ d2ad3a57 has
them (src/nkilib_src/nkilib/core/moe/moe_cte/__init__.py)."""

from .moe_cte import MoECTEImplementation, MoECTESpec, ShardOnIConfig, moe_cte
