// Executor adapters of the gather ops still outside the op library
// (pair_gather and pair_gather_grad): each reads the op's attributes and
// calls its reference kernel (GatherKernels.h). The kernels are a copy and
// a scatter-add, memory-bound, so the fast kernel set uses them as they are.
#include "execution/Executor.h"

#include "stringrt/reference/GatherKernels.h"

namespace stringrt::detail {
namespace {

void runPairGather(const OpContext &c) {
  ref::pairGather<float>(c.in(0), c.op().getInts("index"), c.out(0));
}

void runPairGatherGrad(const OpContext &c) {
  ref::pairGatherGrad<float>(c.in(0), c.op().getInts("index"), c.out(0));
}

} // namespace

void addGatherOps(OpTable &table) {
  table[OpCode::PairGather] = {runPairGather};
  table[OpCode::PairGatherGrad] = {runPairGatherGrad};
}

} // namespace stringrt::detail
