import os
import lit.formats
from lit.llvm import llvm_config

config.name = "stringc"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".pe", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(os.path.dirname(config.stringc_tools_dir), "tests", "lit")
config.excludes = ["lit.cfg.py", "lit.site.cfg.py", "Inputs"]

config.substitutions.append(("%examples", os.path.join(config.stringc_src_root, "examples")))
config.substitutions.append(("%scripts", os.path.join(config.stringc_src_root, "scripts")))
config.substitutions.append(("%bindir", config.stringc_tools_dir))
llvm_config.with_system_environment(["HOME", "TMP", "TEMP"])
llvm_config.use_default_substitutions()
llvm_config.add_tool_substitutions(
    ["stringc", "string-opt", "stringrun", "train_example", "c_example"], [config.stringc_tools_dir])
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)

# Debian's python3-torch imports under /usr/bin/python3 (not always the
# Python that runs lit): tests that import torch say `REQUIRES: torch` and run
# `%torch_python`.
import subprocess
torch_python = "/usr/bin/python3"
if os.path.exists(torch_python) and subprocess.run(
        [torch_python, "-c", "import torch"], stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL).returncode == 0:
    config.available_features.add("torch")
config.substitutions.append(("%torch_python", torch_python))
