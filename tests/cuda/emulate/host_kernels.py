"""Builds the generated GPU kernels for the host CPU, so their logic can be
tested without a GPU (tests/cuda/emulate/AttentionEmulatorTest.cpp).

From `stringc --emit=nvvm` output, each gpu.module whose name matches
--match is translated to LLVM IR (mlir-translate), its NVVM special
registers and barrier become calls into the emulator (emu_tid_x,
emu_ctaid_y, emu_barrier, ...; the emulator runs one OS thread per CUDA
thread), libdevice calls (__nv_expf, ...) stay external for the emulator to
define, and a wrapper NAME_packed(ptr) reads the kernel's arguments from an
array of 8-byte slots. Shared memory (addrspace(3) globals) stays as module
globals: the x86 backend treats address spaces below 256 as plain memory.
Each module is compiled with llc and all are linked into one shared library.
Warp shuffles have no emulation: modules using them are refused.

usage: host_kernels.py NVVM MATCH OUT_DIR MLIR_TRANSLATE LLC CXX LIBRARY"""
import os
import re
import subprocess
import sys

nvvm, match, out_dir, translate, llc, cxx, library = sys.argv[1:8]
text = open(nvvm).read()
os.makedirs(out_dir, exist_ok=True)
objects = []
for m in re.finditer(r"gpu\.module @(\w+) \[[^\]]*\]\s*\{", text):
    name = m.group(1)
    if not re.search(match, name):
        continue
    start, depth, i = m.end(), 1, m.end()
    while depth:
        depth += (text[i] == "{") - (text[i] == "}")
        i += 1
    body = text[start:i - 1]
    if "nvvm.shfl" in body:
        sys.exit("host_kernels.py: kernel %s uses warp shuffles (not emulated)" % name)
    mlir = os.path.join(out_dir, name + ".mlir")
    with open(mlir, "w") as f:
        f.write("module {\n" + body + "\n}\n")
    ll = subprocess.run([translate, "--mlir-to-llvmir", mlir], check=True, capture_output=True,
                        text=True).stdout
    ll = re.sub(r"^(target (datalayout|triple)|!nvvm\.annotations).*$", "", ll, flags=re.M)
    ll = re.sub(r"@llvm\.nvvm\.read\.ptx\.sreg\.(tid|ctaid|ntid|nctaid)\.([xyz])", r"@emu_\1_\2",
                ll)
    ll = ll.replace("@llvm.nvvm.barrier0", "@emu_barrier")
    if "@llvm.nvvm." in ll:
        sys.exit("host_kernels.py: kernel %s uses an NVVM intrinsic the emulator lacks: %s" %
                 (name, re.search(r"@llvm\.nvvm\.[\w.]+", ll).group(0)))
    signature = re.search(r"define void @" + name + r"\((.*?)\)", ll).group(1)
    types = [p.strip().split()[0] for p in signature.split(",") if p.strip()]
    wrapper = ["define void @%s_packed(ptr %%args) {" % name]
    for index, type_ in enumerate(types):
        wrapper.append("  %%p%d = getelementptr i64, ptr %%args, i64 %d" % (index, index))
        wrapper.append("  %%a%d = load %s, ptr %%p%d" % (index, type_, index))
    wrapper.append("  call void @%s(%s)" % (
        name, ", ".join("%s %%a%d" % (t, i) for i, t in enumerate(types))))
    wrapper += ["  ret void", "}"]
    path = os.path.join(out_dir, name + ".ll")
    with open(path, "w") as f:
        f.write(ll + "\n" + "\n".join(wrapper) + "\n")
    obj = path[:-3] + ".o"
    subprocess.run([llc, "-O2", "-relocation-model=pic", "-filetype=obj", path, "-o", obj],
                   check=True)
    objects.append(obj)
if not objects:
    sys.exit("host_kernels.py: no gpu.module matches '%s'" % match)
subprocess.run([cxx, "-shared", "-o", library] + objects, check=True)
print("%d kernels -> %s" % (len(objects), library))
