"""Stand-in for the beta 3 API: nki.framework.compiled.CompileKernel."""

from types import SimpleNamespace

from nki._trace import trace


class CompileKernel:
    def __init__(self, func, lnc=1, target=None, artifacts_dir=None):
        self.func, self.lnc, self.target, self.artifacts_dir = func, lnc, target, artifacts_dir
        self._enable_backend_opt = False
        self._frontend_cls = SimpleNamespace

    def _compile_opts(self):
        return SimpleNamespace(lnc=self.lnc)

    def _cached_compile_to_bir(self, frontend, inputs, compile_opts):
        payload, results, aliases = trace("beta3", self.func, inputs, compile_opts.lnc,
                                          self.target, self.artifacts_dir)
        specs = [SimpleNamespace(shape=r.shape, dtype=r.dtype) for r in results]
        config = SimpleNamespace(backend_config_b64=payload, has_collectives=False,
                                 operand_output_aliases=aliases, output_specs=specs)
        return SimpleNamespace(build_config=lambda: config, is_tuple_return=True)
