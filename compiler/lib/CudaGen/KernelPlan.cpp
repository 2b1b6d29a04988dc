//===- KernelPlan.cpp - the step program and the GPU kernels it needs -----===//
//
// Walks @forward and @gradients op by op (the numbering of the package's
// program op lists), lowers each op with the first OpLowering of its kind
// that accepts it (StepProgram.h; the registry is allOpLowerings()), checks
// the launches against the kernels' specs, records every kernel use, and
// lists the ops no lowering covers. The kernels themselves are built by
// buildKernelModule, one gpu.module each.
//
//===----------------------------------------------------------------------===//
#include "BiasGradients.h"
#include "GemmGroups.h"
#include "KernelGroups.h"
#include "KernelBuilder.h"
#include "PackageValues.h"
#include "stringc/CudaGen/GPUPipeline.h"
#include "stringrt/CudaSection.h"

#include "stringc/Dialect/PE/PEDialect.h"
#include "stringc/Dialect/PE/PEOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

#include "llvm/ADT/DenseSet.h"

#include <cmath>
#include <map>

using namespace mlir;

namespace stringc::cudagen {

namespace {

/// The lowerings of each op class, the highest benefit first.
const llvm::DenseMap<TypeID, std::vector<const OpLowering *>> &loweringsByOp() {
  static const auto byOp = [] {
    llvm::DenseMap<TypeID, std::vector<const OpLowering *>> map;
    for (const OpLowering &lowering : allOpLowerings())
      map[lowering.op].push_back(&lowering);
    for (auto &entry : map)
      std::stable_sort(entry.second.begin(), entry.second.end(),
                       [](const OpLowering *a, const OpLowering *b) {
                         return a->benefit > b->benefit;
                       });
    return map;
  }();
  return byOp;
}

/// Whether @forward's first argument is a batch of f32 [B, C, H, W] images
/// (the input a training run's augmentation applies to).
bool takesImages(ModuleOp module) {
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward || forward.getNumArguments() == 0)
    return false;
  auto images = dyn_cast<RankedTensorType>(forward.getArgument(0).getType());
  return images && images.getElementType().isF32() && images.getRank() == 4 &&
         images.isDynamicDim(0) && !images.isDynamicDim(1) && !images.isDynamicDim(2) &&
         !images.isDynamicDim(3);
}

/// The steps of `op` from the best lowering of its class (for `precision`)
/// that accepts it.
std::optional<OpSteps> lowerOp(Operation &op, GpuPrecision precision) {
  if (!hasBatchShapes(op) || !op.getName().isRegistered())
    return std::nullopt;
  auto candidates = loweringsByOp().find(op.getName().getTypeID());
  if (candidates == loweringsByOp().end())
    return std::nullopt;
  for (const OpLowering *lowering : candidates->second)
    if (!lowering->onlyFor || *lowering->onlyFor == precision)
      if (std::optional<OpSteps> steps = lowering->lower(op))
        return steps;
  return std::nullopt;
}

/// Checks a lowering's launches against the kernels' signatures and the op,
/// so a wrong lowering fails at compile time rather than on a GPU.
LogicalResult checkSteps(Operation &op, const OpSteps &steps) {
  auto checkPointer = [&](const LaunchArg &arg, const std::string &where) -> LogicalResult {
    if (arg.kind == LaunchArgKind::StepKey || arg.kind == LaunchArgKind::Tickets)
      return success(); // the one step key buffer, the ticket counters (no index)
    int64_t limit = arg.kind == LaunchArgKind::Operand    ? op.getNumOperands()
                    : arg.kind == LaunchArgKind::Result   ? op.getNumResults()
                    : arg.kind == LaunchArgKind::Scratch  ? int64_t(steps.scratchBytes.size())
                    : arg.kind == LaunchArgKind::Constant ? int64_t(steps.constants.size())
                                                            : -1;
    if (limit < 0)
      return op.emitError() << "internal error: " << where << " is not a pointer argument";
    if (arg.index < 0 || arg.index >= limit)
      return op.emitError() << "internal error: " << where << " index " << arg.index
                            << " out of range";
    return success();
  };
  for (size_t l = 0; l < steps.launches.size(); ++l) {
    const Launch &launch = steps.launches[l];
    std::string where = "launch " + std::to_string(l);
    if (launch.gemm) {
      if (!launch.kernel.empty() || !launch.args.empty() || launch.grid)
        return op.emitError() << "internal error: " << where << " is both a GEMM and a kernel";
      for (const LaunchArg *matrix : {&launch.gemm->a, &launch.gemm->b, &launch.gemm->c,
                                      &launch.gemm->bias})
        if (matrix->kind == LaunchArgKind::StepKey)
          return op.emitError() << "internal error: " << where << " reads the step key";
      if (const std::optional<LaunchArg> &addend = launch.gemm->addend) {
        const GemmCall &g = *launch.gemm;
        if (failed(checkPointer(*addend, where + " gemm addend")))
          return failure();
        if (addend->kind == LaunchArgKind::StepKey || g.beta == 0.0f ||
            g.count.perBatch != 0 || g.count.constant != 1)
          return op.emitError() << "internal error: " << where
                                << " has an addend with beta 0 or count != 1";
      }
      if (failed(checkPointer(launch.gemm->a, where + " gemm a")) ||
          failed(checkPointer(launch.gemm->b, where + " gemm b")) ||
          failed(checkPointer(launch.gemm->c, where + " gemm c")))
        return failure();
      if (launch.gemm->c.kind == LaunchArgKind::Constant)
        return op.emitError() << "internal error: " << where << " writes a constant array";
      if (launch.gemm->epilogue == GemmEpilogue::Bias) {
        const GemmCall &g = *launch.gemm;
        if (failed(checkPointer(g.bias, where + " gemm bias")))
          return failure();
        if ((g.beta != 0.0f && !g.addend) || g.count.perBatch != 0 || g.count.constant != 1)
          return op.emitError() << "internal error: " << where
                                << " has a bias epilogue with beta != 0 (and no addend) or "
                                   "count != 1";
      }
      continue;
    }
    const KernelDef *def = findKernelDef(launch.kernel);
    if (!def)
      return op.emitError() << "internal error: no GPU kernel named '" << launch.kernel << "'";
    const GpuKernelSpec &spec = def->spec;
    if (launch.args.size() != spec.params.size())
      return op.emitError() << "internal error: " << where << " passes " << launch.args.size()
                            << " arguments to " << spec.name << ", which takes "
                            << spec.params.size();
    if ((spec.grid == GridRule::Explicit) != launch.grid.has_value())
      return op.emitError() << "internal error: " << where << " of " << spec.name
                            << (launch.grid ? " names a grid" : " needs an explicit grid");
    for (size_t a = 0; a < launch.args.size(); ++a) {
      const LaunchArg &arg = launch.args[a];
      ParamKind kind = spec.params[a].second;
      std::string argWhere = where + " argument " + std::to_string(a) + " (" +
                             spec.params[a].first + ")";
      bool pointer = arg.isPointer();
      bool matches = kind == ParamKind::Ptr   ? pointer
                     : kind == ParamKind::I64 ? arg.kind == LaunchArgKind::I64
                                              : arg.kind == LaunchArgKind::F32;
      if (!matches)
        return op.emitError() << "internal error: " << argWhere << " of " << spec.name
                              << " is not a " << stringrt::cudaParamKindName(kind);
      if (pointer && failed(checkPointer(arg, argWhere)))
        return failure();
      if (arg.kind == LaunchArgKind::F32 && !std::isfinite(arg.real))
        return op.emitError() << "internal error: " << argWhere << " of " << spec.name
                              << " is not finite";
    }
  }
  for (size_t c = 0; c < steps.constants.size(); ++c)
    if (steps.constants[c].size() == 0)
      return op.emitError() << "internal error: constant array " << c << " is empty";
  return success();
}

/// Moves the op's constant arrays into the package's table (an array equal
/// to one already there is not stored again) and renumbers the launches'
/// constant arguments to index that table.
void internConstants(OpSteps &steps, std::vector<ConstantArray> &table) {
  std::vector<int64_t> slot;
  for (ConstantArray &array : steps.constants) {
    auto it = llvm::find(table, array);
    if (it == table.end()) {
      table.push_back(std::move(array));
      it = std::prev(table.end());
    }
    slot.push_back(int64_t(it - table.begin()));
  }
  steps.constants.clear();
  auto renumber = [&](LaunchArg &arg) {
    if (arg.kind == LaunchArgKind::Constant)
      arg.index = slot[size_t(arg.index)];
  };
  for (Launch &launch : steps.launches) {
    for (LaunchArg &arg : launch.args)
      renumber(arg);
    if (launch.gemm) {
      renumber(launch.gemm->a);
      renumber(launch.gemm->b);
      renumber(launch.gemm->c);
      if (launch.gemm->epilogue == GemmEpilogue::Bias)
        renumber(launch.gemm->bias);
      if (launch.gemm->addend)
        renumber(*launch.gemm->addend);
    }
  }
}

/// Ops that are no work on a device: a parameter is a view of the flat
/// parameter buffer; the runtime fills a constant's buffer at its place.
bool isFree(Operation &op) { return isa<pe::GetParamOp, arith::ConstantOp>(op); }

/// The id of the value a pointer argument of `op`'s launch binds (an
/// operand or a result), or -1 (scratch, constants, the step key).
int64_t boundValue(Operation &op, const LaunchArg &arg,
                   const llvm::DenseMap<Value, int64_t> &ids) {
  if (arg.kind == LaunchArgKind::Operand)
    return ids.lookup(op.getOperand(unsigned(arg.index)));
  if (arg.kind == LaunchArgKind::Result)
    return ids.lookup(op.getResult(unsigned(arg.index)));
  return -1;
}

/// The storage type of every value of a program of a bf16 package (true:
/// bf16), llm.c's layout: activations (f32 values with a batch dimension)
/// in bf16 wherever every launch touching them reads and writes them
/// through a kernel's storage parameters (KernelDef::storageParams) or as a
/// single GEMM's matrices; parameters in bf16 (their bf16 copy) where
/// only GEMMs read them. Inputs, outputs, constants and everything else
/// (weight gradients, statistics) stay f32, as do the values of uncovered
/// ops. Then the GEMMs' type rules (CudaGemm) are met by demoting to f32,
/// to a fixed point: A and B alike, C bf16 only with bf16 A and B, the
/// bias and the addend of C's type.
std::vector<bool> assignStorage(Block &block, const std::vector<Operation *> &ops,
                                const std::vector<OpSteps> &steps,
                                const llvm::DenseMap<Value, int64_t> &ids) {
  std::vector<bool> bf16(ids.size(), false), param(ids.size(), false);
  for (Operation &op : block.without_terminator()) {
    if (isa<arith::ConstantOp>(op))
      continue;
    for (Value result : op.getResults()) {
      auto type = dyn_cast<RankedTensorType>(result.getType());
      if (!type || !type.getElementType().isF32())
        continue;
      int64_t id = ids.lookup(result);
      if (isa<pe::GetParamOp>(op))
        bf16[size_t(id)] = param[size_t(id)] = true;
      else if (type.getRank() > 0 && type.isDynamicDim(0))
        bf16[size_t(id)] = true;
    }
  }
  for (Value output : block.getTerminator()->getOperands())
    bf16[size_t(ids.lookup(output))] = false;
  llvm::DenseSet<Operation *> lowered(ops.begin(), ops.end());
  for (Operation &op : block.without_terminator())
    if (!isFree(op) && !lowered.count(&op)) { // uncovered: f32 around it
      for (Value v : op.getOperands())
        bf16[size_t(ids.lookup(v))] = false;
      for (Value v : op.getResults())
        bf16[size_t(ids.lookup(v))] = false;
    }
  auto keepF32 = [&](int64_t v) {
    if (v >= 0)
      bf16[size_t(v)] = false;
  };
  for (size_t o = 0; o < ops.size(); ++o)
    for (const Launch &launch : steps[o].launches) {
      if (launch.gemm) {
        const GemmCall &g = *launch.gemm;
        if (!(g.count == BatchAffine::fixed(1))) // strided-batched GEMMs: f32
          for (const LaunchArg *m : {&g.a, &g.b, &g.c})
            keepF32(boundValue(*ops[o], *m, ids));
        continue;
      }
      const KernelDef *def = findKernelDef(launch.kernel);
      for (size_t a = 0; a < launch.args.size(); ++a) {
        int64_t v = launch.args[a].isPointer() ? boundValue(*ops[o], launch.args[a], ids) : -1;
        if (v >= 0 && (param[size_t(v)] || !llvm::is_contained(def->storageParams, unsigned(a))))
          keepF32(v);
      }
    }
  for (bool changed = true; changed;) {
    changed = false;
    auto isBf16 = [&](int64_t v) { return v >= 0 && bf16[size_t(v)]; };
    auto demote = [&](int64_t v) {
      if (isBf16(v)) {
        bf16[size_t(v)] = false;
        changed = true;
      }
    };
    for (size_t o = 0; o < ops.size(); ++o)
      for (const Launch &launch : steps[o].launches) {
        if (!launch.gemm)
          continue;
        const GemmCall &g = *launch.gemm;
        int64_t a = boundValue(*ops[o], g.a, ids), b = boundValue(*ops[o], g.b, ids),
                c = boundValue(*ops[o], g.c, ids);
        if (isBf16(a) != isBf16(b)) {
          demote(a);
          demote(b);
        }
        if (isBf16(c) && !isBf16(a))
          demote(c);
        if (g.epilogue == GemmEpilogue::Bias) {
          int64_t bias = boundValue(*ops[o], g.bias, ids);
          if (isBf16(bias) != isBf16(c)) {
            demote(bias);
            demote(c);
          }
        }
        if (g.addend) {
          int64_t addend = boundValue(*ops[o], *g.addend, ids);
          if (isBf16(addend) != isBf16(c)) {
            demote(addend);
            demote(c);
          }
        }
      }
  }
  return bf16;
}

/// Each launch of a kernel with storage parameters becomes its variant for
/// the storage types of the values bound there (the kernel itself when
/// they are all f32).
void pickVariants(const std::vector<Operation *> &ops, std::vector<OpSteps> &steps,
                  const llvm::DenseMap<Value, int64_t> &ids, const std::vector<bool> &bf16) {
  for (size_t o = 0; o < ops.size(); ++o)
    for (Launch &launch : steps[o].launches) {
      if (launch.gemm)
        continue;
      const KernelDef *def = findKernelDef(launch.kernel);
      if (def->storageParams.empty())
        continue;
      std::vector<bool> types;
      for (unsigned p : def->storageParams) {
        int64_t v = boundValue(*ops[o], launch.args[p], ids);
        types.push_back(v >= 0 && bf16[size_t(v)]);
      }
      launch.kernel = kernelVariantName(*def, types);
    }
}

} // namespace

llvm::DenseMap<Value, int64_t> packageValueIds(Block &block) {
  llvm::DenseMap<Value, int64_t> ids;
  for (BlockArgument arg : block.getArguments())
    ids[arg] = int64_t(ids.size());
  for (Operation &op : block.without_terminator())
    for (Value result : op.getResults())
      ids[result] = int64_t(ids.size());
  return ids;
}

FailureOr<KernelPlan> planKernels(ModuleOp module, bool allKernels, GpuPrecision precision,
                                  ArrayRef<std::string> extraKernels) {
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

  bool bf16Params = false; // some pe.get_param stored in bf16: the runtime keeps a copy
  for (const char *program : {"forward", "gradients"}) {
    auto func = module.lookupSymbol<func::FuncOp>(program);
    if (!func)
      return module.emitError() << "the CUDA target needs @forward and @gradients (run "
                                   "pe-autodiff first)";
    if (!llvm::hasSingleElement(func.getBody()))
      return func.emitError() << "a package program is a single block";
    std::vector<std::string> uncovered;
    std::vector<OpSteps> programSteps;
    std::vector<Operation *> programOps; // the op of each entry of programSteps
    int64_t position = 0;
    for (Operation &op : func.getBody().front().without_terminator()) {
      int64_t opIndex = position++;
      if (isFree(op))
        continue;
      ++plan.totalOps;
      std::optional<OpSteps> steps = lowerOp(op, precision);
      if (!steps) {
        std::string name = op.getName().getStringRef().str();
        if (llvm::find(uncovered, name) == uncovered.end())
          uncovered.push_back(name);
        continue;
      }
      if (failed(checkSteps(op, *steps)))
        return failure();
      internConstants(*steps, plan.constants);
      ++plan.coveredOps;
      steps->op = opIndex;
      programSteps.push_back(std::move(*steps));
      programOps.push_back(&op);
    }
    Block &block = func.getBody().front();
    llvm::DenseMap<Value, int64_t> ids = packageValueIds(block);
    std::vector<bool> bf16(ids.size(), false);
    if (precision == GpuPrecision::BF16) {
      bf16 = assignStorage(block, programOps, programSteps, ids);
      for (auto param : block.getOps<pe::GetParamOp>())
        bf16Params = bf16Params || bf16[size_t(ids.lookup(param.getResult()))];
      pickVariants(programOps, programSteps, ids, bf16);
      std::vector<std::pair<int64_t, stringrt::DType>> dtypes;
      for (size_t v = 0; v < bf16.size(); ++v)
        if (bf16[v])
          dtypes.push_back({int64_t(v), stringrt::DType::BF16});
      plan.valueDTypes.push_back({program, std::move(dtypes)});
    }
    // Runs of same-shaped independent GEMMs: one cuBLAS call each.
    groupGemms(func, programOps, programSteps, ids, bf16);
    // Runs of independent Cayley weights, skew builders and skew gradients:
    // one launch each (KernelGroups.h).
    groupKernels(func, programOps, programSteps);
    // Each bias gradient (a sum_to of a weight gradient's dY) as the
    // weight GEMM's epilogue (BiasGradients.h).
    fuseBiasGradients(programOps, programSteps, ids, bf16);
    for (size_t o = 0; o < programSteps.size(); ++o) {
      std::vector<std::string> used; // each kernel's use once per op
      for (const Launch &launch : programSteps[o].launches) {
        // A bias epilogue may fall back to a kernel (GemmEpilogue), of C's type.
        std::string kernel = launch.kernel;
        if (launch.gemm && launch.gemm->epilogue == GemmEpilogue::Bias) {
          int64_t c = boundValue(*programOps[o], launch.gemm->c, ids);
          kernel = stringrt::cudaBiasFallbackKernel(c >= 0 && bf16[size_t(c)]
                                                        ? stringrt::DType::BF16
                                                        : stringrt::DType::F32);
        }
        if (!kernel.empty() && llvm::find(used, kernel) == used.end()) {
          used.push_back(kernel);
          if (failed(use(kernel, {program, programSteps[o].op})))
            return failure();
        }
      }
    }
    plan.steps.push_back({program, std::move(programSteps)});
    plan.uncovered.push_back({program, std::move(uncovered)});
  }

  auto optimizers = module.getOps<pe::OptimizerOp>();
  // The optimizer on the device (OptimizerKernels.cpp), launched by the
  // runtime after @gradients: the gradient norm's partials, the step's
  // scalars (clipping factor, learning rate, bias corrections) and the
  // update over the flat buffers.
  if (!optimizers.empty()) {
    StringRef kind = (*optimizers.begin()).getKind();
    const char *update = kind == "adamw" ? "pe_adamw" : kind == "sgd" ? "pe_sgd" : nullptr;
    if (update)
      for (const char *kernel : {"pe_sumsq_partials", "pe_optimizer_scalars", update})
        if (failed(use(kernel, {"optimizer", -1})))
          return failure();
    // The EMA of the weights, after the update (ema = d > 0).
    if (update && (*optimizers.begin()).getEmaDecay().convertToDouble() > 0 &&
        failed(use("pe_ema", {"optimizer", -1})))
      return failure();
  }
  // The bf16 copy of the parameters, rewritten by the runtime after every
  // change of the f32 parameters.
  if (bf16Params && failed(use(stringrt::kBf16ParamsKernel, {"optimizer", -1})))
    return failure();
  // AdamW writes the copy as it updates (pe_adamw_bf16).
  if (bf16Params && !optimizers.empty() && (*optimizers.begin()).getKind() == "adamw" &&
      failed(use(stringrt::kAdamWBf16Kernel, {"optimizer", -1})))
    return failure();
  // The augmentation of the training images, launched by the runtime as
  // each batch enters its step, when the first input is a batch of images.
  if (takesImages(module) && failed(use(stringrt::kAugmentImagesKernel, {"data", -1})))
    return failure();
  if (allKernels)
    for (const KernelDef &def : allKernelDefs()) {
      std::vector<std::string> names;
      if (!def.tensorCores || precision == GpuPrecision::BF16)
        names.push_back(def.spec.name);
      // With bf16, the variant of every storage parameter in bf16 too.
      if (precision == GpuPrecision::BF16 && !def.storageParams.empty())
        names.push_back(
            kernelVariantName(def, std::vector<bool>(def.storageParams.size(), true)));
      for (const std::string &name : names)
        if (!index.count(name)) {
          index.emplace(name, plan.kernels.size());
          plan.kernels.push_back(findKernelDef(name)->spec);
        }
    }
  for (const std::string &name : extraKernels) {
    const KernelDef *def = findKernelDef(name);
    if (!def)
      return module.emitError() << "--gpu-kernel: no GPU kernel or bf16-storage variant named '"
                                << name << "'";
    if (def->tensorCores && precision != GpuPrecision::BF16)
      return module.emitError() << "--gpu-kernel: '" << name
                                << "' runs on tensor cores, which --gpu-precision=bf16 selects";
    if (!index.count(name)) {
      index.emplace(name, plan.kernels.size());
      plan.kernels.push_back(def->spec);
    }
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

  for (const GpuKernelSpec &spec : plan.kernels) {
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
    kernel.setBf16Args(def->bf16Args);
    kernel.setDynamicSharedBytes(spec.dynamicSharedBytes);
    def->body(kernel);
    b.create<mlir::gpu::ReturnOp>(loc);
  }
  return container;
}

} // namespace stringc::cudagen
