// Driver/CudaTargetMissing.cpp: what a stringc configured without the CUDA
// target (-DSTRINGC_WITH_CUDA=OFF) links in place of compiler/lib/CudaGen.
#include "stringc/CudaGen/CudaTarget.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

namespace {

TEST(CudaTargetMissing, SaysItIsNotBuilt) { EXPECT_FALSE(stringc::cudaTargetBuilt()); }

std::vector<std::string> dialectNames(const mlir::DialectRegistry &registry) {
  std::vector<std::string> names;
  for (llvm::StringRef name : registry.getDialectNames())
    names.push_back(name.str());
  return names;
}

TEST(CudaTargetMissing, AddsNoDialects) {
  mlir::DialectRegistry registry; // holds the builtin dialect from the start
  const std::vector<std::string> before = dialectNames(registry);
  stringc::registerCudaTargetDialects(registry);
  EXPECT_EQ(dialectNames(registry), before);
}

TEST(CudaTargetMissing, CompileFailsWithAClearError) {
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::ModuleOp::create(mlir::UnknownLoc::get(&context));
  std::ostringstream out, err;
  EXPECT_NE(stringc::compileForCuda(*module, stringc::CudaOptions{}, stringc::CudaEmit::Package,
                                    out, "never-written.pkg", err),
            0);
  EXPECT_TRUE(out.str().empty());
  EXPECT_NE(err.str().find("no CUDA target"), std::string::npos) << err.str();
  EXPECT_NE(err.str().find("STRINGC_WITH_CUDA=OFF"), std::string::npos) << err.str();
}

} // namespace
