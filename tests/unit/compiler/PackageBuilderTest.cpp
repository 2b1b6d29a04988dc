//===- PackageBuilderTest.cpp - stringc packages, read back by stringrt ----===//
//
// Every examples/*.pe is compiled to a package (MLIRGen, pe-autodiff, the
// package writer) and loaded with stringrt::Package::load, whose validation
// is strict: this proves the writer and the loader agree on the format
// (docs/package.md), and the runtime's writer gives the same bytes back. Hand-written modules check escaping, exact numbers and
// the writer's errors.
//
//===----------------------------------------------------------------------===//

#include "stringc/Dialect/PE/PEOps.h"
#include "stringc/Frontend/Frontend.h"
#include "stringc/Driver/Driver.h"
#include "stringc/Package/PackageBuilder.h"
#include "stringc/Transforms/Passes.h"

#include "../ScratchDir.h"
#include "TestHelpers.h"

#include "stringrt/Error.h"
#include "stringrt/Package.h"
#include "stringrt/Safetensors.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

using namespace mlir;

namespace {

using stringc::test::compileExample;
using stringc::test::exampleFiles;

using stringc::test::ScratchDir;

std::string fileBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

size_t opCount(func::FuncOp func) {
  return std::distance(func.getBody().front().without_terminator().begin(),
                       func.getBody().front().without_terminator().end());
}

size_t valueCount(func::FuncOp func) {
  size_t count = func.getNumArguments();
  for (Operation &op : func.getBody().front().without_terminator())
    count += op.getNumResults();
  return count;
}

class PackageExample : public ::testing::TestWithParam<std::string> {
protected:
  PackageExample() {
    context.loadDialect<pe::PEDialect, func::FuncDialect, arith::ArithDialect>();
  }
  MLIRContext context;
  ScratchDir dir;
};

TEST_P(PackageExample, WriterAndLoaderAgree) {
  std::optional<stringc::ModelGraph> graph = compileExample(GetParam());
  ASSERT_TRUE(graph);

  // The module the package is made from, for the expected counts.
  std::ostringstream text, err;
  ASSERT_EQ(stringc::printModelAsMLIR(*graph, text, err, stringc::EmitStage::Train), 0)
      << err.str();
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text.str(), &context);
  ASSERT_TRUE(module);
  auto forward = module->lookupSymbol<func::FuncOp>("forward");
  auto gradients = module->lookupSymbol<func::FuncOp>("gradients");
  ASSERT_TRUE(forward && gradients);

  std::string path = dir.file("model.pkg");
  std::ostringstream writeErr;
  ASSERT_EQ(stringc::writeModelPackage(*graph, path, stringc::kReferenceTarget, writeErr), 0)
      << writeErr.str();

  stringrt::Package package = [&] {
    try {
      return stringrt::Package::load(path);
    } catch (const stringrt::Error &error) {
      ADD_FAILURE() << error.what();
      throw;
    }
  }();
  const stringrt::Manifest &m = package.manifest();
  EXPECT_EQ(package.target(), "cpu-reference");
  EXPECT_EQ(m.model, module->getSymName()->str());

  ASSERT_EQ(m.inputs.size(), forward.getNumArguments());
  for (unsigned i = 0; i < forward.getNumArguments(); ++i)
    EXPECT_EQ(m.inputs[i].name,
              forward.getArgAttrOfType<StringAttr>(i, "pe.input").getValue().str());

  std::vector<pe::ParameterOp> params(module->getOps<pe::ParameterOp>().begin(),
                                      module->getOps<pe::ParameterOp>().end());
  ASSERT_EQ(m.params.size(), params.size());
  size_t trainable = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(m.params[i].name, params[i].getSymName().str());
    EXPECT_EQ(m.params[i].frozen, params[i].getFrozen());
    EXPECT_EQ(m.params[i].shape, std::vector<int64_t>(params[i].getTensorType().getShape().begin(),
                                                      params[i].getTensorType().getShape().end()));
    EXPECT_EQ(m.params[i].init == stringrt::ParamInit::Normal, params[i].getInit() == "normal");
    trainable += !params[i].getFrozen();
  }

  EXPECT_EQ(m.forward.values.size(), valueCount(forward));
  EXPECT_EQ(m.forward.ops.size(), opCount(forward));
  EXPECT_EQ(m.forward.outputs.size(), forward.getNumResults());
  EXPECT_EQ(m.gradients.values.size(), valueCount(gradients));
  EXPECT_EQ(m.gradients.ops.size(), opCount(gradients));
  ASSERT_EQ(m.gradients.outputs.size(), 1 + trainable);
  EXPECT_EQ(m.gradients.outputs[0].name, "loss");
  // The op names in order.
  size_t i = 0;
  for (Operation &op : gradients.getBody().front().without_terminator())
    EXPECT_EQ(m.gradients.ops[i++].op, op.getName().getStringRef().str());
  EXPECT_EQ(m.dataset.has_value(), !module->getOps<pe::DatasetOp>().empty());

  // One format, one writer beside its reader: the runtime writes what it
  // read back as the compiler's manifest text, and the whole file again.
  stringrt::SafetensorsFile file = stringrt::SafetensorsFile::open(path);
  EXPECT_EQ(stringrt::writeManifestJson(m), file.metadata().at("manifest"));
  stringrt::PackageContents contents;
  contents.manifest = m;
  std::string again = dir.file("again.pkg");
  stringrt::writePackage(again, contents);
  EXPECT_EQ(fileBytes(again), fileBytes(path));
}

INSTANTIATE_TEST_SUITE_P(Examples, PackageExample, ::testing::ValuesIn(exampleFiles()),
                         [](const ::testing::TestParamInfo<std::string> &info) {
                           std::string name = info.param.substr(0, info.param.size() - 3);
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

//===----------------------------------------------------------------------===//
// Hand-written modules.
//===----------------------------------------------------------------------===//

class PackageBuilder : public ::testing::Test {
protected:
  PackageBuilder() {
    context.loadDialect<pe::PEDialect, func::FuncDialect, arith::ArithDialect>();
    context.printOpOnDiagnostic(false);
  }

  OwningOpRef<ModuleOp> parse(const std::string &text, bool autodiff) {
    OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &context);
    EXPECT_TRUE(module);
    if (module && autodiff) {
      PassManager pm(&context);
      pm.addPass(stringc::createAutodiff());
      EXPECT_TRUE(succeeded(pm.run(*module)));
    }
    return module;
  }

  /// The writer's errors on `module`.
  std::vector<std::string> writeErrors(ModuleOp module, const std::string &path) {
    std::vector<std::string> errors;
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
      if (diag.getSeverity() == DiagnosticSeverity::Error)
        errors.push_back(diag.str());
      return success();
    });
    EXPECT_TRUE(failed(stringc::writeModulePackage(module, path)));
    return errors;
  }

  MLIRContext context;
  ScratchDir dir;
};

const char *kTiny = R"mlir(
module @tiny {
  pe.parameter @w : tensor<4x3xf32> {init = "normal", mean = 1.0e-300 : f64, std = 0.1 : f64, seed = -1 : i64}
  pe.parameter @b : tensor<3xf32> frozen {init = "constant", value = 0.30000000000000004 : f64}
  pe.optimizer {kind = "sgd", lr = 0.1 : f64}
  pe.dataset {kind = "idx", path = "dir \"q\" \\ \0A\09\01 \C3\A9"}
  func.func @forward(%x: tensor<?x4xf32> {pe.input = "x"}) -> (tensor<f32> {pe.output = "loss"}) {
    %w = pe.get_param @w : tensor<4x3xf32>
    %b = pe.get_param @b : tensor<3xf32>
    %y = pe.linear %x, %w, %b : tensor<?x4xf32>, tensor<4x3xf32>, tensor<3xf32> -> tensor<?x3xf32>
    %l = pe.mean %y : tensor<?x3xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
)mlir";

TEST_F(PackageBuilder, EscapesStringsAndKeepsNumbersExact) {
  OwningOpRef<ModuleOp> module = parse(kTiny, /*autodiff=*/true);
  ASSERT_TRUE(module);
  std::string path = dir.file("tiny.pkg");
  ASSERT_TRUE(succeeded(stringc::writeModulePackage(*module, path)));
  stringrt::Package package = stringrt::Package::load(path);
  const stringrt::Manifest &m = package.manifest();
  ASSERT_TRUE(m.dataset);
  EXPECT_EQ(m.dataset->path, "dir \"q\" \\ \n\t\x01 \xC3\xA9");
  ASSERT_EQ(m.params.size(), 2u);
  EXPECT_EQ(m.params[0].mean, 1.0e-300);
  EXPECT_EQ(m.params[0].std, 0.1);
  EXPECT_EQ(m.params[0].seed, UINT64_MAX);
  EXPECT_EQ(m.params[1].value, 0.30000000000000004);
  EXPECT_EQ(m.optimizer.kind, stringrt::OptimizerKind::Sgd);
  EXPECT_EQ(m.optimizer.lr, 0.1);
  EXPECT_EQ(m.optimizer.beta2, 0.999); // a default, written explicitly
  ASSERT_EQ(m.gradients.outputs.size(), 2u);
  EXPECT_EQ(m.gradients.outputs[1].key(), "grad:w");
  // The autodiff seed: a splat constant, written as a float.
  auto seed = std::find_if(m.gradients.ops.begin(), m.gradients.ops.end(),
                           [](const stringrt::ProgramOp &op) { return op.op == "arith.constant"; });
  ASSERT_NE(seed, m.gradients.ops.end());
  EXPECT_EQ(seed->getFloat("value"), 1.0);
}

TEST_F(PackageBuilder, WritesDefaultValuedAttributes) {
  OwningOpRef<ModuleOp> module = parse(R"mlir(
module @defaults {
  pe.parameter @g : tensor<3xf32> {init = "ones"}
  pe.parameter @z : tensor<3xf32> {init = "zeros"}
  pe.optimizer {kind = "adamw"}
  func.func @forward(%x: tensor<?x3xf32> {pe.input = "x"}) -> (tensor<f32> {pe.output = "loss"}) {
    %g = pe.get_param @g : tensor<3xf32>
    %z = pe.get_param @z : tensor<3xf32>
    %n = pe.layer_norm %x, %g, %z : tensor<?x3xf32>, tensor<3xf32>, tensor<3xf32> -> tensor<?x3xf32>
    %a = pe.gelu %n : tensor<?x3xf32> -> tensor<?x3xf32>
    %l = pe.mean %a : tensor<?x3xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
)mlir",
                                       /*autodiff=*/true);
  ASSERT_TRUE(module);
  std::string path = dir.file("defaults.pkg");
  ASSERT_TRUE(succeeded(stringc::writeModulePackage(*module, path)));
  stringrt::Package package = stringrt::Package::load(path);
  // pe.optimizer's ODS defaults are the runtime's (stringrt::kOptimizerDefaults,
  // which the frontend uses): one set of optimizer defaults.
  const stringrt::ManifestOptimizer &opt = package.manifest().optimizer;
  const stringrt::ManifestOptimizer &want = stringrt::kOptimizerDefaults;
  EXPECT_EQ(opt.kind, want.kind);
  EXPECT_EQ(opt.lr, want.lr);
  EXPECT_EQ(opt.beta1, want.beta1);
  EXPECT_EQ(opt.beta2, want.beta2);
  EXPECT_EQ(opt.eps, want.eps);
  EXPECT_EQ(opt.weightDecay, want.weightDecay);
  EXPECT_EQ(opt.momentum, want.momentum);
  EXPECT_EQ(opt.clipNorm, want.clipNorm);
  EXPECT_EQ(opt.schedule, want.schedule);
  EXPECT_EQ(opt.warmupSteps, want.warmupSteps);
  EXPECT_EQ(opt.minLr, want.minLr);
  EXPECT_EQ(opt.emaDecay, want.emaDecay);
  const stringrt::Program &f = package.manifest().forward;
  ASSERT_EQ(f.ops.size(), 5u);
  EXPECT_EQ(f.ops[2].getFloat("epsilon"), 1e-5);
  EXPECT_FALSE(f.ops[3].getBool("approximate"));
  EXPECT_FALSE(f.ops[4].has("axis"));
}

TEST_F(PackageBuilder, NeedsGradients) {
  OwningOpRef<ModuleOp> module = parse(kTiny, /*autodiff=*/false);
  ASSERT_TRUE(module);
  std::string path = dir.file("none.pkg");
  std::vector<std::string> errors = writeErrors(*module, path);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("needs @forward and @gradients"), std::string::npos) << errors[0];
  EXPECT_FALSE(std::filesystem::exists(path));
}

// @gradients written by hand: the writer does not care how it was made.
const char *kWithOp = R"mlir(
module @bad {
  pe.optimizer {kind = "sgd"}
  func.func @forward(%x: tensor<2xf32> {pe.input = "x"}) -> (tensor<f32> {pe.output = "loss"}) {
    %c = OP
    %y = pe.add %x, %c : tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
    %l = pe.mean %y : tensor<2xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
  func.func @gradients(%x: tensor<2xf32> {pe.input = "x"}) -> (tensor<f32> {pe.output = "loss"}) {
    %l = pe.mean %x : tensor<2xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
)mlir";

std::string withOp(const std::string &op) {
  std::string text = kWithOp;
  text.replace(text.find("OP"), 2, op);
  return text;
}

TEST_F(PackageBuilder, RejectsNonSplatConstant) {
  OwningOpRef<ModuleOp> module =
      parse(withOp("arith.constant dense<[1.0, 2.0]> : tensor<2xf32>"), false);
  ASSERT_TRUE(module);
  std::vector<std::string> errors = writeErrors(*module, dir.file("c.pkg"));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("only f32 splat constants"), std::string::npos) << errors[0];
}

TEST_F(PackageBuilder, RejectsUnsupportedOp) {
  OwningOpRef<ModuleOp> module = parse(withOp("arith.addf %x, %x : tensor<2xf32>"), false);
  ASSERT_TRUE(module);
  std::vector<std::string> errors = writeErrors(*module, dir.file("o.pkg"));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("op 'arith.addf' is not supported in a package"), std::string::npos)
      << errors[0];
}

TEST_F(PackageBuilder, RejectsUnknownAttributeKind) {
  OwningOpRef<ModuleOp> module =
      parse(withOp("pe.relu %x {extra = [1, 2]} : tensor<2xf32> -> tensor<2xf32>"), false);
  ASSERT_TRUE(module);
  std::vector<std::string> errors = writeErrors(*module, dir.file("a.pkg"));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("attribute 'extra'"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("a package cannot hold"), std::string::npos) << errors[0];
}

TEST_F(PackageBuilder, RejectsNonFiniteFloat) {
  OwningOpRef<ModuleOp> module =
      parse(withOp("pe.scale %x factor(0x7FF0000000000000) : tensor<2xf32> -> tensor<2xf32>"), false);
  ASSERT_TRUE(module);
  std::vector<std::string> errors = writeErrors(*module, dir.file("f.pkg"));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("is not finite"), std::string::npos) << errors[0];
}

} // namespace
