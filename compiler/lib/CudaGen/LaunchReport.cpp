//===- LaunchReport.cpp - a training step's launches against a roofline ---===//
//
// The launches of a step and their bytes, FLOPs and grids; the model is in
// LaunchReport.h and its parts in LaunchModel.h; the printers in
// LaunchReportPrint.cpp. The grid of a kernel launch comes from the runtime's
// own rule (stringrt::cudaRuleGridX), so the report sees the grids the GPU
// will run.
//
//===----------------------------------------------------------------------===//
#include "stringc/CudaGen/LaunchReport.h"

#include "KernelBuilder.h"
#include "LaunchModel.h"
#include "PackageValues.h"
#include "stringc/Dialect/PE/PECost.h"
#include "stringc/Dialect/PE/PEOps.h"
#include "stringc/Transforms/Explain.h"

#include "stringrt/Augment.h"
#include "stringrt/CudaSection.h"
#include "stringrt/cuda/StepControl.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/Format.h"

#include <algorithm>
#include <functional>
#include <map>

using namespace mlir;

namespace stringc::cudagen {

const char *launchArithmeticName(LaunchArithmetic arithmetic) {
  switch (arithmetic) {
  case LaunchArithmetic::F32:
    return "f32";
  case LaunchArithmetic::TF32:
    return "tf32";
  case LaunchArithmetic::BF16:
    return "bf16";
  }
  return "?";
}

namespace {

double peakOf(LaunchArithmetic arithmetic, const GpuMachineModel &machine) {
  switch (arithmetic) {
  case LaunchArithmetic::F32:
    return machine.f32FlopsPerSecond;
  case LaunchArithmetic::TF32:
    return machine.tf32FlopsPerSecond;
  case LaunchArithmetic::BF16:
    return machine.bf16FlopsPerSecond;
  }
  return machine.f32FlopsPerSecond;
}

/// The roofline bound of a launch whose bytes and FLOPs are set.
void applyRoofline(LaunchEstimate &launch, const GpuMachineModel &machine) {
  launch.boundSeconds = std::max(launch.bytes / machine.bytesPerSecond,
                                 launch.flops / peakOf(launch.arithmetic, machine));
}

/// The times of a launch (LaunchReport.h): cuBLAS from the measured GEMMs,
/// a copy at the bandwidth, a generated kernel by the kernel model.
void applyModel(Operation *op, LaunchEstimate &e, int64_t batch, const KernelResourceTable *table,
                const GpuMachineModel &machine) {
  applyRoofline(e, machine);
  if (e.kernel == "cublas gemm") {
    ExtraTerm gemm = gemmTime(e.arithmetic, e.flops, e.bytes, machine);
    e.chainSeconds = gemm.seconds;
    e.chain = gemm.what;
    e.predictedSeconds = std::max(machine.minLaunchSeconds, gemm.seconds);
    e.limit = gemm.seconds > machine.minLaunchSeconds ? "gemm" : "min";
    return;
  }
  if (e.blocks < 0) { // the runtime's copies
    e.memorySeconds = e.bytes / machine.bytesPerSecond;
    e.predictedSeconds = std::max(machine.minLaunchSeconds, e.memorySeconds);
    e.limit = e.memorySeconds > machine.minLaunchSeconds ? "memory" : "min";
    return;
  }
  const KernelResources *resources = nullptr;
  if (table) {
    auto found = table->find(e.kernel);
    if (found != table->end())
      resources = &found->second;
  }
  applyKernelModel(op, e, batch, resources, machine);
}

/// The launches of one op at `batch`, without times.
std::vector<LaunchEstimate> opLaunches(Operation &op, const OpSteps &steps,
                                       const KernelPlan &plan, GpuPrecision precision,
                                       int64_t batch,
                                       const std::function<double(Value)> &elementBytes) {
  // Each value at its stored type (KernelPlan::valueDTypes: bf16 or f32).
  auto bytesOf = [&](const LaunchArg &arg) -> double {
    if (arg.kind == LaunchArgKind::Operand || arg.kind == LaunchArgKind::Result)
      return elementBytes(arg.kind == LaunchArgKind::Operand ? op.getOperand(unsigned(arg.index))
                                                             : op.getResult(unsigned(arg.index)));
    return 4;
  };
  auto bufferBytes = [&](const LaunchArg &arg) -> double {
    switch (arg.kind) {
    case LaunchArgKind::Operand:
      return bytesOf(arg) *
             pe::elementsAtBatch(op.getOperand(unsigned(arg.index)).getType(), batch);
    case LaunchArgKind::Result:
      return bytesOf(arg) *
             pe::elementsAtBatch(op.getResult(unsigned(arg.index)).getType(), batch);
    case LaunchArgKind::Scratch:
      return double(steps.scratchBytes[size_t(arg.index)].at(batch));
    case LaunchArgKind::Constant:
      return 4 * double(plan.constants[size_t(arg.index)].size());
    case LaunchArgKind::StepKey:
      return 4 * double(stringrt::kStepKeyWords);
    case LaunchArgKind::Tickets: // one word a column group: negligible
      break;
    case LaunchArgKind::I64:
    case LaunchArgKind::F32:
      break;
    }
    return 0;
  };

  std::vector<LaunchEstimate> launches;
  double gemmFlops = 0, kernelBytes = 0;
  for (const Launch &launch : steps.launches) {
    LaunchEstimate e;
    e.program = "gradients";
    e.op = steps.op;
    e.opName = op.getName().getStringRef().str();
    if (launch.gemm) {
      const GemmCall &g = *launch.gemm;
      double m = double(g.m.at(batch)), n = double(g.n.at(batch)), k = double(g.k.at(batch));
      double count = double(g.count.at(batch));
      auto copies = [&](const BatchAffine &stride) { return stride.at(batch) == 0 ? 1 : count; };
      e.kernel = "cublas gemm";
      e.flops = 2 * m * n * k * count;
      e.bytes = bytesOf(g.a) * m * k * copies(g.strideA) +
                bytesOf(g.b) * k * n * copies(g.strideB) +
                bytesOf(g.c) * m * n * copies(g.strideC) * (g.beta != 0.0f ? 2 : 1);
      if (g.epilogue == GemmEpilogue::Bias)
        e.bytes += bytesOf(g.c) * n;
      // The bias gradient: the sums of B (read once, by the product) over
      // k, written as n elements of C's type (the next op's launches are
      // not run: estimateTrainingStep).
      if (g.epilogue == GemmEpilogue::BiasGrad) {
        e.bytes += bytesOf(g.c) * n;
        e.flops += k * n;
      }
      // bf16 matrices run on the bf16 tensor cores; f32 ones of a bf16
      // package as TF32 (what cuBLAS picked on the H100 and H200).
      e.arithmetic = bytesOf(g.a) == 2              ? LaunchArithmetic::BF16
                     : precision == GpuPrecision::BF16 ? LaunchArithmetic::TF32
                                                       : LaunchArithmetic::F32;
      gemmFlops += e.flops;
      launches.push_back(std::move(e));
      continue;
    }
    const KernelDef *def = findKernelDef(launch.kernel);
    const GpuKernelSpec &spec = def->spec;
    e.kernel = launch.kernel;
    e.threadsPerBlock = spec.blockX * spec.blockY;
    e.arithmetic = def->tensorCores ? LaunchArithmetic::BF16 : LaunchArithmetic::F32;
    if (launch.grid) {
      e.blocks = launch.grid->x.at(batch) * launch.grid->y.at(batch) * launch.grid->z.at(batch);
      // A column sum (columnPartialsKernel): its chunks are grid y.
      if (llvm::any_of(launch.args,
                       [](const LaunchArg &a) { return a.kind == LaunchArgKind::Tickets; }))
        e.finishChunks = launch.grid->y.at(batch);
    } else {
      int64_t ints[2] = {0, 0};
      for (size_t a = 0, seen = 0; a < launch.args.size() && seen < 2; ++a)
        if (launch.args[a].kind == LaunchArgKind::I64)
          ints[seen++] = launch.args[a].integer.at(batch);
      e.blocks = stringrt::cudaRuleGridX(spec.grid, spec.blockX, spec.blockY,
                                         ints[0], ints[1]);
    }
    std::vector<int64_t> seenBuffers; // each buffer once: (kind << 32) | index
    for (const LaunchArg &arg : launch.args) {
      if (arg.kind == LaunchArgKind::I64)
        e.integers.push_back(arg.integer.at(batch));
      if (!arg.isPointer())
        continue;
      int64_t key = (int64_t(arg.kind) << 32) | arg.index;
      if (llvm::is_contained(seenBuffers, key))
        continue;
      seenBuffers.push_back(key);
      double bytes = bufferBytes(arg);
      if (def->readsResultSized && arg.kind == LaunchArgKind::Operand)
        bytes = std::min(bytes, bytesOf(arg) * double(pe::elementsAtBatch(
                                                    op.getResult(0).getType(), batch)));
      e.bytes += bytes;
      if (arg.kind == LaunchArgKind::Operand || arg.kind == LaunchArgKind::Constant) {
        ++e.readStreams;
        // 32 lanes x the elements each loads of the stream's type: a scalar
        // bf16 stream 64 B, an f32 one 128 B, a vectorised bf16 one 512 B.
        e.bytesInFlightPerWarp += 32.0 * double(def->elementsPerLoad) * bytesOf(arg);
      }
    }
    // A kernel group's launch reaches its op's own operands and results
    // through the table (the other members' bytes: estimateTrainingStep).
    for (const LaunchArg &arg : launch.groupArgs) {
      e.bytes += bufferBytes(arg);
      if (arg.kind == LaunchArgKind::Operand) {
        ++e.readStreams;
        e.bytesInFlightPerWarp += 32.0 * bytesOf(arg);
      }
    }
    kernelBytes += e.bytes;
    launches.push_back(std::move(e));
  }
  // The op's FLOPs that are not GEMMs, over its kernels by their bytes.
  double rest = std::max(0.0, estimateCost(&op, batch).flops - gemmFlops);
  for (LaunchEstimate &e : launches)
    if (e.kernel != "cublas gemm" && kernelBytes > 0)
      e.flops = rest * e.bytes / kernelBytes;
  return launches;
}

/// The runtime's launches after @gradients (DeviceExecutor::enqueueTrainStep):
/// the gradient copies into the flat buffer, the norm's partials, the step's
/// scalars and the update, over `n` trainable floats.
std::vector<LaunchEstimate> optimizerLaunches(ModuleOp train, int64_t n) {
  std::vector<LaunchEstimate> launches;
  auto optimizers = train.getOps<pe::OptimizerOp>();
  if (optimizers.empty() || n == 0)
    return launches;
  StringRef kind = (*optimizers.begin()).getKind();
  auto add = [&](std::string kernel, int64_t blocks, double bytes, double flops) {
    LaunchEstimate e;
    e.program = "optimizer";
    e.opName = "optimizer";
    e.kernel = std::move(kernel);
    if (const KernelDef *def = findKernelDef(e.kernel))
      e.threadsPerBlock = def->spec.blockX * def->spec.blockY;
    e.blocks = blocks;
    e.bytes = bytes;
    e.flops = flops;
    launches.push_back(std::move(e));
  };
  add("gradient copies (memcpy)", -1, 8.0 * double(n), 0);
  const KernelDef *sumsq = findKernelDef("pe_sumsq_partials");
  int64_t partials = stringrt::cudaRuleGridX(stringrt::CudaGridRule::Partials,
                                             sumsq->spec.blockX, sumsq->spec.blockY, n, 0);
  add("pe_sumsq_partials", partials, 4.0 * double(n + partials), 2.0 * double(n));
  add("pe_optimizer_scalars", 1, 4.0 * double(partials) + stringrt::cuda::kControlSlots * 8, 0);
  const char *update = kind == "adamw" ? "pe_adamw" : "pe_sgd";
  const KernelDef *def = findKernelDef(update);
  int64_t blocks = stringrt::cudaRuleGridX(stringrt::CudaGridRule::Elements, def->spec.blockX,
                                           def->spec.blockY, n, 0);
  // AdamW reads and writes the parameters, m and v, and reads the gradient;
  // SGD the parameters and the velocity.
  double streams = kind == "adamw" ? 7 : 5;
  add(update, blocks, 4.0 * streams * double(n), (kind == "adamw" ? 14.0 : 5.0) * double(n));
  // The EMA of the weights reads them and reads and writes itself.
  if ((*optimizers.begin()).getEmaDecay().convertToDouble() > 0)
    add("pe_ema", blocks, 12.0 * double(n), 3.0 * double(n));
  return launches;
}

/// pe_augment_images over a batch of `batch` images, when the plan has the
/// kernel: it reads the images and the draws (kAugmentDrawWords int32 a
/// sample) and writes the augmented images.
std::optional<LaunchEstimate> augmentationLaunch(ModuleOp train, const KernelPlan &plan,
                                                 int64_t batch) {
  auto spec = std::find_if(plan.kernels.begin(), plan.kernels.end(), [](const GpuKernelSpec &k) {
    return k.name == stringrt::kAugmentImagesKernel;
  });
  auto forward = train.lookupSymbol<func::FuncOp>("forward");
  if (spec == plan.kernels.end() || !forward || forward.getNumArguments() == 0)
    return std::nullopt;
  auto images = dyn_cast<RankedTensorType>(forward.getArgument(0).getType());
  if (!images || images.getRank() != 4)
    return std::nullopt;
  const double elements = double(batch) * double(images.getDimSize(1)) *
                          double(images.getDimSize(2)) * double(images.getDimSize(3));
  LaunchEstimate e;
  e.program = "data";
  e.opName = "augmentation";
  e.kernel = spec->name;
  e.threadsPerBlock = spec->blockX * spec->blockY;
  e.blocks = stringrt::cudaRuleGridX(spec->grid, spec->blockX, spec->blockY,
                                     int64_t(elements), 0);
  e.bytes = 8.0 * elements + 4.0 * double(stringrt::kAugmentDrawWords) * double(batch);
  e.growsWithBatch = true;
  return e;
}

int64_t trainableElements(ModuleOp train) {
  int64_t n = 0;
  for (pe::ParameterOp param : train.getOps<pe::ParameterOp>())
    if (!param.getFrozen())
      n += param.getTensorType().getNumElements();
  return n;
}

} // namespace

FailureOr<StepEstimate> estimateTrainingStep(ModuleOp train, const KernelPlan &plan,
                                             GpuPrecision precision, int64_t batch,
                                             const GpuMachineModel &machine,
                                             const KernelResourceTable *resources) {
  auto func = train.lookupSymbol<func::FuncOp>("gradients");
  if (!func)
    return train.emitError() << "the launch report needs @gradients (run pe-autodiff first)";
  std::vector<Operation *> ops;
  for (Operation &op : func.getBody().front().without_terminator())
    ops.push_back(&op);
  const std::vector<OpSteps> *steps = nullptr;
  for (const auto &[program, programSteps] : plan.steps)
    if (program == "gradients")
      steps = &programSteps;
  if (!steps)
    return train.emitError() << "the kernel plan has no steps for @gradients";
  for (const auto &[program, names] : plan.uncovered)
    if (program == "gradients" && !names.empty())
      return train.emitError() << "the launch report needs every op on the GPU; "
                               << names.front() << " has no GPU steps";

  // The values @gradients stores in bf16 (the plan lists them by the
  // package's value ids).
  llvm::DenseSet<Value> bf16Values;
  for (const auto &[program, dtypes] : plan.valueDTypes)
    if (program == "gradients") {
      llvm::DenseSet<int64_t> bf16Ids;
      for (const auto &[id, dtype] : dtypes)
        if (dtype == stringrt::DType::BF16)
          bf16Ids.insert(id);
      for (const auto &[value, id] : packageValueIds(func.getBody().front()))
        if (bf16Ids.count(id))
          bf16Values.insert(value);
    }
  auto elementBytes = [&](Value v) -> double { return bf16Values.count(v) ? 2 : 4; };

  StepEstimate step;
  step.batch = batch;
  // The entries before this one are members of a group of first launches
  // led by `firstLaunchesLeader`: their first launch ran in the group's, and
  // so did each later launch that the leader's grouped GEMM runs
  // (KernelGroups.h).
  size_t firstLaunchesUntil = 0;
  const OpSteps *firstLaunchesLeader = nullptr;
  auto groupedLater = [](const OpSteps &leader, size_t l) {
    return l > 0 && leader.launches[l].gemm && leader.launches[l].gemm->groupSize > 1;
  };
  for (size_t entry = 0; entry < steps->size(); ++entry) {
    const OpSteps &s = (*steps)[entry];
    Operation &op = *ops[size_t(s.op)];
    std::vector<LaunchEstimate> now = opLaunches(op, s, plan, precision, batch, elementBytes);
    std::vector<LaunchEstimate> more =
        opLaunches(op, s, plan, precision, batch + 1, elementBytes);
    if (entry < firstLaunchesUntil)
      for (size_t l = now.size(); l-- > 0;)
        if (l == 0 || groupedLater(*firstLaunchesLeader, l)) {
          now.erase(now.begin() + l);
          more.erase(more.begin() + l);
        }
    // A GEMM group is one launch: the members' bytes and FLOPs through the
    // GEMM fit, its per-call cost once. A kernel group (KernelGroups.h)
    // likewise: one launch, a block a member (its chain once); a group of
    // first launches charges the members' first launches there, and their
    // later launches that the leader runs as grouped GEMMs at the leader's,
    // their other launches at their own entries.
    bool firstLaunches = s.launches.size() > 1 && s.launches[0].groupSize > 1;
    int64_t group = firstLaunches           ? s.launches[0].groupSize
                    : s.launches.size() != 1 ? 1
                    : s.launches[0].gemm     ? s.launches[0].gemm->groupSize
                                             : s.launches[0].groupSize;
    if (group > 1) {
      // The launches the group computes: the first, and in a group of first
      // launches each later one the leader runs as a grouped GEMM.
      std::vector<size_t> grouped = {0};
      for (size_t l = 1; firstLaunches && l < s.launches.size(); ++l)
        if (groupedLater(s, l))
          grouped.push_back(l);
      for (size_t l : grouped)
        now[l].groupOps.push_back(s.op);
      for (size_t m = entry + 1; m < entry + size_t(group); ++m) {
        const OpSteps &member = (*steps)[m];
        Operation &memberOp = *ops[size_t(member.op)];
        std::vector<LaunchEstimate> own =
            opLaunches(memberOp, member, plan, precision, batch, elementBytes);
        std::vector<LaunchEstimate> ownMore =
            opLaunches(memberOp, member, plan, precision, batch + 1, elementBytes);
        for (size_t l : grouped) {
          now[l].bytes += own[l].bytes;
          now[l].flops += own[l].flops;
          more[l].bytes += ownMore[l].bytes;
          now[l].groupOps.push_back(member.op);
        }
      }
      if (firstLaunches) {
        firstLaunchesUntil = entry + size_t(group);
        firstLaunchesLeader = &s;
      } else {
        entry += size_t(group) - 1;
      }
    }
    // A GEMM with the bias-gradient epilogue computes the next entry (its
    // sum_to) too: "#26+27", that entry's launches not run (the runtime's
    // fallback where cuBLASLt declines, which the report does not predict).
    if (s.launches.size() == 1 && s.launches[0].gemm &&
        s.launches[0].gemm->epilogue == GemmEpilogue::BiasGrad && entry + 1 < steps->size()) {
      now[0].groupOps = {s.op, (*steps)[entry + 1].op};
      ++entry;
    }
    for (size_t l = 0; l < now.size(); ++l) {
      // By bytes: the FLOPs of a small kernel (a sum's finish) are a share
      // of the op's, which may grow while the kernel's own work does not.
      now[l].growsWithBatch = more[l].bytes > now[l].bytes;
      applyModel(&op, now[l], batch, resources, machine);
      step.launches.push_back(std::move(now[l]));
    }
  }
  std::vector<LaunchEstimate> optimizer = optimizerLaunches(train, trainableElements(train));
  // The bf16 copy of the parameters, when the package keeps one: written
  // by AdamW as it updates (2 bytes more a trainable element), else
  // rewritten after the update (f32 read, bf16 written).
  auto planned = [&](const char *name) {
    return llvm::any_of(plan.kernels, [&](const GpuKernelSpec &k) { return k.name == name; });
  };
  if (planned(stringrt::kAdamWBf16Kernel)) {
    for (LaunchEstimate &e : optimizer)
      if (e.kernel == "pe_adamw") {
        e.kernel = stringrt::kAdamWBf16Kernel;
        e.bytes += 2.0 * double(trainableElements(train));
      }
  } else if (const KernelDef *copy = findKernelDef(stringrt::kBf16ParamsKernel);
             copy && planned(stringrt::kBf16ParamsKernel)) {
    int64_t n = 0;
    for (pe::ParameterOp param : train.getOps<pe::ParameterOp>())
      n += param.getTensorType().getNumElements();
    LaunchEstimate e;
    e.program = "optimizer";
    e.opName = "optimizer";
    e.kernel = stringrt::kBf16ParamsKernel;
    e.threadsPerBlock = copy->spec.blockX * copy->spec.blockY;
    e.blocks = stringrt::cudaRuleGridX(copy->spec.grid, copy->spec.blockX, copy->spec.blockY, n, 0);
    e.bytes = 6.0 * double(n);
    optimizer.push_back(std::move(e));
  }
  for (LaunchEstimate &e : optimizer) {
    e.readStreams = e.kernel == "pe_adamw" || e.kernel == stringrt::kAdamWBf16Kernel ? 4
                    : e.kernel == "pe_sgd"                                          ? 3
                                                                                    : 1;
    applyModel(nullptr, e, batch, resources, machine);
    step.launches.push_back(std::move(e));
  }
  for (const LaunchEstimate &e : step.launches) {
    step.boundSeconds += e.boundSeconds;
    step.predictedSeconds += e.predictedSeconds;
  }
  step.augmentation = augmentationLaunch(train, plan, batch);
  if (step.augmentation) {
    step.augmentation->readStreams = 2;
    applyModel(nullptr, *step.augmentation, batch, resources, machine);
  }
  return step;
}

} // namespace stringc::cudagen
