"""Builds stringc's generated GPU kernels for the host CPU, for the CUDA
emulator (libstringrt_cuda_emulator.so, docs/cuda.md "Emulator").

Input: one or more `stringc --emit=nvvm` files. Every gpu.module (one kernel
each) is built once: a kernel name met again in another input must have the
same code after normalisation (locations and blank space removed), else this
is an error, so a kernel's name identifies its code across packages.

Each module is translated to LLVM IR (mlir-translate) and rewritten for the
host:
- NVVM special registers and bar.sync become calls into the emulator
  (emu_tid_x, emu_ctaid_y, emu_barrier, ...), which runs a CUDA thread as a
  fiber;
- warp shuffles, mma.sync and ldmatrix become small LLVM functions that
  pass their operands through memory to the emulator's warp rendezvous
  (emu_shfl, emu_mma_m16n8k16_bf16, emu_ldmatrix): intrinsics returning
  structs ({float, i1}, {float x 4}, {i32 x 4}) cannot be mapped 1:1 to C
  functions, whose ABI differs;
- cp.async (4, 8, 16 bytes, with or without src-size), commit_group,
  wait_group and wait_all become calls of the emulator's per-thread copy
  queue (emu_cp_async, emu_cp_async_commit, emu_cp_async_wait), which makes
  a group's copies when the thread waits for it;
- libdevice calls (__nv_expf, ...) stay external: the emulator defines them
  with the host's libm;
- a wrapper NAME_packed(ptr) reads the kernel's arguments from an array of
  8-byte slots, and NAME_signature, a string, records the parameter types,
  the static shared memory in bytes, whether a thread may wait for others
  (a barrier or a warp collective) and a hash of the normalised code:
  "params=ptr,i64,f32;shared=4096;regions=2;waits=1;hash=0123abcd..."
  (regions: the entries of NAME_shared_regions, below), and the library's
  index stringrt_emulated_kernel_names lists its kernels (comma-separated).
- every load and store of alignment >= 2 checks its pointer (a GPU faults
  on a misaligned access, x86 does not): a misaligned one goes to an
  unmapped address, which the emulator's fault handler reports;
- llvm.nvvm.membar.gl (__threadfence, the column sums' tickets) becomes a
  host `fence seq_cst`; atomicrmw is plain LLVM and stays.
Any other NVVM intrinsic is refused, naming it. Shared memory (addrspace(3)
globals) stays as module globals (the emulator runs one block at a time);
a kernel's dynamic shared memory, the external array pe_dynamic_shared
([0 x i8]), becomes a module global of DYNAMIC_SHARED_BYTES (the most a
package's kernel may ask for), recorded as "dynamic=N" in the signature.
The objects (llc) and the bf16 conversions LLVM may call (support.ll) are
linked into one shared library.

usage: host_kernels.py OUT_LIBRARY WORK_DIR MLIR_TRANSLATE LLC CXX NVVM...
"""
import hashlib
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def fail(message):
    sys.exit("host_kernels.py: " + message)


def gpu_modules(path):
    """(name, body) of each gpu.module of an NVVM file."""
    text = open(path).read()
    found = []
    for m in re.finditer(r"gpu\.module @(\w+) \[[^\]]*\]\s*\{", text):
        start, depth, i = m.end(), 1, m.end()
        while depth:
            if i >= len(text):
                fail("%s: unbalanced braces in gpu.module @%s" % (path, m.group(1)))
            depth += (text[i] == "{") - (text[i] == "}")
            i += 1
        found.append((m.group(1), text[start:i - 1]))
    if not found:
        fail("%s has no gpu.module (not stringc --emit=nvvm output?)" % path)
    return found


def normalise(body):
    body = re.sub(r"\s*loc\([^()]*(\([^()]*\)[^()]*)*\)", "", body)
    return "\n".join(line.strip() for line in body.splitlines() if line.strip())


# Special registers: i32 functions of the emulator (a C int return is the
# same ABI). laneid and warpsize for completeness of the mapping.
SREGS = {"tid", "ctaid", "ntid", "nctaid"}
SHFL_MODES = {"up": 0, "down": 1, "bfly": 2, "idx": 3}


def shuffle_wrapper(name, mode, kind, with_pred):
    """An LLVM function named like the intrinsic (emu.* for llvm.*)."""
    t = "float" if kind == "f32" else "i32"
    ret = "{ %s, i1 }" % t if with_pred else t
    lines = ["define internal %s @%s(i32 %%mask, %s %%v, i32 %%b, i32 %%c) #90 {" % (ret, name, t),
             "  %pred = alloca i8"]
    bits = "%v"
    if kind == "f32":
        lines.append("  %bits = bitcast float %v to i32")
        bits = "%bits"
    lines.append("  %%r = call i32 @emu_shfl(i32 %d, i32 %%mask, i32 %s, i32 %%b, i32 %%c, "
                 "ptr %%pred)" % (SHFL_MODES[mode], bits))
    value = "%r"
    if kind == "f32":
        lines.append("  %rf = bitcast i32 %r to float")
        value = "%rf"
    if with_pred:
        lines += ["  %p8 = load i8, ptr %pred", "  %p = trunc i8 %p8 to i1",
                  "  %%s0 = insertvalue %s undef, %s %s, 0" % (ret, t, value),
                  "  %%s1 = insertvalue %s %%s0, i1 %%p, 1" % ret, "  ret %s %%s1" % ret]
    else:
        lines.append("  ret %s %s" % (t, value))
    return lines + ["}"]


def declared_return(ll, intrinsic):
    """The return type of the declaration of `intrinsic` in `ll`."""
    ret = re.search(r"^declare (.*?) @" + re.escape(intrinsic) + r"\(", ll, re.M).group(1)
    return re.sub(r"\b(noundef|nonnull|signext|zeroext)\s+", "", ret).strip()


def mma_wrapper(name, declaration):
    expected = ("{ float, float, float, float } (i32, i32, i32, i32, i32, i32, float, float, "
                "float, float)")
    if declaration != expected:
        fail("%s has the signature %s, the emulator knows %s" % (name, declaration, expected))
    args = ["i32 %a0", "i32 %a1", "i32 %a2", "i32 %a3", "i32 %b0", "i32 %b1",
            "float %c0", "float %c1", "float %c2", "float %c3"]
    ret = "{ float, float, float, float }"
    lines = ["define internal %s @%s(%s) #90 {" % (ret, name, ", ".join(args)),
             "  %a = alloca [4 x i32]", "  %b = alloca [2 x i32]", "  %c = alloca [4 x float]",
             "  %d = alloca [4 x float]"]
    for array, names, t in (("a", 4, "i32"), ("b", 2, "i32"), ("c", 4, "float")):
        for i in range(names):
            lines.append("  %%%sp%d = getelementptr %s, ptr %%%s, i64 %d" % (array, i, t, array, i))
            lines.append("  store %s %%%s%d, ptr %%%sp%d" % (t, array, i, array, i))
    lines.append("  call void @emu_mma_m16n8k16_bf16(ptr %a, ptr %b, ptr %c, ptr %d)")
    value = "undef"
    for i in range(4):
        lines.append("  %%dp%d = getelementptr float, ptr %%d, i64 %d" % (i, i))
        lines.append("  %%d%d = load float, ptr %%dp%d" % (i, i))
        lines.append("  %%s%d = insertvalue %s %s, float %%d%d, %d" % (i, ret, value, i, i))
        value = "%%s%d" % i
    return lines + ["  ret %s %s" % (ret, value), "}"]


LDMATRIX = re.compile(r"llvm\.nvvm\.ldmatrix\.sync\.aligned\.m8n8\.x([124])(\.trans)?\.b16"
                      r"(\.p\d+)?")
CP_ASYNC = re.compile(r"llvm\.nvvm\.cp\.async\.(?:ca|cg)\.shared\.global\.(4|8|16)(\.s)?")


def generic(pointer, value, lines):
    """`value` of type `pointer` as a generic ptr (appending the cast)."""
    if pointer.strip() == "ptr":
        return value
    lines.append("  %s.g = addrspacecast %s %s to ptr" % (value, pointer, value))
    return value + ".g"


def ldmatrix_wrapper(name, matrices, transposed, ret, params):
    lines = ["define internal %s @%s(%s %%p) #90 {" % (ret, name, params),
             "  %out = alloca [4 x i32]"]
    row = generic(params, "%p", lines)
    lines.append("  call void @emu_ldmatrix(i32 %d, i32 %d, ptr %s, ptr %%out)"
                 % (matrices, 1 if transposed else 0, row))
    values = []
    for i in range(matrices):
        lines.append("  %%rp%d = getelementptr i32, ptr %%out, i64 %d" % (i, i))
        lines.append("  %%r%d = load i32, ptr %%rp%d" % (i, i))
        values.append("%%r%d" % i)
    if matrices == 1:
        return lines + ["  ret i32 %r0", "}"]
    value = "undef"
    for i, v in enumerate(values):
        lines.append("  %%s%d = insertvalue %s %s, i32 %s, %d" % (i, ret, value, v, i))
        value = "%%s%d" % i
    return lines + ["  ret %s %s" % (ret, value), "}"]


def cp_async_wrapper(name, size, with_src_size, params):
    types = [p.strip() for p in params.split(",")]
    args = ["%s %%a%d" % (t, i) for i, t in enumerate(types)]
    lines = ["define internal void @%s(%s) #90 {" % (name, ", ".join(args))]
    dst = generic(types[0], "%a0", lines)
    src = generic(types[1], "%a1", lines)
    src_bytes = "%a2" if with_src_size else str(size)
    lines.append("  call void @emu_cp_async(ptr %s, ptr %s, i32 %d, i32 %s)"
                 % (dst, src, size, src_bytes))
    return lines + ["  ret void", "}"]


def cp_async_sync_wrapper(name, kind):
    if kind == "commit":
        return ["define internal void @%s() #90 {" % name,
                "  call void @emu_cp_async_commit()", "  ret void", "}"]
    if kind == "wait":
        return ["define internal void @%s(i32 %%n) #90 {" % name,
                "  call void @emu_cp_async_wait(i32 %n)", "  ret void", "}"]
    return ["define internal void @%s() #90 {" % name,  # wait_all: commit, then wait 0
            "  call void @emu_cp_async_commit()", "  call void @emu_cp_async_wait(i32 0)",
            "  ret void", "}"]


def nvvm_declarations(ll):
    """{intrinsic: its parameter list} of the NVVM intrinsics `ll` declares
    (the list may hold parentheses: ptr addrspace(3))."""
    found = {}
    for m in re.finditer(r"^declare [^@]*@(llvm\.nvvm\.[\w.]+)\(", ll, re.M):
        depth, i = 1, m.end()
        while depth:
            depth += (ll[i] == "(") - (ll[i] == ")")
            i += 1
        # Only the types: parameter attributes (nocapture, readonly, ...) go.
        types = [re.match(r"\s*(ptr(?: addrspace\(\d+\))?|[\w.]+)", p).group(1)
                 for p in split_params(ll[m.end():i - 1])]
        found[m.group(1)] = ", ".join(types)
    return found


def split_params(text):
    """A parameter list split at its top-level commas."""
    parts, depth, current = [], 0, ""
    for ch in text:
        depth += (ch in "({<[") - (ch in ")}>]")
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    return parts + [current] if current.strip() else parts


def rewrite(name, ll):
    """The module's LLVM IR with every NVVM intrinsic mapped for the host."""
    ll = re.sub(r"^(target (datalayout|triple)|!nvvm\.annotations).*$", "", ll, flags=re.M)
    ll = re.sub(r"@llvm\.nvvm\.read\.ptx\.sreg\.(tid|ctaid|ntid|nctaid)\.([xyz])\b",
                r"@emu_\1_\2", ll)
    ll = re.sub(r"@llvm\.nvvm\.read\.ptx\.sreg\.(laneid|warpsize)\b", r"@emu_\1", ll)
    ll = re.sub(r"@llvm\.nvvm\.barrier0\b", "@emu_barrier", ll)
    wrappers = []
    declarations = nvvm_declarations(ll)
    for intrinsic, params in sorted(declarations.items()):
        wrapped = "emu." + intrinsic[len("llvm."):]
        m = re.fullmatch(r"llvm\.nvvm\.shfl\.sync\.(up|down|bfly|idx)\.(f32|i32)(p?)", intrinsic)
        if m:
            wrappers += shuffle_wrapper(wrapped, m.group(1), m.group(2), m.group(3) == "p")
        elif re.fullmatch(r"llvm\.nvvm\.mma\.m16n8k16\.row\.col\.bf16", intrinsic):
            wrappers += mma_wrapper(wrapped, "%s (%s)" % (declared_return(ll, intrinsic), params))
        elif LDMATRIX.fullmatch(intrinsic):
            m = LDMATRIX.fullmatch(intrinsic)
            wrappers += ldmatrix_wrapper(wrapped, int(m.group(1)), bool(m.group(2)),
                                         declared_return(ll, intrinsic), params.strip())
        elif CP_ASYNC.fullmatch(intrinsic):
            m = CP_ASYNC.fullmatch(intrinsic)
            wrappers += cp_async_wrapper(wrapped, int(m.group(1)), bool(m.group(2)), params)
        elif intrinsic == "llvm.nvvm.cp.async.commit.group":
            wrappers += cp_async_sync_wrapper(wrapped, "commit")
        elif intrinsic == "llvm.nvvm.cp.async.wait.group":
            wrappers += cp_async_sync_wrapper(wrapped, "wait")
        elif intrinsic == "llvm.nvvm.cp.async.wait.all":
            wrappers += cp_async_sync_wrapper(wrapped, "all")
        elif intrinsic == "llvm.nvvm.membar.gl":  # __threadfence: the host's fence
            wrappers += ["define internal void @%s() #90 {" % wrapped, "  fence seq_cst",
                         "  ret void", "}"]
        else:
            fail("kernel %s uses the NVVM intrinsic @%s, which the emulator does not implement"
                 % (name, intrinsic))
        ll = re.sub(r"^declare [^@]*@" + re.escape(intrinsic) + r"\(.*$", "", ll, flags=re.M)
        ll = re.sub(r"@" + re.escape(intrinsic) + r"\b", "@" + wrapped, ll)
    if wrappers:
        wrappers += ["declare i32 @emu_shfl(i32, i32, i32, i32, i32, ptr) #91",
                     "declare void @emu_mma_m16n8k16_bf16(ptr, ptr, ptr, ptr) #91",
                     "declare void @emu_ldmatrix(i32, i32, ptr, ptr) #91",
                     "declare void @emu_cp_async(ptr, ptr, i32, i32) #91",
                     "declare void @emu_cp_async_commit() #91",
                     "declare void @emu_cp_async_wait(i32) #91",
                     "attributes #90 = { convergent nounwind }",
                     "attributes #91 = { convergent nounwind }"]
    left = re.search(r"@llvm\.nvvm\.[\w.]+", ll)
    if left:
        fail("kernel %s uses the NVVM intrinsic %s, which the emulator does not implement"
             % (name, left.group(0)))
    return ll + "\n" + "\n".join(wrappers) + "\n"


# A load or store through an SSA pointer, with its alignment.
ACCESS = re.compile(r"^(\s+)(.*\b(?:load|store)\b.*, )(ptr(?: addrspace\(\d+\))?) "
                    r"(%[-\w.]+), align (\d+)(.*)$")
MISALIGNED = 16  # an unmapped address: the emulator's fault handler names it


def check_alignment(ll):
    """A GPU faults on a misaligned access (a bf16 pair read as i32 from an
    odd element, say); x86 does not. Before every access of alignment >= 2,
    a misaligned pointer is replaced by the unmapped address 16, so the
    emulator reports it (branch-free: ptrtoint, and, icmp, select)."""
    out = []
    count = 0
    for line in ll.split("\n"):
        m = ACCESS.match(line)
        if not m or int(m.group(5)) < 2:
            out.append(line)
            continue
        indent, head, ptr_type, pointer, align, tail = m.groups()
        count += 1
        k = "%%emu.align.%d" % count
        out += ["%s%s.a = ptrtoint %s %s to i64" % (indent, k, ptr_type, pointer),
                "%s%s.m = and i64 %s.a, %d" % (indent, k, k, int(align) - 1),
                "%s%s.ok = icmp eq i64 %s.m, 0" % (indent, k, k),
                "%s%s.p = select i1 %s.ok, %s %s, %s inttoptr (i64 %d to %s)" % (
                    indent, k, k, ptr_type, pointer, ptr_type, MISALIGNED, ptr_type),
                "%s%s%s %s.p, align %s%s" % (indent, head, ptr_type, k, align, tail)]
    return "\n".join(out)


def shared_bytes(ll):
    """Bytes of the module's static shared memory (addrspace(3) globals)."""
    total = 0
    sizes = {"float": 4, "i32": 4, "i64": 8, "double": 8, "i8": 1, "i16": 2, "bfloat": 2,
             "half": 2}
    for m in re.finditer(r"addrspace\(3\) global \[(\d+) x (float|i32|i64|double|i8|i16|bfloat|half)\]", ll):
        total += int(m.group(1)) * sizes[m.group(2)]
    for m in re.finditer(r"addrspace\(3\) global (float|i32|i64|double) ", ll):
        total += {"float": 4, "i32": 4, "i64": 8, "double": 8}[m.group(1)]
    if re.search(r"addrspace\(3\) global (?!\[\d+ x (float|i32|i64|double|i8|i16|bfloat|half)\]|"
                 r"(float|i32|i64|double) )", ll):
        fail("a shared-memory global of a type host_kernels.py cannot size: %s" %
             re.search(r".*addrspace\(3\) global.*", ll).group(0))
    return total


# The most dynamic shared memory a package's kernel may be launched with
# (stringrt::kMaxDynamicSharedBytes, 99 KiB).
DYNAMIC_SHARED_BYTES = 99 * 1024
DYNAMIC_SHARED = re.compile(r"^@pe_dynamic_shared = external addrspace\(3\) global \[0 x i8\]"
                            r"(, align \d+)?$", re.M)


def define_dynamic_shared(ll):
    """The module with its extern shared array (if any) defined, and that
    array's bytes (0 without one)."""
    m = DYNAMIC_SHARED.search(ll)
    if not m:
        if re.search(r"addrspace\(3\) global \[0 x", ll):
            fail("an extern shared array other than @pe_dynamic_shared: %s" %
                 re.search(r".*addrspace\(3\) global \[0 x.*", ll).group(0))
        return ll, 0
    line = "@pe_dynamic_shared = internal addrspace(3) global [%d x i8] undef%s" % (
        DYNAMIC_SHARED_BYTES, m.group(1) or "")
    return ll[:m.start()] + line + ll[m.end():], DYNAMIC_SHARED_BYTES


SHARED_GLOBAL = (r"^@([\w.$]+) = (?:internal |private )?addrspace\(3\) global "
                 r"(\[\d+ x \w+\]|float|i32|i64|double) ")


def shared_regions(name, ll):
    """NAME_shared_regions: the address and size of each shared-memory
    global, which the emulator fills with a poison pattern (0xFF bytes, NaN
    as f32) before each block, as uninitialised shared memory is garbage on
    hardware."""
    entries = []
    for m in re.finditer(SHARED_GLOBAL, ll, re.M):
        size = shared_bytes("addrspace(3) global %s " % m.group(2))
        entries.append("{ ptr, i64 } { ptr addrspacecast (ptr addrspace(3) @%s to ptr), i64 %d }"
                       % (m.group(1), size))
    if not entries:
        return "", 0
    return ("@%s_shared_regions = constant [%d x { ptr, i64 }] [%s]\n" %
            (name, len(entries), ", ".join(entries)), len(entries))


def packed_entry(name, ll, digest, dynamic):
    m = re.search(r"^define void @" + re.escape(name) + r"\((.*?)\)", ll, re.M)
    if not m:
        fail("no function @%s in its gpu.module" % name)
    types = [p.strip().split()[0] for p in m.group(1).split(",") if p.strip()]
    for t in types:
        if t not in ("ptr", "i64", "i32", "float"):
            fail("kernel %s has a parameter of type %s (the emulator passes ptr, i64, i32, "
                 "float)" % (name, t))
    lines = ["define void @%s_packed(ptr %%args) {" % name]
    for index, t in enumerate(types):
        lines.append("  %%p%d = getelementptr i64, ptr %%args, i64 %d" % (index, index))
        lines.append("  %%a%d = load %s, ptr %%p%d" % (index, t, index))
    lines.append("  call void @%s(%s)" % (
        name, ", ".join("%s %%a%d" % (t, i) for i, t in enumerate(types))))
    lines += ["  ret void", "}"]
    regions, count = shared_regions(name, ll)
    # waits=0: no thread of the kernel ever waits for another (no bar.sync,
    # no warp collective), so the emulator runs them one after another.
    waits = re.search(r"\bcall [^@\n]*@emu_(barrier|shfl|mma_m16n8k16_bf16|ldmatrix)\(",
                      ll) is not None
    record = "params=%s;shared=%d;%sregions=%d;waits=%d;hash=%s" % (
        ",".join("f32" if t == "float" else t for t in types), shared_bytes(ll) - dynamic,
        "dynamic=%d;" % dynamic if dynamic else "", count, 1 if waits else 0, digest)
    lines.append('@%s_signature = constant [%d x i8] c"%s\\00"' % (name, len(record) + 1, record))
    return "\n".join(lines) + "\n" + regions


def main():
    if len(sys.argv) < 7:
        fail("usage: host_kernels.py OUT_LIBRARY WORK_DIR MLIR_TRANSLATE LLC CXX NVVM...")
    library, work, translate, llc, cxx = sys.argv[1:6]
    inputs = sys.argv[6:]
    os.makedirs(work, exist_ok=True)
    seen = {}  # name -> (normalised body, input)
    objects = []
    for path in inputs:
        for name, body in gpu_modules(path):
            code = normalise(body)
            if name in seen:
                if seen[name][0] != code:
                    fail("kernel %s differs between %s and %s: a kernel name must identify its "
                         "code" % (name, seen[name][1], path))
                continue
            seen[name] = (code, path)
            digest = hashlib.sha256(code.encode()).hexdigest()[:16]
            mlir = os.path.join(work, name + ".mlir")
            with open(mlir, "w") as f:
                f.write("module {\n" + body + "\n}\n")
            result = subprocess.run([translate, "--mlir-to-llvmir", mlir], capture_output=True,
                                    text=True)
            if result.returncode != 0:
                fail("mlir-translate failed on kernel %s:\n%s" % (name, result.stderr))
            ll, dynamic = define_dynamic_shared(result.stdout)
            ll = check_alignment(rewrite(name, ll))
            ll += packed_entry(name, ll, digest, dynamic)
            path_ll = os.path.join(work, name + ".ll")
            with open(path_ll, "w") as f:
                f.write(ll)
            obj = path_ll[:-3] + ".o"
            subprocess.run([llc, "-O2", "-relocation-model=pic", "-filetype=obj", path_ll, "-o",
                            obj], check=True)
            objects.append(obj)
    # The library's index: the emulator reads the kernels' names from it.
    names = ",".join(seen)
    index = os.path.join(work, "index.ll")
    with open(index, "w") as f:
        f.write('@stringrt_emulated_kernel_names = constant [%d x i8] c"%s\\00"\n' %
                (len(names) + 1, names))
    index_obj = os.path.join(work, "index.o")
    subprocess.run([llc, "-O2", "-relocation-model=pic", "-filetype=obj", index, "-o",
                    index_obj], check=True)
    objects.append(index_obj)
    support = os.path.join(work, "support.o")
    subprocess.run([llc, "-O2", "-relocation-model=pic", "-filetype=obj",
                    os.path.join(HERE, "support.ll"), "-o", support], check=True)
    subprocess.run([cxx, "-shared", "-o", library] + objects + [support, "-lm"], check=True)
    print("host_kernels.py: %d kernels from %d inputs -> %s" % (len(objects), len(inputs),
                                                                 library))


if __name__ == "__main__":
    main()
