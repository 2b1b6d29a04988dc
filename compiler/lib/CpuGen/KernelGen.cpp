//===- KernelGen.cpp - pe ops -> kernel funcs on memrefs -------------------===//
//
// Walks @forward and @gradients in order and asks each op family for the
// kernels of an op (MemrefKernelBuilder.h); an op no family takes stays on the
// runtime's kernel library. Which kernels an op runs, their kinds and the
// ranges of their parallel loops are the compiled-kernel ABI's
// (stringrt/abi/CompiledKernels.h, which the runtime checks packages
// against); the families build their bodies. Kernels are keyed by (kind,
// attributes, views), so the repeated blocks of a model share them; symbols
// are `stringc_k<N>_<digest>_<kind>` in order of first use, the digest that
// of the op's buffer sizes (stringrt::kernelSizeDigest).
//
//===----------------------------------------------------------------------===//
#include "stringc/CpuGen/KernelGen.h"
#include "stringc/Dialect/PE/PEOps.h"
#include "stringrt/KernelLibrary.h"
#include "stringrt/Manifest.h"
#include "stringrt/OpSchema.h"
#include "stringrt/abi/CompiledKernels.h"

#include "MemrefKernelBuilder.h"

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

namespace {

std::optional<stringrt::OpCode> opCodeOf(Operation *op) {
  llvm::StringRef name = op->getName().getStringRef();
  return stringrt::findOpCode(std::string_view(name.data(), name.size()));
}

/// An op's operand and result shapes as the value table writes them (-1 for
/// the batch).
std::pair<std::vector<stringrt::abi::Shape>, std::vector<stringrt::abi::Shape>>
bufferShapes(Operation &op) {
  auto shapeOf = [](Type type) {
    stringrt::abi::Shape shape;
    for (int64_t dim : cast<RankedTensorType>(type).getShape())
      shape.push_back(ShapedType::isDynamic(dim) ? stringrt::kBatchDim : dim);
    return shape;
  };
  std::vector<stringrt::abi::Shape> operands, results;
  for (Type type : op.getOperandTypes())
    operands.push_back(shapeOf(type));
  for (Type type : op.getResultTypes())
    results.push_back(shapeOf(type));
  return {std::move(operands), std::move(results)};
}

} // namespace

bool hasKernelFor(Operation *op) {
  std::optional<stringrt::OpCode> code = opCodeOf(op);
  return code && stringrt::abi::generatesKernels(*code);
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
    if (broken)
      return failure();
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
    // The ABI says which kernels the op runs and over which range; the
    // family's specs must be those kernels, in that order.
    auto [operands, results] = bufferShapes(op);
    std::optional<std::vector<stringrt::abi::KernelRule>> rules =
        stringrt::abi::compiledKernelRules(*opCodeOf(&op), operands, results);
    if (!rules || rules->size() != specs.size()) {
      broken = true;
      op.emitError() << "internal error: the CPU code generator built " << specs.size()
                     << " kernels for this op, the compiled-kernel ABI "
                     << (rules ? std::to_string(rules->size()) : std::string("none"))
                     << " (stringrt/abi/CompiledKernels.h)";
      return;
    }
    auto &calls = plan.calls[&op];
    for (auto [spec, rule] : llvm::zip_equal(specs, *rules)) {
      const char *kind = stringrt::abi::kernelKindName(rule.kind);
      if (spec.kind != kind) {
        broken = true;
        op.emitError() << "internal error: the CPU code generator built a '" << spec.kind
                       << "' kernel where the compiled-kernel ABI has a '" << kind << "' kernel";
        return;
      }
      spec.range = rule.range;
      calls.push_back({kernelFor(op, spec, rule.kind), spec.range, spec.grain});
    }
    ++plan.coveredOps;
  }

  /// stringrt::kernelSizeDigest of `op`'s operands and results, their shapes
  /// as the value table writes them (-1 for the batch).
  static std::string sizeDigest(Operation &op) {
    auto [shapes, results] = bufferShapes(op);
    shapes.insert(shapes.end(), results.begin(), results.end());
    return stringrt::kernelSizeDigest(shapes);
  }

  /// The symbol of the kernel for `spec`, built on first use.
  std::string kernelFor(Operation &op, const KernelSpec &spec, stringrt::abi::KernelKind kind) {
    // The symbol carries the digest of the op's buffer sizes, which the
    // runtime recomputes from the value table (stringrt::kernelSizeDigest).
    std::string digest = sizeDigest(op);
    std::string key = spec.key + "|" + digest;
    auto found = byKey.find(key);
    if (found != byKey.end())
      return found->second;
    std::string symbol = stringrt::abi::kernelSymbol(byKey.size(), digest, kind);
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
    MemrefKernelBuilder kb(func);
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
  bool broken = false; // a family's kernels disagreed with the ABI (reported)
};

} // namespace

FailureOr<KernelPlan> generateKernels(ModuleOp module) { return Generator(module).run(); }

} // namespace stringc::codegen
