//===- KernelGen.cpp - pe ops -> kernel funcs on memrefs -------------------===//
//
// Walks @forward and @gradients in order and asks each op family for the
// kernels of an op (KernelBuilder.h); an op no family takes stays on the
// runtime's kernel library. Kernels are keyed by (kind, attributes, views),
// so the repeated blocks of a model share them; symbols are
// `stringc_k<N>_<digest>_<kind>` in order of first use, the digest that of
// the op's buffer sizes (stringrt::kernelSizeDigest).
//
//===----------------------------------------------------------------------===//
#include "stringc/Codegen/KernelGen.h"
#include "stringc/Dialect/PE/PEOps.h"
#include "stringrt/KernelLibrary.h"
#include "stringrt/Manifest.h"

#include "KernelBuilder.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringMap.h"

using namespace mlir;

namespace stringc::codegen {

using namespace detail;

bool hasKernelFor(Operation *op) {
  return isa<pe::AddOp, pe::SubOp, pe::MulOp, pe::ScaleOp, pe::GeluOp, pe::ReluOp,
             pe::GeluGradOp, pe::ReluGradOp, pe::LayerNormOp, pe::LayerNormGradOp,
             pe::LayerNormGradAccOp, pe::SumToOp, pe::AttentionOp, pe::AttentionGradOp,
             pe::RopeAttentionOp, pe::RopeAttentionGradOp,
             pe::RopeApplyOp, pe::RopeApplyGradTableOp, pe::TokenEmbedOp, pe::TokenEmbedGradOp,
             pe::ClassTokenOp, pe::ClassTokenGradOp, pe::SelectTokenOp, pe::SelectTokenGradOp,
             pe::CrossEntropyGradOp>(op);
}

namespace {

class Generator {
public:
  explicit Generator(ModuleOp module) : module(module), ctx(module.getContext()) {}

  FailureOr<KernelPlan> run() {
    ctx->loadDialect<func::FuncDialect, scf::SCFDialect, arith::ArithDialect, math::MathDialect,
                     memref::MemRefDialect, vector::VectorDialect, LLVM::LLVMDialect>();
    plan.kernels = ModuleOp::create(module.getLoc(), "stringc_kernels");
    for (llvm::StringRef name : {"forward", "gradients"}) {
      auto func = module.lookupSymbol<func::FuncOp>(name);
      if (!func || func.isDeclaration())
        return module.emitError() << "CPU code generation needs @" << name
                                  << " (run pe-autodiff first)";
      for (Operation &op : func.getBody().front().without_terminator())
        generate(op);
    }
    // Fold the builders' repeated constants and trivial loops.
    PassManager pm(ctx);
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
    if (failed(pm.run(*plan.kernels)))
      return failure();
    return std::move(plan);
  }

private:
  void generate(Operation &op) {
    ++plan.totalOps;
    if (!hasKernelFor(&op))
      return;
    std::vector<KernelSpec> specs = elementwiseSpecs(&op);
    if (specs.empty())
      specs = normSpecs(&op);
    if (specs.empty())
      specs = sumToSpecs(&op);
    if (specs.empty())
      specs = attentionSpecs(&op);
    if (specs.empty())
      specs = ropeSpecs(&op);
    if (specs.empty())
      specs = tokenSpecs(&op);
    if (specs.empty())
      specs = lossSpecs(&op);
    if (specs.empty())
      return; // shapes the generator does not handle: the runtime's kernel
    auto &calls = plan.calls[&op];
    for (const KernelSpec &spec : specs)
      calls.push_back({kernelFor(op, spec), spec.range, spec.grain});
    ++plan.coveredOps;
  }

  /// stringrt::kernelSizeDigest of `op`'s operands and results, their shapes
  /// as the value table writes them (-1 for the batch).
  static std::string sizeDigest(Operation &op) {
    std::vector<std::vector<int64_t>> shapes;
    auto add = [&](Type type) {
      std::vector<int64_t> shape;
      for (int64_t dim : cast<RankedTensorType>(type).getShape())
        shape.push_back(ShapedType::isDynamic(dim) ? stringrt::kBatchDim : dim);
      shapes.push_back(std::move(shape));
    };
    for (Type type : op.getOperandTypes())
      add(type);
    for (Type type : op.getResultTypes())
      add(type);
    return stringrt::kernelSizeDigest(shapes);
  }

  /// The symbol of the kernel for `spec`, built on first use.
  std::string kernelFor(Operation &op, const KernelSpec &spec) {
    // The symbol carries the digest of the op's buffer sizes, which the
    // runtime recomputes from the value table (stringrt::kernelSizeDigest).
    std::string digest = sizeDigest(op);
    std::string key = spec.key + "|" + digest;
    auto found = byKey.find(key);
    if (found != byKey.end())
      return found->second;
    std::string symbol =
        "stringc_k" + std::to_string(byKey.size()) + "_" + digest + "_" + spec.kind;
    byKey[key] = symbol;

    OpBuilder b(ctx);
    SmallVector<Type> args;
    for (auto [k, view] : llvm::enumerate(spec.views)) {
      bool i32 = k < spec.i32Views.size() && spec.i32Views[k];
      args.push_back(MemRefType::get(view, i32 ? Type(b.getI32Type()) : b.getF32Type()));
    }
    args.push_back(b.getIndexType()); // begin
    args.push_back(b.getIndexType()); // end
    // The kernel keeps the location of the first op it was built for.
    auto func = func::FuncOp::create(op.getLoc(), symbol, b.getFunctionType(args, {}));
    plan.kernels->push_back(func);
    KernelBuilder kb(func);
    if (spec.build)
      spec.build(&op, spec, kb);
    else if (spec.kind.rfind("layer_norm", 0) == 0)
      buildNormKernel(&op, spec, kb);
    else if (spec.kind == "sum_to")
      buildSumToKernel(&op, spec, kb);
    else if (spec.kind.find("attention") != std::string::npos)
      buildAttentionKernel(&op, spec, kb);
    else
      buildElementwiseKernel(&op, spec, kb);
    return symbol;
  }

  ModuleOp module;
  MLIRContext *ctx;
  KernelPlan plan;
  llvm::StringMap<std::string> byKey;
};

} // namespace

FailureOr<KernelPlan> generateKernels(ModuleOp module) { return Generator(module).run(); }

} // namespace stringc::codegen
