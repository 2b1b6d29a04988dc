//===- CudaTargetMissing.cpp - a stringc built without the CUDA target ----===//
//
// Linked instead of compiler/lib/CudaGen where stringc is configured with
// -DSTRINGC_WITH_CUDA=OFF: scripts/main.sh builds so on a fresh build
// directory, since the CPU main job never uses the CUDA target, which is
// about a third of the compiler's build. --target=cuda then stops with the
// driver's error (Driver.cpp) before it compiles anything.
//
//===----------------------------------------------------------------------===//
#include "stringc/CudaGen/CudaTarget.h"

namespace stringc {

bool cudaTargetBuilt() { return false; }

void registerCudaTargetDialects(mlir::DialectRegistry &) {}

int compileForCuda(mlir::ModuleOp, const CudaOptions &, CudaEmit, std::ostream &,
                   const std::string &, std::ostream &err) {
  err << "stringc: error: this stringc has no CUDA target (-DSTRINGC_WITH_CUDA=OFF)\n";
  return 1;
}

} // namespace stringc
