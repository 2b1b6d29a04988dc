//===- AutodiffTest.cpp - pe-autodiff on every example --------------------===//
//
// Each examples/*.pe goes through the frontend and MLIRGen; the pass then
// adds @gradients, which must verify and return the loss followed by one
// gradient per trainable parameter, of the parameter's type, in order.
// (The gradients' values are checked against PyTorch autograd by
// tests/oracle/test_autodiff.py.)
//
//===----------------------------------------------------------------------===//

#include "stringc/Dialect/PE/PEOps.h"
#include "stringc/Frontend/Frontend.h"
#include "stringc/Driver/Driver.h"
#include "stringc/Transforms/Passes.h"

#include "TestHelpers.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

using namespace mlir;

namespace {

using stringc::test::compileExample;
using stringc::test::exampleFiles;

/// The pe module of an example as MLIRGen prints it (the forward stage).
std::string forwardModuleText(const std::string &file) {
  std::optional<stringc::ModelGraph> graph = compileExample(file);
  if (!graph)
    return "";
  std::ostringstream out, err;
  EXPECT_EQ(stringc::printModelAsMLIR(*graph, out, err), 0) << err.str();
  return out.str();
}

class AutodiffExample : public ::testing::TestWithParam<std::string> {
protected:
  AutodiffExample() {
    context.loadDialect<pe::PEDialect, func::FuncDialect, arith::ArithDialect>();
  }
  MLIRContext context;
};

TEST_P(AutodiffExample, GradientsMatchTrainableParameters) {
  std::string text = forwardModuleText(GetParam());
  ASSERT_FALSE(text.empty());
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &context);
  ASSERT_TRUE(module);
  auto forward = module->lookupSymbol<func::FuncOp>("forward");
  ASSERT_TRUE(forward);
  FunctionType forwardType = forward.getFunctionType();

  // Every parameter of an example affects its loss: no warning, no error.
  std::vector<std::string> diagnostics;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    diagnostics.push_back(diag.str());
    return success();
  });
  PassManager pm(&context);
  pm.addPass(stringc::createAutodiff());
  ASSERT_TRUE(succeeded(pm.run(*module)));
  EXPECT_TRUE(diagnostics.empty()) << diagnostics.front();
  ASSERT_TRUE(succeeded(verify(*module)));

  EXPECT_EQ(forward.getFunctionType(), forwardType) << "@forward must be left untouched";
  auto gradients = module->lookupSymbol<func::FuncOp>("gradients");
  ASSERT_TRUE(gradients);
  EXPECT_EQ(gradients.getArgumentTypes(), forwardType.getInputs());

  // Frozen parameters get no result.
  std::vector<pe::ParameterOp> trainable;
  for (auto param : module->getOps<pe::ParameterOp>())
    if (!param.getFrozen())
      trainable.push_back(param);
  ASSERT_FALSE(trainable.empty());
  ASSERT_EQ(gradients.getNumResults(), 1 + trainable.size());
  EXPECT_EQ(gradients.getResultTypes()[0], RankedTensorType::get({}, Float32Type::get(&context)));
  auto loss = gradients.getResultAttrOfType<StringAttr>(0, "pe.output");
  ASSERT_TRUE(loss);
  EXPECT_EQ(loss.getValue(), "loss");
  for (auto [i, param] : llvm::enumerate(trainable)) {
    unsigned result = i + 1;
    EXPECT_EQ(gradients.getResultTypes()[result], param.getTensorType())
        << param.getSymName().str();
    auto name = gradients.getResultAttrOfType<StringAttr>(result, "pe.grad");
    ASSERT_TRUE(name) << "result #" << result << " has no pe.grad";
    EXPECT_EQ(name.getValue(), param.getSymName());
    // A real gradient, not the zero constant of a parameter without effect.
    Value grad = gradients.getBody().front().getTerminator()->getOperand(result);
    EXPECT_FALSE(grad.getDefiningOp<arith::ConstantOp>()) << param.getSymName().str();
  }
}

TEST_P(AutodiffExample, RunningTwiceIsAnError) {
  std::string text = forwardModuleText(GetParam());
  ASSERT_FALSE(text.empty());
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &context);
  ASSERT_TRUE(module);
  std::vector<std::string> errors;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Error)
      errors.push_back(diag.str());
    return success();
  });
  PassManager pm(&context);
  pm.addPass(stringc::createAutodiff());
  pm.addPass(stringc::createAutodiff());
  EXPECT_TRUE(failed(pm.run(*module)));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors.front().find("already has @gradients"), std::string::npos) << errors.front();
}

TEST_P(AutodiffExample, DriverStagePrintsGradients) {
  std::string path = std::string(STRINGC_EXAMPLES_DIR) + "/" + GetParam();
  std::string readError;
  std::optional<stringc::SourceManager> sources = stringc::SourceManager::fromFile(path, readError);
  ASSERT_TRUE(sources) << readError;
  stringc::DiagnosticEngine diags(*sources);
  std::optional<stringc::ModelGraph> graph =
      stringc::compileModel(*sources, diags, stringc::modelBaseDir(path));
  ASSERT_TRUE(graph);
  std::ostringstream out, err;
  ASSERT_EQ(stringc::printModelAsMLIR(*graph, out, err, stringc::EmitStage::Train), 0) << err.str();
  EXPECT_EQ(err.str(), "");
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(out.str(), &context);
  ASSERT_TRUE(module);
  EXPECT_TRUE(module->lookupSymbol<func::FuncOp>("forward"));
  EXPECT_TRUE(module->lookupSymbol<func::FuncOp>("gradients"));
}

INSTANTIATE_TEST_SUITE_P(Examples, AutodiffExample, ::testing::ValuesIn(exampleFiles()),
                         [](const ::testing::TestParamInfo<std::string> &info) {
                           std::string name = info.param.substr(0, info.param.size() - 3);
                           std::replace(name.begin(), name.end(), '.', '_');
                           return name;
                         });

TEST(AutodiffExamples, EveryExampleIsCovered) {
  // The seeds give eight models plus the causal GPT baseline.
  EXPECT_GE(exampleFiles().size(), 9u);
}

} // namespace
