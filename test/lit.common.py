# -*- Python -*-
# lit configuration for Kiln's IR and CLI tests, loaded by the build's
# lit.site.cfg.py (from lit.site.cfg.py.in) after it has set the build paths.
import os
import lit.formats

config.name = "Kiln"
config.test_format = lit.formats.ShTest(not lit.util.which("bash") is None)
config.suffixes = [".mlir", ".test"]
config.excludes = ["lit.cfg.py", "lit.common.py", "lit.site.cfg.py", "CMakeLists.txt", "unit",
                   "data", "Inputs"]
config.test_source_root = os.path.dirname(os.path.abspath(__file__))
config.test_exec_root = os.path.join(config.kiln_obj_root, "test")

# Kiln's tools first, then LLVM 22's FileCheck/not/count (LLVM 14 is also on
# PATH on Debian, so never rely on unqualified names resolving there).
config.environment["PATH"] = os.pathsep.join(
    [config.kiln_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")])
config.substitutions.append(("%fixtures", os.path.join(config.test_source_root, "data")))
config.substitutions.append(("%configs", os.path.join(os.path.dirname(config.test_source_root), "configs")))
# MPICH's launcher, by its own name (an Open MPI mpiexec may also be on PATH).
config.substitutions.append(("%mpiexec", config.mpiexec))
# The Qwen3 tokenizer fetched by scripts/fetch-assets.sh (make test runs it).
config.substitutions.append(
    ("%tokenizer", os.path.join(config.kiln_asset_dir, "qwen3", "tokenizer.json")))
# MLIR's runtime libraries (printMemrefF32, ...) for mlir-runner: the
# compiled-mode lit tests run the lowered IR and check the numbers printed.
config.substitutions.append(
    ("%mlir_runner_utils",
     ",".join(os.path.join(os.path.dirname(config.llvm_tools_dir), "lib", lib)
              for lib in ("libmlir_runner_utils.so", "libmlir_c_runner_utils.so"))))
