//===- CodegenTestUtil.h - helpers of the CPU code generator's tests ------===//
//
// Compiling a pe module (text) or an example to a "cpu" package, random
// inputs for a manifest, and running one program of a package on two kernel
// sets to compare them.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "stringc/CpuGen/CpuCodegen.h"
#include "stringc/Dialect/PE/PEDialect.h"
#include "stringc/Package/PackageBuilder.h"

#include "stringrt/Model.h"
#include "stringrt/Package.h"
#include "stringrt/cpu/ThreadPool.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include "../ScratchDir.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace stringc::codegen::test {

using stringc::test::ScratchDir;

/// Parses `text` (a pe module with @forward and @gradients), compiles its
/// kernels and writes a "cpu" package to `path`. Returns the diagnostics;
/// empty on success.
inline std::string writeCpuPackage(const std::string &text, const std::string &path) {
  mlir::MLIRContext context;
  context.loadDialect<mlir::pe::PEDialect, mlir::func::FuncDialect, mlir::arith::ArithDialect>();
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &d) {
    diagnostics += d.str() + "\n";
    return mlir::success();
  });
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::parseSourceString<mlir::ModuleOp>(text, &context);
  if (!module)
    return diagnostics.empty() ? "parse error" : diagnostics;
  mlir::FailureOr<PackageKernels> kernels = compileCpuKernels(*module);
  if (failed(kernels) || failed(writeModulePackage(*module, path, kCpuTarget, &*kernels)))
    return diagnostics.empty() ? "failed without a diagnostic" : diagnostics;
  return "";
}

/// Inputs for every manifest input, batch `batch`: f32 normal(0, scale),
/// i32 uniform in [0, intBound).
struct Batch {
  std::map<std::string, std::vector<float>> f32;
  std::map<std::string, std::vector<int32_t>> i32;
  std::map<std::string, stringrt::HostTensor> views;
};

inline Batch randomBatch(const stringrt::Manifest &manifest, int64_t batch, uint32_t seed,
                         float scale = 1.0f, int32_t intBound = 10) {
  Batch b;
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::uniform_int_distribution<int32_t> ints(0, intBound - 1);
  for (const stringrt::ManifestInput &in : manifest.inputs) {
    std::vector<int64_t> shape = in.shape;
    int64_t n = 1;
    for (int64_t &d : shape) {
      if (d == stringrt::kBatchDim)
        d = batch;
      n *= d;
    }
    if (in.dtype == stringrt::DType::I32) {
      auto &v = b.i32[in.name];
      for (int64_t i = 0; i < n; ++i)
        v.push_back(ints(rng));
      b.views[in.name] = stringrt::HostTensor(v.data(), shape);
    } else {
      auto &v = b.f32[in.name];
      for (int64_t i = 0; i < n; ++i)
        v.push_back(normal(rng));
      b.views[in.name] = stringrt::HostTensor(v.data(), shape);
    }
  }
  return b;
}

/// max |a - b| / max(max |b|, floor): the error of `got` against `want`
/// relative to the tensor's scale.
inline double relativeError(const std::vector<float> &got, const std::vector<float> &want,
                            double floor = 1e-30) {
  double scale = floor, err = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, std::fabs(double(want[i])));
    double d = std::fabs(double(got[i]) - double(want[i]));
    if (std::isnan(d))
      return INFINITY;
    err = std::max(err, d);
  }
  return err / scale;
}

/// Every output of `got` (compiled kernels) against `want` (reference): the
/// same names and shapes, then bit for bit where `exact(name)`, else within
/// `bound` of relativeError.
inline void expectOutputsMatch(const std::map<std::string, stringrt::ref::Tensor<float>> &got,
                               const std::map<std::string, stringrt::ref::Tensor<float>> &want,
                               const std::function<bool(const std::string &)> &exact,
                               double bound) {
  ASSERT_EQ(got.size(), want.size());
  for (const auto &[name, tensor] : want) {
    SCOPED_TRACE(name);
    const auto &mine = got.at(name);
    ASSERT_EQ(mine.shape, tensor.shape);
    if (exact(name))
      EXPECT_EQ(mine.values, tensor.values);
    else
      EXPECT_LT(relativeError(mine.values, tensor.values), bound);
  }
}

/// The forward program on the compiled kernels gives the same bits on one
/// thread and on three (no kernel splits a sum by the thread count).
inline void expectThreadCountIndependent(const stringrt::Package &package, const Batch &in) {
  stringrt::Model model(package, stringrt::KernelSet::Compiled);
  model.initParameters();
  stringrt::cpu::setNumThreads(1);
  auto one = model.run("forward", in.views);
  stringrt::cpu::setNumThreads(3);
  auto three = model.run("forward", in.views);
  for (const auto &[name, tensor] : one)
    EXPECT_EQ(three.at(name).values, tensor.values) << name;
}

} // namespace stringc::codegen::test
