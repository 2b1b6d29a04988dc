//===- AttentionF32.h - the f32 attention kernels' files share -*- C++ -*-===//
//
// Private to compiler/lib/CudaGen. The f32 FMA attention kernels live in four
// files: AttentionKernels.cpp (the FlashAttention-2 kernels, plain, RoPE and
// relative, and the lowering of the four attention ops),
// RelativeAttentionKernels.cpp (what only the relative encoding needs: the
// rotation of a staged row by R_ij, the drel sum, pe_rel_layout),
// RelativeAttentionRows.cpp (the relative attention with the batch x head
// rows across a warp, which the lowerings prefer) and
// SkipAttentionKernels.cpp (`skip` masks: gathers, no softmax). This header
// is what the first takes from the other three.
//
//===----------------------------------------------------------------------===//
#ifndef STRINGC_CUDAGEN_ATTENTIONF32_H
#define STRINGC_CUDAGEN_ATTENTIONF32_H

#include "AttentionCommon.h"

#include <optional>
#include <vector>

namespace stringc::cudagen::attention {

/// a * b + c as one llvm.fma (f32, one rounding).
mlir::Value fma(KernelBuilder &k, mlir::Value a, mlir::Value b, mlir::Value c);

//===----------------------------------------------------------------------===//
// Relative attention (RelativeAttentionKernels.cpp)
//===----------------------------------------------------------------------===//

/// The head dimensions with relative-attention kernels (vit_generators).
inline constexpr int64_t kRelHeadDims[] = {16};

/// The relative rotation R = rel[i, j] applied to row c of a staged tile
/// (R t, or R^T t when `transpose`), reading pe_rel_layout's copy of rel
/// with the thread's own token (`own`) fastest; `other` is the token of the
/// tile row.
std::vector<mlir::Value> rotateTileRow(HeadBlock &g, mlir::Value rel, mlir::Value own,
                                       mlir::Value other, mlir::Value tile, mlir::Value c,
                                       bool transpose);

/// pe_rel_attention_grad_drel_d<dh>: drel from the dQ kernel's dS
/// [B H, T, T], or pe_rel_attention_rows_grad_drel_d<dh> from dS [T, T, B H]
/// (`pairMajor`, the rows kernels' dQ).
KernelDef relGradKernel(int64_t dh, bool pairMajor);
std::string relGradKernelName(int64_t dh, bool pairMajor);
/// pe_rel_layout: rel with the token of the kernels' threads fastest.
KernelDef relLayoutKernel();

/// rel [T, T, Dh, Dh] for q of this shape, a head dim with rel kernels and a
/// mask other than skip.
bool relFits(const AttentionShape &s, mlir::Type rel, mlir::pe::MaskKind mask);

//===----------------------------------------------------------------------===//
// Relative attention over batch x head rows (RelativeAttentionRows.cpp)
//===----------------------------------------------------------------------===//

/// The head dimensions of the pe_rel_attention_rows_* kernels.
inline constexpr int64_t kRelRowsHeadDims[] = {16, 32};

/// pe_rel_attention_rows[_grad_dkdv|_grad_dq]_d<dh> and their drel kernel.
void appendRelRowsKernels(std::vector<KernelDef> &defs);

/// Whether the rows kernels serve rel [T, T, Dh, Dh] for q of this shape
/// and this mask.
bool relRowsFit(const AttentionShape &s, mlir::Type rel, mlir::pe::MaskKind mask);

/// The launches of pe.attention (`op`) and of pe.attention_grad with rel on
/// the rows kernels; `sizes` the sizeArgs.
OpSteps relRowsForward(mlir::Operation &op, const AttentionShape &s,
                       const std::vector<LaunchArg> &sizes);
OpSteps relRowsGrad(const AttentionShape &s, const std::vector<LaunchArg> &sizes);

//===----------------------------------------------------------------------===//
// Skip masks (SkipAttentionKernels.cpp)
//===----------------------------------------------------------------------===//

/// pe_attention_skip, pe_attention_skip_lse and pe_attention_skip_grad.
void appendSkipKernels(std::vector<KernelDef> &defs);

/// The launches of a pe.attention / pe.attention_grad with a skip mask and
/// no rel (`s` its shape), or none without a skip_base.
std::optional<OpSteps> lowerSkipAttention(mlir::pe::AttentionOp attention,
                                          const AttentionShape &s);
std::optional<OpSteps> lowerSkipAttentionGrad(mlir::pe::AttentionGradOp grad,
                                              const AttentionShape &s);

} // namespace stringc::cudagen::attention

#endif // STRINGC_CUDAGEN_ATTENTIONF32_H
