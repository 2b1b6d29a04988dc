// Which compiled kernels an op may name (target "cpu", docs/package.md):
// the kernels stringc generates for each op kind, their symbols' kind and the
// range of their parallel loop, by the compiled-kernel ABI's rules
// (stringrt/abi/CompiledKernels.h, which the code generator follows too).
// A generated kernel cannot check its arguments, so the runtime refuses a
// manifest whose kernel entries are not exactly these (a kernel of another
// op swapped in, a range enlarged past the op's rows) before any code of the
// library runs. Private to the runtime.
#pragma once

#include "stringrt/Manifest.h"

#include <cstdint>
#include <string>
#include <vector>

namespace stringrt::detail {

// Checks `op`'s kernel entries against the rules for its kind and shapes
// (the value table of `program`): as many kernels as the op runs, each
// symbol "stringc_k<N>_<digest>_<kind>" of the kind its position needs and
// of the digest of the op's buffer sizes (kernelSizeDigest), each range the
// one its shapes give. `where` names the op in messages
// ("manifest.programs.forward.ops[7] (pe.relu)"). Throws Error(where...).
void checkOpKernels(const ProgramOp &op, const Program &program, const std::string &where);

// Checks that every symbol named by several ops (stringc shares a kernel
// between identical ops) is named only by ops of one kind with the same
// attributes and buffers of the same sizes, so that a kernel never runs on
// buffers it was not built for. Throws Error(path, ...).
void checkSharedKernels(const Manifest &manifest, const std::string &path);

// Every symbol the manifest's ops name, each once, in order of first use.
std::vector<std::string> manifestKernelSymbols(const Manifest &manifest);

} // namespace stringrt::detail
