//===- AttentionCommon.h - what the f32 and MMA attention kernels share -*- C++ -*-===//
//
// Private to compiler/lib/CudaGen. AttentionKernels.cpp (f32 FMA) and
// AttentionMmaKernels.cpp (bf16 tensor cores) implement the same FlashAttention-2
// scheme with the same kernel interface: three kernels per op (the forward,
// which also writes each query row's log-sum-exp, and for the gradient dK/dV
// and dQ, which read it), the same parameters in the same order, a grid of
// (B * H, row tiles), and a gradient that starts with the row sums
// delta_i = dy_i . y_i of a small kernel (deltaKernel). This file holds that
// interface once:
// - kernel side: the kernel kinds, names, parameter lists and the op a kernel
//   serves, and the named-argument lookup of a kernel body;
// - lowering side: the attention shape of q, the RoPE table check, the
//   trailing size arguments, the grid, where the forward's lse goes, and the
//   three backward launches.
//
//===----------------------------------------------------------------------===//
#ifndef STRINGC_CUDAGEN_ATTENTIONCOMMON_H
#define STRINGC_CUDAGEN_ATTENTIONCOMMON_H

#include "OpKernelUtil.h"

#include "stringc/Dialect/PE/PEOps.h"

#include "llvm/ADT/STLFunctionalExtras.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace stringc::cudagen::attention {

//===----------------------------------------------------------------------===//
// Kernel side
//===----------------------------------------------------------------------===//

/// The kernels of an attention op: the forward (y and lse), then the
/// gradient's dK/dV and dQ (after the delta kernel).
enum class Kind { Forward, DkDv, Dq };
/// How positions enter the scores: not at all, RoPE on q and k (a table), or
/// a relative rotation per (query, key) (`rel`; f32 kernels only).
enum class Enc { Plain, Rope, Rel };

/// The head dimensions with kernels.
inline constexpr int64_t kHeadDims[] = {16, 32, 64, 128};
/// Static shared memory a kernel may use; past it (head dim 128) a kernel's
/// shared arrays live in dynamic shared memory (GpuKernelSpec::
/// dynamicSharedBytes), up to stringrt::kMaxDynamicSharedBytes.
inline constexpr int64_t kSharedLimitBytes = 48 * 1024;

using ParamList = std::vector<std::pair<std::string, ParamKind>>;

/// `family` (e.g. "pe_rope_attention") + the kind's suffix + "_d<dh>".
std::string kernelName(llvm::StringRef family, Kind kind, int64_t dh);

/// The parameters of a kernel, in order: its outputs (y, lse; dk, dv; dq
/// [, ds for Rel]), q, k, v, [table | rel], [dy, lse, delta], then tokens,
/// width, heads, lookahead (i64) and scale (f32). lse and delta are f32
/// [B, H, T] (index bh * T + i).
ParamList kernelParams(Kind kind, Enc enc);

/// The pe op a kernel serves: pe.[rope_]attention[_grad].
const char *servedOp(Kind kind, bool rope);

/// A kernel body's arguments by parameter name.
struct NamedArgs {
  KernelBuilder &k;
  ParamList params;
  mlir::Value operator()(llvm::StringRef name) const;
  /// The argument `name`, or a null Value when the kernel has no such
  /// parameter (`table` of the RoPE kernels, `rel` of the relative ones).
  mlir::Value optional(llvm::StringRef name) const;
};

/// What every attention block knows (one block per batch * heads + head
/// along grid x): the sizes, its (batch, head) and its thread. The f32 and
/// MMA kernels extend it with their own row layout.
struct HeadBlock {
  KernelBuilder &k;
  int64_t dh;
  mlir::Value tokens, width, heads, lookahead, scale;
  mlir::Value bh, batchHeads, head, batch; // blockIdx.x = batch * heads + head; gridDim.x
  mlir::Value thread;                      // threadIdx.x

  /// Element index of feature d = 0 of `token`'s head slice ([B, T, D] tensors).
  mlir::Value at(mlir::Value token) const;
  /// Index of (cos, sin) of pair 0 of the head in the RoPE table [T, D/2, 2]
  /// at `token`: token * D + h * Dh (no batch: one table for every sequence).
  mlir::Value tableAt(mlir::Value token) const;
  /// `token` clamped into [0, T) (loads stay in bounds for padding rows).
  mlir::Value clamp(mlir::Value token) const;
  mlir::Value inRange(mlir::Value token) const;
};

/// The HeadBlock of the kernel being built (reads blockIdx.x, gridDim.x,
/// threadIdx.x).
HeadBlock makeHeadBlock(KernelBuilder &k, const NamedArgs &args, int64_t dh);

/// The forward, dK/dV and dQ bodies of a kernel family.
struct KindBodies {
  void (*forward)(KernelBuilder &k, const NamedArgs &args, int64_t dh);
  void (*dkdv)(KernelBuilder &k, const NamedArgs &args, int64_t dh);
  void (*dq)(KernelBuilder &k, const NamedArgs &args, int64_t dh);
};

/// The kernel `name` of this kind, encoding and head dim: the parameters of
/// kernelParams, the op of servedOp, an explicit grid with blocks of
/// `threads`, built by the body of its kind. A fatal error when
/// `sharedBytes` exceeds the static shared-memory limit.
KernelDef kindKernel(std::string name, Kind kind, Enc enc, int64_t dh, int64_t threads,
                     int64_t sharedBytes, const KindBodies &bodies);

/// The gradient's first kernel: delta[bh * T + i] = dy_i . y_i (= sum_j
/// P_ij dP_ij) for every (batch, head, query), one thread per row, f32 sums
/// over the head dim in order. `roundDy`, when given, rounds each dy element
/// first (the MMA kernels' dP = dO V^T reads dO in bf16, and dS = P (dP -
/// delta) cancels: delta must see the same dO). Parameters: delta, y, dy,
/// rows (= B * H * T), tokens, width, heads; grid `elements`.
KernelDef deltaKernel(std::string name, llvm::StringRef servedOp,
                      mlir::Value (*roundDy)(KernelBuilder &k, mlir::Value x));

//===----------------------------------------------------------------------===//
// Lowering side
//===----------------------------------------------------------------------===//

/// q [B, T, D] with static T and D, `heads` dividing D.
struct AttentionShape {
  BatchAffine batch;
  int64_t tokens = 0, width = 0, heads = 0, dh = 0;
};

std::optional<AttentionShape> attentionShape(mlir::Type q, int64_t heads);

/// A RoPE table [T, D/2, 2] for q of this shape, and an even head dim.
bool ropeTableFits(const AttentionShape &s, mlir::Type table);

/// The trailing (tokens, width, heads, lookahead, scale) arguments: a query
/// sees the keys up to `lookahead` tokens after its own, none for causal.
std::vector<LaunchArg> sizeArgs(const AttentionShape &s, mlir::pe::MaskKind mask, double scale);

/// Grid (B * H, ceil(T / rowsPerBlock)): one block per (batch, head, row tile).
ExplicitGrid rowTileGrid(const AttentionShape &s, int64_t rowsPerBlock);

/// `a` followed by `b`.
std::vector<LaunchArg> concat(std::vector<LaunchArg> a, const std::vector<LaunchArg> &b);

/// The launch of the kernel of `kind` with these arguments (name and grid
/// are the kernel family's).
using KindLaunch = llvm::function_ref<Launch(Kind kind, std::vector<LaunchArg> args)>;

/// The launch of pe_rel_layout: rel [T, T, Dh, Dh] (`from`) copied into
/// `to` with the query's token fastest, [j, Dh, Dh, i], for the kernels with
/// a thread per query, or with the key's, [i, Dh, Dh, j] (`keyFastest`), for
/// dK/dV: their loads of R_ij are then coalesced across a warp.
Launch relLayoutLaunch(const AttentionShape &s, LaunchArg from, LaunchArg to, bool keyFastest);
/// The bytes of one such copy (T * T * Dh * Dh floats).
BatchAffine relLayoutBytes(const AttentionShape &s);

/// Where the forward writes its log-sum-exp: the op's second result when
/// it has one (@gradients), else a scratch buffer of B * H * T floats
/// added to `steps` (@forward: nothing reads it).
LaunchArg forwardLse(mlir::Operation &op, const AttentionShape &s, OpSteps &steps);

/// The backward launches: `deltaKernel` (the family's deltaKernel) into
/// scratch 0 (B * H * T floats), then dK/dV and dQ reading the forward's lse
/// operand and delta; for Rel, dQ also writes dS into scratch 1 (B * H * T *
/// T floats), and rel's two layouts (relLayoutLaunch) go to scratch 2 (query
/// fastest) and 3 (key fastest) first. Operands q, k, v, [table,] y, lse,
/// dy[, rel]; results dq, dk, dv. The sizes are the sizeArgs.
OpSteps gradSteps(Enc enc, const AttentionShape &s, const std::vector<LaunchArg> &sizes,
                  llvm::StringRef deltaKernel, KindLaunch launch);

} // namespace stringc::cudagen::attention

#endif // STRINGC_CUDAGEN_ATTENTIONCOMMON_H
