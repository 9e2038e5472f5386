# -*- Python -*-
# lit run on the source tree (`lit test/CLI/eval.test`): the build's site
# configuration holds the tool paths and loads lit.common.py. The build is
# ./build unless KILN_BUILD_DIR names another.
import os

_repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_build = os.environ.get("KILN_BUILD_DIR") or os.path.join(_repo, "build")
_site = os.path.join(_build, "test", "lit.site.cfg.py")
if not os.path.exists(_site):
    lit_config.fatal(f"{_site} does not exist: build Kiln first (make build), or set "
                     "KILN_BUILD_DIR to its build directory")
lit_config.load_config(config, _site)
