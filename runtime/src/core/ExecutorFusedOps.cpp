// Executor adapters of the hoisted and fused ops (PEFusedOps.td: rope_table,
// rope_apply, cayley_weight, rope_attention, linear_gelu, linear_residual
// and their backward ops): the reference adapters (addFusedOps) and the
// fast ones that replace them in KernelSet::Fast (addFastFusedOps). The
// defaulted attributes (`inverse`, `approximate`) are optional in the
// manifest and read with their defaults.
#include "Executor.h"

#include "../reference/KernelChecks.h"
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
void checkRopeApply(const OpContext &c) {
  ref::checks::ropeApply<float>(c.in(0), c.in(1), c.out(0));
}
void checkRopeApplyGradTable(const OpContext &c) {
  ref::checks::ropeApplyGradTable<float>(c.in(0), c.in(1), c.out(0));
}
void checkRopeAttention(const OpContext &c) {
  ref::checks::ropeAttention<float>(c.in(0), c.in(1), c.in(2), c.in(3), c.op().getInt("heads"),
                                    fusedMask(c), c.out(0));
}
void checkRopeAttentionGrad(const OpContext &c) {
  ref::checks::ropeAttentionGrad<float>(c.in(0), c.in(1), c.in(2), c.in(3), c.in(4),
                                        c.op().getInt("heads"), fusedMask(c), c.out(0), c.out(1),
                                        c.out(2));
}

void runRopeTable(const OpContext &c) { ref::ropeTable<float>(c.in(0), c.in(1), c.out(0)); }

void runRopeApply(const OpContext &c) {
  ref::ropeApply<float>(c.in(0), c.in(1), c.boolOr("inverse", false), c.out(0));
}

void runCayleyWeight(const OpContext &c) { ref::cayleyWeight<float>(c.in(0), c.out(0)); }

void runRopeAttention(const OpContext &c) {
  ref::ropeAttention<float>(c.in(0), c.in(1), c.in(2), c.in(3), c.op().getInt("heads"),
                            c.op().getFloat("scale"), fusedMask(c), c.out(0));
}

void runLinearGelu(const OpContext &c) {
  ref::linearGelu<float>(c.in(0), c.in(1), c.optIn(2), c.boolOr("approximate", false), c.out(0),
                         c.out(1));
}

void runLinearResidual(const OpContext &c) {
  ref::linearResidual<float>(c.in(0), c.in(1), c.in(2), c.optIn(3), c.out(0));
}

void runRopeTableGrad(const OpContext &c) {
  ref::ropeTableGrad<float>(c.in(0), c.in(1), c.in(2), c.out(0));
}

void runRopeApplyGradTable(const OpContext &c) {
  ref::ropeApplyGradTable<float>(c.in(0), c.in(1), c.boolOr("inverse", false), c.out(0));
}

void runCayleyWeightGrad(const OpContext &c) {
  ref::cayleyWeightGrad<float>(c.in(0), c.in(1), c.out(0));
}

void runRopeAttentionGrad(const OpContext &c) {
  ref::ropeAttentionGrad<float>(c.in(0), c.in(1), c.in(2), c.in(3), c.in(4),
                                c.op().getInt("heads"), c.op().getFloat("scale"), fusedMask(c),
                                c.out(0), c.out(1), c.out(2));
}

//===----------------------------------------------------------------------===//
// Fast
//===----------------------------------------------------------------------===//

void runFastRopeApply(const OpContext &c) {
  cpu::ropeApply(c.in(0), c.in(1), c.boolOr("inverse", false), c.out(0));
}

void runFastRopeApplyGradTable(const OpContext &c) {
  cpu::ropeApplyGradTable(c.in(0), c.in(1), c.boolOr("inverse", false), c.out(0));
}

void runFastRopeAttention(const OpContext &c) {
  cpu::ropeAttention(c.in(0), c.in(1), c.in(2), c.in(3), c.op().getInt("heads"),
                     c.op().getFloat("scale"), fusedMask(c), c.out(0));
}

void runFastRopeAttentionGrad(const OpContext &c) {
  cpu::ropeAttentionGrad(c.in(0), c.in(1), c.in(2), c.in(3), c.in(4), c.op().getInt("heads"),
                         c.op().getFloat("scale"), fusedMask(c), c.out(0), c.out(1), c.out(2));
}

void runFastLinearGelu(const OpContext &c) {
  cpu::linearGelu(c.in(0), c.in(1), c.optIn(2), c.boolOr("approximate", false), c.out(0),
                  c.out(1));
}

void runFastLinearResidual(const OpContext &c) {
  cpu::linearResidual(c.in(0), c.in(1), c.in(2), c.optIn(3), c.out(0));
}

} // namespace

void addFusedOps(OpTable &table) {
  table["pe.rope_table"] = {runRopeTable, 2, 2};
  table["pe.rope_apply"] = {runRopeApply, 2, 2, 1, 1, checkRopeApply};
  table["pe.cayley_weight"] = {runCayleyWeight, 1, 1};
  table["pe.rope_attention"] = {runRopeAttention, 4, 4, 1, 1, checkRopeAttention};
  table["pe.linear_gelu"] = {runLinearGelu, 2, 3, 2, 2};
  table["pe.linear_residual"] = {runLinearResidual, 3, 4};
  table["pe.rope_table_grad"] = {runRopeTableGrad, 3, 3};
  table["pe.rope_apply_grad_table"] = {runRopeApplyGradTable, 2, 2, 1, 1,
                                       checkRopeApplyGradTable};
  table["pe.cayley_weight_grad"] = {runCayleyWeightGrad, 2, 2};
  table["pe.rope_attention_grad"] = {runRopeAttentionGrad, 5, 5, 3, 3, checkRopeAttentionGrad};
}

void addFastFusedOps(OpTable &table) {
  table.at("pe.rope_apply").run = runFastRopeApply;
  table.at("pe.rope_apply_grad_table").run = runFastRopeApplyGradTable;
  table.at("pe.rope_attention").run = runFastRopeAttention;
  table.at("pe.rope_attention_grad").run = runFastRopeAttentionGrad;
  table.at("pe.linear_gelu").run = runFastLinearGelu;
  table.at("pe.linear_residual").run = runFastLinearResidual;
}

} // namespace stringrt::detail
