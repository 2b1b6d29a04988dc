// Executor adapters of the hoisted and fused ops (PEFusedOps.td:
// rope_attention and its backward op; the fused ops of the op library,
// runtime/src/ops, rope_table and rope_apply among them, register
// themselves): the reference adapters (addFusedOps) and the fast ones that
// replace them in KernelSet::Fast (addFastFusedOps).
#include "execution/Executor.h"

#include "../reference/KernelChecks.h"
#include "stringrt/cpu/FastKernels.h"
#include "stringrt/cpu/FusedKernels.h"
#include "stringrt/reference/FusedKernels.h"

namespace stringrt::detail {
namespace {

// pe.rope_attention(_grad) take the mask of pe.attention, without skip.
ref::AttentionMask fusedMask(const OpContext &c) {
  ref::AttentionMask mask = attentionMask(c);
  if (mask == ref::AttentionMask::Skip)
    c.fail("mask 'skip' is not supported (use pe.attention)");
  return mask;
}

//===----------------------------------------------------------------------===//
// Reference
//===----------------------------------------------------------------------===//

// The argument checks of the reference kernels of the ops stringc generates
// kernels for (KernelChecks.h).
void checkRopeAttention(const OpContext &c) {
  ref::checks::ropeAttention<float>(c.in(0), c.in(1), c.in(2), c.in(3), c.op().getInt("heads"),
                                    fusedMask(c), c.out(0));
  if (ref::OptionalOutput<float> lse = attentionLse(c))
    ref::checkShape("rope_attention: lse", *lse,
                    {c.in(0).dim(0), c.op().getInt("heads"), c.in(0).dim(1)});
}
// rope_attention_grad's operands: q, k, v, table, y, lse, dy. The CPU
// kernels recompute P from the rotated tiles and do not read y and lse.
constexpr size_t kRopeGradY = 4, kRopeGradDy = 6;
void checkRopeAttentionGrad(const OpContext &c) {
  checkAttentionSaved(c, kRopeGradY);
  ref::checks::ropeAttentionGrad<float>(c.in(0), c.in(1), c.in(2), c.in(3), c.in(kRopeGradDy),
                                        c.op().getInt("heads"), fusedMask(c), c.out(0), c.out(1),
                                        c.out(2));
}

void runRopeAttention(const OpContext &c) {
  ref::ropeAttention<float>(c.in(0), c.in(1), c.in(2), c.in(3), c.op().getInt("heads"),
                            c.op().getFloat("scale"), fusedMask(c), c.out(0), attentionLse(c));
}

void runRopeAttentionGrad(const OpContext &c) {
  checkAttentionSaved(c, kRopeGradY);
  ref::ropeAttentionGrad<float>(c.in(0), c.in(1), c.in(2), c.in(3), c.in(kRopeGradDy),
                                c.op().getInt("heads"), c.op().getFloat("scale"), fusedMask(c),
                                c.out(0), c.out(1), c.out(2));
}

//===----------------------------------------------------------------------===//
// Fast
//===----------------------------------------------------------------------===//

void runFastRopeAttention(const OpContext &c) {
  cpu::ropeAttention(c.in(0), c.in(1), c.in(2), c.in(3), c.op().getInt("heads"),
                     c.op().getFloat("scale"), fusedMask(c), c.out(0), attentionLse(c));
}

void runFastRopeAttentionGrad(const OpContext &c) {
  checkAttentionSaved(c, kRopeGradY);
  cpu::ropeAttentionGrad(c.in(0), c.in(1), c.in(2), c.in(3), c.in(kRopeGradDy),
                         c.op().getInt("heads"),
                         c.op().getFloat("scale"), fusedMask(c), c.out(0), c.out(1), c.out(2));
}

} // namespace

void addFusedOps(OpTable &table) {
  table[OpCode::RopeAttention] = {runRopeAttention, checkRopeAttention};
  table[OpCode::RopeAttentionGrad] = {runRopeAttentionGrad, checkRopeAttentionGrad};
}

void addFastFusedOps(OpTable &table) {
  table[OpCode::RopeAttention].run = runFastRopeAttention;
  table[OpCode::RopeAttentionGrad].run = runFastRopeAttentionGrad;
}

} // namespace stringrt::detail
