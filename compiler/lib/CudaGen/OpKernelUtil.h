//===- OpKernelUtil.h - helpers shared by the kernel families -*- C++ -*-===//
//
// Private to compiler/lib/CudaGen. Shared by the kernel families (position
// tables, rotary, rotation, gather, token, Cayley, generator, optimizer,
// attention):
// - kernel-side helpers KernelBuilder lacks: i32 loads, f64 arithmetic (the
//   constant tables are evaluated in f64 and rounded once, as the reference
//   kernels do), integer and f32 comparisons, selects, bit operations, exp
//   and log, warp maxima, barriers and static shared-memory arrays;
// - the deterministic column sum (out[c] = sum_r f(r, c)), one launch: a
//   partials kernel over (column group of 32, chunk of rows) writes chunks x
//   cols partial sums to a scratch buffer; the block that takes the last
//   ticket of its column group (an atomic counter, LaunchArg::tickets) adds
//   the group's partials in chunk order, one warp per column with a fixed
//   butterfly, and resets the ticket to 0. Which block finishes depends on
//   scheduling, the additions and their order do not: the same bits every
//   run. The chunk count depends on the shape only and gives the launch at
//   least kReductionBlocks blocks, so a sum over batch x tokens fills the GPU;
// - lowering-side helpers: static shapes, BatchAffine arithmetic, one-launch
//   steps.
//
// Integer parameters carry their natural values, 0 included (select_token's
// index, skip_base, special). The runtime skips a launch only when its grid
// has no block (KernelSet::launch: a grid rule's size of 0, an explicit grid
// with a 0), so a kernel must be correct for any other i64 argument being 0:
// loops over it run no iteration, and nothing divides by an argument that may
// be 0 while the grid is not empty.
//
//===----------------------------------------------------------------------===//
#ifndef STRINGC_CUDAGEN_OPKERNELUTIL_H
#define STRINGC_CUDAGEN_OPKERNELUTIL_H

#include "KernelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace stringc::cudagen {

//===----------------------------------------------------------------------===//
// Kernel side
//===----------------------------------------------------------------------===//

/// The parameter kinds of the kernel specs' tables, by their short names.
namespace param_kinds {
inline constexpr ParamKind P = ParamKind::Ptr, I = ParamKind::I64, F = ParamKind::F32;
} // namespace param_kinds

/// Row kernels (norms, softmax rows): one warp of kWarp lanes per row,
/// kRowsPerBlock rows per block (blockDim (kWarp, kRowsPerBlock)).
inline constexpr int64_t kWarp = 32;
inline constexpr int64_t kRowsPerBlock = 4;

/// for (i = threadIdx.x; i < n; i += blockDim.x) body(i)
void forBlockStride(KernelBuilder &k, mlir::Value n, const std::function<void(mlir::Value)> &body);

/// `ptr[index]` of an i32 buffer (ids, labels), sign-extended to i64.
mlir::Value loadI32AsI64(KernelBuilder &k, mlir::Value ptr, mlir::Value index);

mlir::Value f64(KernelBuilder &k, double value);
/// i64 -> f64, f32 -> f64, f64 -> f32 (round to nearest).
mlir::Value i64ToF64(KernelBuilder &k, mlir::Value integer);
mlir::Value f32ToF64(KernelBuilder &k, mlir::Value value);
mlir::Value f64ToF32(KernelBuilder &k, mlir::Value value);

/// f64 elements of a buffer: the address of `ptr[index]` for `type`, and
/// f64 loads and stores (`index` is i64).
mlir::Value elementAddress(KernelBuilder &k, mlir::Type type, mlir::Value ptr, mlir::Value index);
mlir::Value loadF64(KernelBuilder &k, mlir::Value ptr, mlir::Value index);
void storeF64(KernelBuilder &k, mlir::Value value, mlir::Value ptr, mlir::Value index);
/// f64 math through libdevice: __nv_sqrt (sqrt.rn.f64, correctly rounded),
/// __nv_cos, __nv_sin, __nv_pow.
mlir::Value sqrtF64(KernelBuilder &k, mlir::Value x);
mlir::Value cosF64(KernelBuilder &k, mlir::Value x);
mlir::Value sinF64(KernelBuilder &k, mlir::Value x);
mlir::Value powF64(KernelBuilder &k, mlir::Value x, mlir::Value y);

mlir::Value cmpI(KernelBuilder &k, mlir::arith::CmpIPredicate predicate, mlir::Value a,
                 mlir::Value b);
mlir::Value select(KernelBuilder &k, mlir::Value cond, mlir::Value a, mlir::Value b);
/// Unsigned remainder and quotient of non-negative i64 values.
mlir::Value remU(KernelBuilder &k, mlir::Value a, mlir::Value b);
mlir::Value divU(KernelBuilder &k, mlir::Value a, mlir::Value b);
mlir::Value minI(KernelBuilder &k, mlir::Value a, mlir::Value b);
mlir::Value andI(KernelBuilder &k, mlir::Value a, mlir::Value b);
/// 0 <= v < limit (i64): an index read from a buffer, checked.
mlir::Value inRange(KernelBuilder &k, mlir::Value v, mlir::Value limit);
/// Logical shift right, shift left and bitwise or of integers.
mlir::Value shrU(KernelBuilder &k, mlir::Value a, mlir::Value b);
mlir::Value shl(KernelBuilder &k, mlir::Value a, mlir::Value b);
mlir::Value orI(KernelBuilder &k, mlir::Value a, mlir::Value b);
/// f32 maximum (NaN-propagating), exp, log and comparison.
mlir::Value maxF(KernelBuilder &k, mlir::Value a, mlir::Value b);
mlir::Value expF(KernelBuilder &k, mlir::Value x);
mlir::Value logF(KernelBuilder &k, mlir::Value x);
mlir::Value cmpF(KernelBuilder &k, mlir::arith::CmpFPredicate predicate, mlir::Value a,
                 mlir::Value b);
/// A quiet NaN (f32): what a kernel writes where the reference would throw
/// (an id or label out of range), so the error shows in the loss.
mlir::Value nanF32(KernelBuilder &k);

/// The maximum of `value` over the 32 lanes (xor butterfly; every lane gets
/// it). All 32 lanes must be active.
mlir::Value warpMax(KernelBuilder &k, mlir::Value value);

/// __syncthreads(): every thread of the block must reach it (uniform
/// control flow).
void barrier(KernelBuilder &k);

/// A generic pointer to a static shared-memory array of `count` elements of
/// `elementType` named `name` (one per kernel module, 16-byte aligned; at most
/// 48 KiB of static shared memory).
mlir::Value sharedArrayOf(KernelBuilder &k, llvm::StringRef name, mlir::Type elementType,
                          int64_t count);
/// sharedArrayOf f32.
mlir::Value sharedArray(KernelBuilder &k, llvm::StringRef name, int64_t count);

/// The global thread index along x (blockIdx.x * blockDim.x + threadIdx.x).
mlir::Value globalThreadX(KernelBuilder &k);

//===----------------------------------------------------------------------===//
// Column sums
//===----------------------------------------------------------------------===//

/// __threadfence(): llvm.nvvm.membar.gl (membar.gl, fence.sc.gpu on sm_70+;
/// the emulator's host build: a seq_cst fence).
void threadFence(KernelBuilder &k);
/// atomicAdd on the i32 `ptr[index]` (relaxed, as CUDA's atomicAdd: order it
/// with threadFence); returns the old value.
mlir::Value atomicAddI32(KernelBuilder &k, mlir::Value ptr, mlir::Value index, mlir::Value value);

/// A column-sum kernel: params (partials, <ptrInputs>, rows, cols, chunks,
/// <extra>, tickets, first, second, half), grid (ceil(cols / 32), chunks),
/// block (32, 8): the threads of column c (grid x) and chunk g (grid y)
/// write partials[g * cols + c] = sum of value(r, c) over the chunk's rows
/// (chunk g of ceil(rows / chunks) consecutive rows); then the last block of
/// each column group (tickets[blockIdx.x], zero before the launch and reset
/// to zero by it) writes the sum of column c < half to first[c] and of
/// column c >= half to second[c - half], adding the chunks as
/// pe_colsum_finish_pair does. `value` gets the kernel builder, the row and
/// the column (i64); arguments are k.arg(1 + i) for input i and
/// k.arg(4 + inputs + e) for extra parameter e.
KernelDef columnPartialsKernel(
    std::string name, llvm::StringRef peOp, std::vector<std::string> ptrInputs,
    std::vector<std::pair<std::string, ParamKind>> extra,
    std::function<mlir::Value(KernelBuilder &, mlir::Value row, mlir::Value col)> value);

/// `pe_colsum_partials` (a columnPartialsKernel, value(r, c) = x[r * stride
/// + c]) and `pe_colsum_finish_pair` (first[c] / second[c - half] = sum_g
/// partials[g * cols + c]: the finish of pe_layer_norm_grad_fused, whose
/// blocks each cover every column).
void appendColumnSumKernels(std::vector<KernelDef> &defs);

/// The fewest blocks a partials launch of a sum over batch-sized rows gets:
/// two per SM of an H100 (132 SMs).
inline constexpr int64_t kReductionBlocks = 264;

/// The chunk count of a column sum of `rows` x `cols` (depends on the shape
/// only: the same partition, and the same bits, every run).
int64_t columnSumChunks(BatchAffine rows, int64_t cols);

/// Appends to `steps` a deterministic column sum, one launch: a scratch
/// buffer of chunks x cols floats and the launch of `partialsKernel` (a
/// columnPartialsKernel) with `inputs` then rows, cols, chunks, `extra`,
/// the tickets, `out` twice and half = cols.
void appendColumnSum(OpSteps &steps, const std::string &partialsKernel,
                     std::vector<LaunchArg> inputs, BatchAffine rows, int64_t cols,
                     std::vector<LaunchArg> extra, LaunchArg out);

/// Two column sums of one pass over the data: `partialsKernel` computes
/// 2 x half columns (its `cols` argument is 2 half); its last blocks write
/// columns [0, half) to `first` and [half, 2 half) to `second`.
void appendColumnSumPair(OpSteps &steps, const std::string &partialsKernel,
                         std::vector<LaunchArg> inputs, BatchAffine rows, int64_t half,
                         std::vector<LaunchArg> extra, LaunchArg first, LaunchArg second);

/// The plain column sum of x [rows, cols] (row stride `stride` elements).
void appendPlainColumnSum(OpSteps &steps, LaunchArg x, BatchAffine rows, int64_t cols,
                          int64_t stride, LaunchArg out);

/// The column sum of x [rows, cols] into `out` (pe.sum_to): a single chunk
/// (each column group's one block adds all the rows) over at most
/// kSingleLaunchRows static rows, else appendPlainColumnSum's chunks.
inline constexpr int64_t kSingleLaunchRows = 256;
void appendColumnSumTo(OpSteps &steps, LaunchArg x, BatchAffine rows, int64_t cols,
                       LaunchArg out);

/// out[0] = (sum of the n floats of x) / divisor: one warp (pe_sum_all) for
/// a short static n, else kReductionBlocks partial sums first
/// (pe_sum_partials), so a sum over the batch fills the GPU (TokenKernels.cpp).
void appendScalarSum(OpSteps &steps, LaunchArg x, BatchAffine n, LaunchArg out,
                     BatchAffine divisor);

//===----------------------------------------------------------------------===//
// Lowering side
//===----------------------------------------------------------------------===//

/// The shape of a ranked tensor type whose dynamic dimensions (only dim 0
/// may be one: the batch) are -1; nullopt for anything else.
std::optional<std::vector<int64_t>> batchShape(mlir::Type type);
/// The static shape of `v`, or nullopt when a dimension is dynamic.
std::optional<std::vector<int64_t>> staticShape(mlir::Value v);
/// A position tensor pos [T, A] (static, both > 0): (T, A).
std::optional<std::pair<int64_t, int64_t>> positionShape(mlir::Value pos);
/// The largest i32, for the checks of sizes a kernel indexes in i32.
inline constexpr int64_t kMaxI32 = std::numeric_limits<int32_t>::max();
/// The element count of a tensor value (elementCount of its type).
BatchAffine numel(mlir::Value v);
/// An op's steps that are one launch of `kernel`.
OpSteps singleLaunch(std::string kernel, std::vector<LaunchArg> args);
/// The product of dims [from, to) of a batch shape, all static (asserted by
/// returning nullopt when one is dynamic).
std::optional<int64_t> staticProduct(const std::vector<int64_t> &shape, size_t from, size_t to);
/// dims [0, to) of a batch shape as a BatchAffine (the batch may be dim 0).
BatchAffine leadingCount(const std::vector<int64_t> &shape, size_t to);

BatchAffine operator*(BatchAffine a, int64_t c);
/// elements / rowSize, for a tensor's element count and the product of some
/// of its static trailing dims (so the division is exact; a row count).
BatchAffine rowsOf(BatchAffine elements, int64_t rowSize);

/// Kernel specs: `grid` Elements with block 256 unless given.
GpuKernelSpec makeSpec(std::string name, llvm::StringRef peOp,
                    std::vector<std::pair<std::string, ParamKind>> params,
                    GridRule grid = GridRule::Elements, int64_t blockX = 256, int64_t blockY = 1);

/// Ceil division of positive integers.
inline int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

} // namespace stringc::cudagen

#endif // STRINGC_CUDAGEN_OPKERNELUTIL_H
