//===- BiasGradients.cpp - bias gradients as the weight GEMM's epilogue ---===//
//
// BiasGradients.h. The runtime runs a GEMM with the epilogue as one cuBLASLt
// matmul (CUBLASLT_EPILOGUE_BGRADA) and skips the sum_to's entry, or runs
// the plain GEMM and the sum_to's own column sum where cuBLASLt cannot; the
// package loader checks the pairing (CudaSectionSteps.cpp,
// checkBiasGradients).
//
//===----------------------------------------------------------------------===//
#include "BiasGradients.h"
#include "KernelBuilder.h"

#include "stringc/Dialect/PE/PEOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;

namespace stringc::cudagen {
namespace {

/// Steps that are one GEMM launch alone, of the form the epilogue takes;
/// else null.
GemmCall *fusable(OpSteps &steps) {
  if (steps.launches.size() != 1 || !steps.launches[0].gemm || !steps.scratchBytes.empty())
    return nullptr;
  GemmCall &g = *steps.launches[0].gemm;
  if (!(g.count == BatchAffine::fixed(1)) || g.epilogue != GemmEpilogue::None || g.addend ||
      g.beta != 0.0f || g.groupSize != 1 || g.b.kind != LaunchArgKind::Operand ||
      g.c.kind != LaunchArgKind::Result)
    return nullptr;
  return &g;
}

/// The number of steps entries a group starting at `steps` computes (1: none).
int64_t groupLength(const OpSteps &steps) {
  int64_t n = 1;
  for (const Launch &l : steps.launches) {
    n = std::max(n, l.groupSize);
    if (l.gemm)
      n = std::max(n, l.gemm->groupSize);
  }
  return n;
}

bool onlyFreeOpsBetween(Operation *first, Operation *last) {
  if (first->getBlock() != last->getBlock())
    return false;
  for (Operation *op = first->getNextNode(); op && op != last; op = op->getNextNode())
    if (!isa<pe::GetParamOp, arith::ConstantOp>(op))
      return false;
  return true;
}

} // namespace

int64_t fuseBiasGradients(const std::vector<Operation *> &ops, std::vector<OpSteps> &steps,
                          const llvm::DenseMap<Value, int64_t> &ids,
                          const std::vector<bool> &bf16) {
  int64_t fused = 0;
  for (size_t e = 0; e + 1 < steps.size(); ++e) {
    if (int64_t n = groupLength(steps[e]); n > 1) { // a group and its members
      e += size_t(n) - 1;
      continue;
    }
    auto weight = dyn_cast<pe::LinearGradWeightOp>(ops[e]);
    auto sum = dyn_cast<pe::SumToOp>(ops[e + 1]);
    GemmCall *g = weight && sum ? fusable(steps[e]) : nullptr;
    if (!g || groupLength(steps[e + 1]) > 1 || steps[e + 1].launches.empty() ||
        !onlyFreeOpsBetween(ops[e], ops[e + 1]))
      continue;
    // The GEMM's B is dY, which the sum_to sums to [n].
    Value dy = weight->getOperand(unsigned(g->b.index));
    auto result = dyn_cast<RankedTensorType>(sum->getResult(0).getType());
    if (sum->getOperand(0) != dy || !result || result.getRank() != 1 ||
        !result.hasStaticShape() || lastDimension(dy.getType()) != result.getDimSize(0) ||
        !(g->n == BatchAffine::fixed(result.getDimSize(0))))
      continue;
    int64_t c = ids.lookup(weight->getResult(unsigned(g->c.index)));
    int64_t bias = ids.lookup(sum->getResult(0));
    if (bf16[size_t(c)] != bf16[size_t(bias)])
      continue;
    g->epilogue = GemmEpilogue::BiasGrad;
    g->bias = LaunchArg::result(0);
    ++fused;
    ++e; // the sum_to's entry
  }
  return fused;
}

ConcurrentOps biasGradientRanges(const std::vector<OpSteps> &steps) {
  ConcurrentOps ranges;
  for (size_t e = 0; e + 1 < steps.size(); ++e)
    for (const Launch &l : steps[e].launches)
      if (l.gemm && l.gemm->epilogue == GemmEpilogue::BiasGrad)
        ranges.push_back({steps[e].op, steps[e + 1].op});
  return ranges;
}

} // namespace stringc::cudagen
