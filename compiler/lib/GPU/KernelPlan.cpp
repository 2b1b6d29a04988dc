//===- KernelPlan.cpp - which GPU kernels the programs need ---------------===//
//
// Walks @forward and @gradients op by op (the numbering of the package's
// program op lists), maps each op with a GPU kernel to its kernel name(s),
// records every use, and lists the ops no kernel covers yet. The kernels
// themselves are built by buildKernelModule, one gpu.module each.
//
//===----------------------------------------------------------------------===//
#include "KernelBuilder.h"
#include "stringc/GPU/GPUPipeline.h"

#include "stringc/Dialect/PE/PEDialect.h"
#include "stringc/Dialect/PE/PEOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

#include <map>

using namespace mlir;

namespace stringc::cudagen {

const char *paramKindName(ParamKind kind) {
  switch (kind) {
  case ParamKind::Ptr:
    return "ptr";
  case ParamKind::I64:
    return "i64";
  case ParamKind::F32:
    return "f32";
  }
  return "?";
}

const char *gridRuleName(GridRule rule) {
  switch (rule) {
  case GridRule::Elements:
    return "elements";
  case GridRule::Rows:
    return "rows";
  case GridRule::Columns:
    return "columns";
  case GridRule::Partials:
    return "partials";
  }
  return "?";
}

namespace {

/// The kernels that implement `op`, or none.
std::vector<std::string> kernelsFor(Operation &op) {
  llvm::StringRef name = op.getName().getStringRef();
  auto binary = [&](const char *base) -> std::vector<std::string> {
    Type result = op.getResult(0).getType();
    bool lhsFull = op.getOperand(0).getType() == result;
    bool rhsFull = op.getOperand(1).getType() == result;
    std::string kernel = base;
    if (!lhsFull)
      kernel += "_bl";
    else if (!rhsFull)
      kernel += "_br";
    return {kernel};
  };
  if (name == "pe.add")
    return binary("pe_add");
  if (name == "pe.sub")
    return binary("pe_sub");
  if (name == "pe.mul")
    return binary("pe_mul");
  if (name == "pe.scale")
    return {"pe_scale"};
  if (name == "pe.relu")
    return {"pe_relu"};
  if (name == "pe.relu_grad")
    return {"pe_relu_grad"};
  if (auto gelu = dyn_cast<pe::GeluOp>(op))
    return {gelu.getApproximate() ? "pe_gelu_tanh" : "pe_gelu"};
  if (auto grad = dyn_cast<pe::GeluGradOp>(op))
    return {grad.getApproximate() ? "pe_gelu_grad_tanh" : "pe_gelu_grad"};
  if (name == "pe.layer_norm")
    return {"pe_layer_norm"};
  if (name == "pe.layer_norm_grad")
    return {"pe_layer_norm_grad_rows", "pe_layer_norm_grad_cols"};
  return {};
}

/// Ops that are no work on a device: parameters are arena offsets and
/// constants are launch arguments.
bool isFree(Operation &op) { return isa<pe::GetParamOp, arith::ConstantOp>(op); }

} // namespace

FailureOr<KernelPlan> planKernels(ModuleOp module, bool allKernels) {
  KernelPlan plan;
  std::map<std::string, size_t> index; // kernel name -> position in plan.kernels
  auto use = [&](const std::string &kernel, KernelUse where) -> LogicalResult {
    auto it = index.find(kernel);
    if (it == index.end()) {
      const KernelDef *def = findKernelDef(kernel);
      if (!def)
        return module.emitError() << "internal error: no GPU kernel named '" << kernel << "'";
      it = index.emplace(kernel, plan.kernels.size()).first;
      plan.kernels.push_back(def->spec);
    }
    plan.kernels[it->second].uses.push_back(std::move(where));
    return success();
  };

  for (const char *program : {"forward", "gradients"}) {
    auto func = module.lookupSymbol<func::FuncOp>(program);
    if (!func)
      return module.emitError() << "the CUDA target needs @forward and @gradients (run "
                                   "pe-autodiff first)";
    if (!llvm::hasSingleElement(func.getBody()))
      return func.emitError() << "a package program is a single block";
    std::vector<std::string> uncovered;
    int64_t position = 0;
    for (Operation &op : func.getBody().front().without_terminator()) {
      int64_t opIndex = position++;
      if (isFree(op))
        continue;
      ++plan.totalOps;
      std::vector<std::string> kernels = kernelsFor(op);
      if (kernels.empty()) {
        std::string name = op.getName().getStringRef().str();
        if (llvm::find(uncovered, name) == uncovered.end())
          uncovered.push_back(name);
        continue;
      }
      ++plan.coveredOps;
      for (const std::string &kernel : kernels)
        if (failed(use(kernel, {program, opIndex})))
          return failure();
    }
    plan.uncovered.push_back({program, std::move(uncovered)});
  }

  auto optimizers = module.getOps<pe::OptimizerOp>();
  if (!optimizers.empty() && (*optimizers.begin()).getKind() == "adamw") {
    if (failed(use("pe_adamw", {"optimizer", -1})) ||
        failed(use("pe_sumsq_partials", {"optimizer", -1})))
      return failure();
  }
  if (allKernels)
    for (const KernelDef &def : allKernelDefs())
      if (!index.count(def.spec.name)) {
        index.emplace(def.spec.name, plan.kernels.size());
        plan.kernels.push_back(def.spec);
      }
  return plan;
}

OwningOpRef<ModuleOp> buildKernelModule(MLIRContext &context, const KernelPlan &plan,
                                        const std::string &arch) {
  context.loadDialect<mlir::gpu::GPUDialect, NVVM::NVVMDialect, LLVM::LLVMDialect>();
  OpBuilder b(&context);
  Location loc = b.getUnknownLoc();
  OwningOpRef<ModuleOp> container = ModuleOp::create(loc, "stringc_kernels");
  (*container)->setAttr(mlir::gpu::GPUDialect::getContainerModuleAttrName(), b.getUnitAttr());
  auto target = NVVM::NVVMTargetAttr::get(&context, /*optLevel=*/3, "nvptx64-nvidia-cuda", arch,
                                          ptxFeatureFor(arch));
  auto ptrType = LLVM::LLVMPointerType::get(&context);

  for (const KernelSpec &spec : plan.kernels) {
    const KernelDef *def = findKernelDef(spec.name);
    assert(def && "planned kernels are known");
    b.setInsertionPointToEnd(container->getBody());
    auto gpuModule = b.create<mlir::gpu::GPUModuleOp>(loc, spec.name, b.getArrayAttr({target}));
    b.setInsertionPointToStart(gpuModule.getBody());
    SmallVector<Type> argTypes;
    for (const auto &[name, kind] : spec.params)
      argTypes.push_back(kind == ParamKind::Ptr   ? Type(ptrType)
                         : kind == ParamKind::I64 ? Type(b.getI64Type())
                                                  : Type(b.getF32Type()));
    auto func = b.create<mlir::gpu::GPUFuncOp>(loc, spec.name, b.getFunctionType(argTypes, {}));
    func->setAttr(mlir::gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
    // The pointer arguments of a kernel never alias each other.
    for (unsigned i = 0; i < spec.params.size(); ++i)
      if (spec.params[i].second == ParamKind::Ptr)
        func.setArgAttr(i, LLVM::LLVMDialect::getNoAliasAttrName(), b.getUnitAttr());
    b.setInsertionPointToStart(&func.getBody().front());
    KernelBuilder kernel(b, loc, func);
    def->body(kernel);
    b.create<mlir::gpu::ReturnOp>(loc);
  }
  return container;
}

} // namespace stringc::cudagen
