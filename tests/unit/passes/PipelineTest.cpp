//===- PipelineTest.cpp - the pass pipeline and its switches --------------===//

#include "PassEquivalence.h"

#include "stringc/Transforms/Passes.h"
#include "stringc/Transforms/Pipeline.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

#include <gtest/gtest.h>

namespace stringc::test {
namespace {

mlir::LogicalResult build(const PipelineOptions &options, std::string &error) {
  registerPasses();
  mlir::MLIRContext context;
  mlir::PassManager pm(&context);
  return buildPipeline(pm, options, error);
}

TEST(PipelineTest, EveryDefaultPassIsRegisteredAndTakesExplain) {
  registerPasses();
  for (llvm::StringRef name : defaultPassNames("cpu")) {
    SCOPED_TRACE(name.str());
    EXPECT_NE(mlir::PassInfo::lookup(name), nullptr);
  }
  PipelineOptions options;
  options.target = "cpu";
  for (llvm::StringRef name : optInPassNames()) {
    SCOPED_TRACE(name.str());
    EXPECT_NE(mlir::PassInfo::lookup(name), nullptr);
    EXPECT_FALSE(llvm::is_contained(optimizationPassNames(), name));
    options.enabled.insert(name.str());
  }
  options.explain = true;
  std::string error;
  EXPECT_TRUE(mlir::succeeded(build(options, error))) << error;
}

TEST(PipelineTest, UnknownDisabledPassIsAnError) {
  PipelineOptions options;
  options.disabled.insert("pe-no-such-pass");
  std::string error;
  EXPECT_TRUE(mlir::failed(build(options, error)));
  EXPECT_NE(error.find("unknown pass 'pe-no-such-pass'"), std::string::npos) << error;
}

// The compiled targets' own passes are known names: they can be switched off,
// whatever the target (a no-op where they would not run).
TEST(PipelineTest, TargetPassesCanBeDisabled) {
  for (const char *target : {"cpu", "cuda", ""}) {
    PipelineOptions options;
    options.target = target;
    for (llvm::StringRef name : targetPassNames())
      options.disabled.insert(name.str());
    std::string error;
    EXPECT_TRUE(mlir::succeeded(build(options, error))) << error;
  }
}

TEST(PipelineTest, OnlyOptInPassesCanBeEnabled) {
  PipelineOptions options;
  options.enabled.insert("pe-hoist");
  std::string error;
  EXPECT_TRUE(mlir::failed(build(options, error)));
  EXPECT_NE(error.find("'pe-hoist' is not an opt-in pass"), std::string::npos) << error;
}

TEST(PipelineTest, AutodiffCannotBeDisabled) {
  PipelineOptions options;
  options.disabled.insert("pe-autodiff");
  std::string error;
  EXPECT_TRUE(mlir::failed(build(options, error)));
  EXPECT_NE(error.find("pe-autodiff cannot be disabled"), std::string::npos) << error;
}

TEST(PipelineTest, MalformedPipelineIsAnError) {
  PipelineOptions options;
  options.pipeline = "pe-no-such-pass";
  std::string error;
  EXPECT_TRUE(mlir::failed(build(options, error)));
  EXPECT_FALSE(error.empty());
}

// An empty --pass-pipeline is the unoptimised model: the same train IR as
// switching every default pass off one by one.
TEST(PipelineTest, EmptyPipelineEqualsEveryPassDisabled) {
  PassCase c;
  c.example = "vit_rope.pe";
  CompileOptions none;
  none.passPipeline = std::string();
  CompileOptions allDisabled;
  for (llvm::StringRef name : optimizationPassNames())
    allDisabled.disabledPasses.insert(name.str());
  std::string a = trainIR(c, none), b = trainIR(c, allDisabled);
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(a, b);
}

} // namespace
} // namespace stringc::test
