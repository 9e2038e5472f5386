"""Stand-in for the beta 2 API: nki.compile.GenericKernel."""

import contextlib
import dataclasses
import os
from types import SimpleNamespace

import numpy as np

from nki._trace import trace
from nki.framework.kernel import Kernel


@dataclasses.dataclass
class Options:
    enable_const_rewrite: bool = False


class GenericKernel(Kernel):
    def __init__(self, func, lnc=1):
        super().__init__(func, lnc)
        self.grid = ()
        self.opts = Options()

    def __getitem__(self, grid):
        launched = GenericKernel(self.func, self.lnc)
        launched.grid = grid if isinstance(grid, tuple) else (grid,)
        return launched

    @contextlib.contextmanager
    def bind_arguments(self, **arguments):
        for name, value in arguments.items():
            if isinstance(value, np.ndarray) and not self.is_framework_tensor(value):
                raise TypeError(f"{name}: not a framework tensor")
        yield dict(arguments)

    def dump_config_with_boundargs(self, bound):
        lnc = self.grid[0] if self.grid else 1
        payload, results, aliases = trace("beta2", self.func, bound, lnc, None, os.getcwd())
        return SimpleNamespace(
            dumped_config=payload,
            constant_values=[np.array([float(lnc)], dtype=np.float32)],
            return_types=[(r.dtype, r.shape) for r in results],
            operand_output_aliases=aliases,
            has_collectives=False,
            result_is_sequence=True,
        )
