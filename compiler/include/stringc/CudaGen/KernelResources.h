//===- KernelResources.h - registers and shared memory from ptxas -v -*- C++ -*-===//
//
// What the launch report's occupancy needs of each kernel (docs/cuda.md,
// "Launch report"): the registers a thread uses and the block's static
// shared memory, as `ptxas -v -arch=<arch>` reports them for the kernel's
// PTX (the same PTX and ptxas the package's cubins come from).
//
//===----------------------------------------------------------------------===//
#ifndef STRINGC_CUDAGEN_KERNELRESOURCES_H
#define STRINGC_CUDAGEN_KERNELRESOURCES_H

#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace stringc::cudagen {

struct KernelResources {
  int registers = 0;
  int64_t sharedBytes = 0; // shared memory of a block (ptxas: static; the report adds dynamic)
  int64_t spillBytes = 0;  // spill stores (local memory)
};

/// Kernel name -> its resources.
using KernelResourceTable = std::map<std::string, KernelResources>;

/// The resources of `kernel` in ptxas -v's output `log` ("Used N registers,
/// ... M bytes smem", "S bytes spill stores"); nullopt when the log has no
/// "Used ... registers" line for it.
std::optional<KernelResources> parsePtxasInfo(llvm::StringRef log, llvm::StringRef kernel);

/// Runs ptxas -v on every kernel's PTX (`ptx`: kernel name -> its module's
/// PTX) for `arch` and fills `table`. Fails with a message when ptxas is
/// missing, fails, or reports no resources for a kernel.
mlir::LogicalResult measureKernelResources(const std::map<std::string, std::string> &ptx,
                                           const std::string &arch, KernelResourceTable &table,
                                           std::string &message);

} // namespace stringc::cudagen

#endif // STRINGC_CUDAGEN_KERNELRESOURCES_H
