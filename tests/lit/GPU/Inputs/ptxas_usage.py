"""Assembles each kernel of a `stringc --emit=ptx` file whose name matches a
regular expression with `ptxas -v` and prints one line per kernel for
FileCheck:

  KERNEL registers R spill_stores S spill_loads L stack F smem M

usage: ptxas_usage.py PTX_FILE CUDA_HOME ARCH NAME_REGEX"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

ptx_file, cuda, arch, pattern = sys.argv[1:5]
ptxas = os.path.join(cuda, "bin", "ptxas")
if not os.access(ptxas, os.X_OK):
    ptxas = shutil.which("ptxas")
kernels, name = {}, None
for line in open(ptx_file):
    m = re.match(r"^// kernel: (\S+)", line)
    if m:
        name = m.group(1)
        kernels[name] = []
    elif name:
        kernels[name].append(line)
with tempfile.TemporaryDirectory() as tmp:
    for name in sorted(kernels):
        if not re.search(pattern, name):
            continue
        path = os.path.join(tmp, name + ".ptx")
        with open(path, "w") as f:
            f.writelines(kernels[name])
        run = subprocess.run([ptxas, "-arch=" + arch, "-O3", "-v", path, "-o", path + ".cubin"],
                             capture_output=True, text=True)
        if run.returncode:
            print(name, "FAILED", run.stderr.replace("\n", " "))
            continue
        log = run.stderr + run.stdout
        def number(regex):
            m = re.search(regex, log)
            return int(m.group(1)) if m else 0
        print("%s registers %d spill_stores %d spill_loads %d stack %d smem %d" % (
            name, number(r"Used (\d+) registers"), number(r"(\d+) bytes spill stores"),
            number(r"(\d+) bytes spill loads"), number(r"(\d+) bytes stack frame"),
            number(r"(\d+) bytes smem")))
