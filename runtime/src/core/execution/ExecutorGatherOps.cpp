// Executor adapters of the gather ops (skip_gather, offset_table,
// pair_gather and their backward ops): each reads the op's attributes and
// calls its reference kernel (GatherKernels.h). The kernels are copies and
// scatter-adds, memory-bound, so the fast kernel set uses them as they are.
#include "execution/Executor.h"

#include "stringrt/reference/GatherKernels.h"

namespace stringrt::detail {
namespace {

void runSkipGather(const OpContext &c) {
  ref::skipGather<float>(c.in(0), c.op().getInt("heads"), c.op().getInt("skip_base"), c.out(0));
}

void runSkipGatherGrad(const OpContext &c) {
  ref::skipGatherGrad<float>(c.in(0), c.op().getInt("heads"), c.op().getInt("skip_base"),
                             c.out(0));
}

void runOffsetTable(const OpContext &c) {
  ref::offsetTable<float>(c.op().getInts("offsets"), c.out(0));
}

void runPairGather(const OpContext &c) {
  ref::pairGather<float>(c.in(0), c.op().getInts("index"), c.out(0));
}

void runPairGatherGrad(const OpContext &c) {
  ref::pairGatherGrad<float>(c.in(0), c.op().getInts("index"), c.out(0));
}

} // namespace

void addGatherOps(OpTable &table) {
  table[OpCode::SkipGather] = {runSkipGather};
  table[OpCode::SkipGatherGrad] = {runSkipGatherGrad};
  table[OpCode::OffsetTable] = {runOffsetTable};
  table[OpCode::PairGather] = {runPairGather};
  table[OpCode::PairGatherGrad] = {runPairGatherGrad};
}

} // namespace stringrt::detail
