//===- LowerToLLVM.cpp - kernel funcs on memrefs -> LLVM dialect ----------===//
#include "stringc/CpuGen/LowerToLLVM.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVMPass.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Transforms/Passes.h"

#include <string>
#include <vector>

using namespace mlir;

namespace stringc::codegen {
namespace {

/// A kernel's name and argument memref types, taken before lowering
/// (the LLVM function has them unpacked into pointers and integers).
struct Signature {
  std::string name;
  std::vector<MemRefType> buffers;
};

/// SYMBOL(buffers, batch, begin, end): loads each buffer pointer, builds its
/// unpacked descriptor (allocated = aligned = the pointer, offset 0, sizes
/// with `batch` for a dynamic dimension, row-major strides) and calls
/// SYMBOL_impl.
LogicalResult addEntryPoint(ModuleOp module, const Signature &sig) {
  MLIRContext *ctx = module.getContext();
  auto impl = module.lookupSymbol<LLVM::LLVMFuncOp>(sig.name);
  if (!impl)
    return module.emitError() << "kernel @" << sig.name << " is missing after lowering";
  std::string implName = sig.name + "_impl";
  if (failed(SymbolTable::replaceAllSymbolUses(impl, StringAttr::get(ctx, implName), module)))
    return failure();
  SymbolTable::setSymbolName(impl, implName);
  impl.setLinkage(LLVM::Linkage::Internal);
  // Operands and results never overlap a result (the runtime gives every
  // result fresh storage), so every pointer may be noalias; this lets LLVM
  // vectorise without run-time overlap checks.
  for (unsigned i = 0; i < impl.getNumArguments(); ++i)
    if (isa<LLVM::LLVMPointerType>(impl.getArgument(i).getType()))
      impl.setArgAttr(i, LLVM::LLVMDialect::getNoAliasAttrName(), UnitAttr::get(ctx));

  OpBuilder b(ctx);
  b.setInsertionPointToEnd(module.getBody());
  Location loc = impl.getLoc();
  auto ptr = LLVM::LLVMPointerType::get(ctx);
  auto i64 = b.getI64Type();
  auto type = LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx), {ptr, i64, i64, i64});
  auto entry = b.create<LLVM::LLVMFuncOp>(loc, sig.name, type);
  b.setInsertionPointToStart(entry.addEntryBlock(b));
  Value buffers = entry.getArgument(0), batch = entry.getArgument(1);
  auto constant = [&](int64_t v) { return b.create<LLVM::ConstantOp>(loc, i64, v).getResult(); };

  SmallVector<Value> args;
  for (auto [k, memref] : llvm::enumerate(sig.buffers)) {
    Value slot = b.create<LLVM::GEPOp>(loc, ptr, ptr, buffers,
                                        ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(k)});
    Value data = b.create<LLVM::LoadOp>(loc, ptr, slot);
    args.append({data, data, constant(0)});
    ArrayRef<int64_t> shape = memref.getShape();
    for (int64_t d : shape)
      args.push_back(ShapedType::isDynamic(d) ? batch : constant(d));
    // Strides: products of the later (static) dimensions.
    SmallVector<int64_t> strides(shape.size(), 1);
    for (int64_t i = int64_t(shape.size()) - 2; i >= 0; --i)
      strides[i] = strides[i + 1] * shape[i + 1];
    for (int64_t s : strides)
      args.push_back(constant(s));
  }
  args.push_back(entry.getArgument(2));
  args.push_back(entry.getArgument(3));
  if (args.size() != impl.getNumArguments())
    return impl.emitError() << "kernel @" << sig.name << " takes " << impl.getNumArguments()
                            << " lowered arguments, the entry point builds " << args.size();
  b.create<LLVM::CallOp>(loc, impl, args);
  b.create<LLVM::ReturnOp>(loc, ValueRange{});
  return success();
}

} // namespace

LogicalResult lowerKernelsToLLVM(ModuleOp kernels) {
  MLIRContext *ctx = kernels.getContext();
  std::vector<Signature> signatures;
  for (auto func : kernels.getOps<func::FuncOp>()) {
    Signature sig{func.getSymName().str(), {}};
    for (Type t : func.getArgumentTypes())
      if (auto memref = dyn_cast<MemRefType>(t))
        sig.buffers.push_back(memref);
    signatures.push_back(std::move(sig));
  }

  // erf, tanh and exp as polynomials in arith ops: no libm call, so the
  // loops that use them vectorise.
  RewritePatternSet approximations(ctx);
  populateMathPolynomialApproximationPatterns(approximations);
  if (failed(applyPatternsAndFoldGreedily(kernels, std::move(approximations))))
    return kernels.emitError() << "math approximation did not converge";

  PassManager pm(ctx);
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createConvertSCFToCFPass());
  // Kernels that carry whole rows as vectors (AttentionGen.cpp): vector
  // ops to LLVM vector ops and intrinsics (fmuladd, shufflevector).
  pm.addPass(createConvertVectorToLLVMPass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  if (failed(pm.run(kernels)))
    return kernels.emitError() << "lowering the kernels to the LLVM dialect failed";

  for (const Signature &sig : signatures)
    if (failed(addEntryPoint(kernels, sig)))
      return failure();
  return success();
}

} // namespace stringc::codegen
