//===- KernelBuilder.h - helpers for writing gpu.func kernels ---*- C++ -*-===//
//
// Private to compiler/lib/CudaGen. A KernelBuilder wraps an OpBuilder positioned
// in a kernel's entry block: typed loads and stores through `!llvm.ptr`
// arguments, the global thread index, grid-stride loops and warp reductions.
// Every kernel family file (ElementwiseKernels.cpp, NormKernels.cpp,
// OptimizerKernels.cpp) defines its kernels as KernelDefs with it.
//
//===----------------------------------------------------------------------===//
#ifndef STRINGC_CUDAGEN_KERNELBUILDER_H
#define STRINGC_CUDAGEN_KERNELBUILDER_H

#include "stringc/CudaGen/GPUKernels.h"
#include "stringc/CudaGen/StepProgram.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

#include <array>
#include <functional>

namespace stringc::cudagen {

class KernelBuilder {
public:
  KernelBuilder(mlir::OpBuilder &builder, mlir::Location loc, mlir::gpu::GPUFuncOp func)
      : b(builder), loc(loc), func(func) {}

  mlir::OpBuilder &builder() { return b; }
  mlir::Location location() const { return loc; }
  /// Kernel argument `i` (in the order of the GpuKernelSpec's params).
  mlir::Value arg(unsigned i) { return func.getArgument(i); }

  mlir::Value f32(double value);
  mlir::Value i64(int64_t value);
  mlir::Value i32(int32_t value);

  /// `ptr[index]` as f32 (`index` is i64). When `ptr` is a kernel argument
  /// stored in bf16 (setBf16Args: a storage parameter of a bf16 variant),
  /// the element is a bf16 (2 bytes), widened exactly to f32.
  mlir::Value load(mlir::Value ptr, mlir::Value index);
  /// `ptr[index] = value`; into a bf16 argument, `value` rounded to the
  /// nearest bf16 (ties to even, NaN kept: bf16Bits).
  void store(mlir::Value value, mlir::Value ptr, mlir::Value index);
  /// The kernel's pointer arguments stored in bf16 (by argument index).
  void setBf16Args(std::vector<bool> bf16) { bf16Args = std::move(bf16); }
  /// Whether `ptr` is a kernel argument stored in bf16.
  bool isBf16(mlir::Value ptr) const;
  /// A kernel with dynamic shared memory (GpuKernelSpec::dynamicSharedBytes
  /// > 0) keeps every shared array (sharedArrayOf) in one extern array of
  /// that many bytes.
  void setDynamicSharedBytes(int64_t bytes) { dynamicShared = bytes; }
  int64_t dynamicSharedBytes() const { return dynamicShared; }
  /// The byte offset of shared array `name` (of `bytes`) in the extern
  /// array: given on its first request, 16-byte aligned, after the arrays
  /// before it. More than dynamicSharedBytes() in all is a generator bug
  /// (fatal).
  int64_t dynamicSharedOffset(llvm::StringRef name, int64_t bytes);
  /// The bf16 nearest to f32 `x` (ties to even; NaN -> quiet NaN 0x7fc0), as
  /// its 16 bits in an i32: integer arithmetic, the same bits on every GPU
  /// and in the emulator (no cvt.rn.bf16, which needs sm_80).
  mlir::Value bf16Bits(mlir::Value x);
  /// `ptr[index]` .. `ptr[index + 3]` as f32 with one 16-byte load (one
  /// ld.v4 instead of four: shared-memory tiles read in the inner loops).
  /// The caller guarantees `ptr` 16-byte aligned and `index` a multiple of 4.
  std::array<mlir::Value, 4> load4(mlir::Value ptr, mlir::Value index);
  /// `ptr[index]` .. `ptr[index + width - 1]` as f32 (the conversion of
  /// load) with 16-byte loads (ld.global.v4): width / 8 of 8 bf16 when `ptr`
  /// is a bf16 argument, else width / 4 of 4 f32 (load4). `width` a multiple
  /// of 8; the caller guarantees `ptr` 16-byte aligned (aligned16) and
  /// `index` a multiple of `width`.
  llvm::SmallVector<mlir::Value> loadVector(mlir::Value ptr, mlir::Value index, int64_t width);
  /// `ptr[index + j] = values[j]` with 16-byte stores (st.global.v4), each
  /// value converted as store converts it; the conditions of loadVector.
  void storeVector(llvm::ArrayRef<mlir::Value> values, mlir::Value ptr, mlir::Value index);
  /// Whether every pointer of `ptrs` is 16-byte aligned (an i1).
  mlir::Value aligned16(llvm::ArrayRef<mlir::Value> ptrs);

  /// threadIdx / blockIdx / blockDim / gridDim along `dim` as i64.
  mlir::Value threadId(mlir::gpu::Dimension dim);
  mlir::Value blockId(mlir::gpu::Dimension dim);
  mlir::Value blockDim(mlir::gpu::Dimension dim);
  mlir::Value gridDim(mlir::gpu::Dimension dim);

  /// for (i = from + blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
  /// (`from` 0 when not given)
  void forGridStride(mlir::Value n, const std::function<void(mlir::Value)> &body,
                     mlir::Value from = {});
  /// for (i = begin; i < end; i += step) with i64 bounds; `init` are loop-carried
  /// values, `body` returns their next values; returns the final ones.
  mlir::ValueRange forLoop(mlir::Value begin, mlir::Value end, mlir::Value step,
                           mlir::ValueRange init,
                           const std::function<llvm::SmallVector<mlir::Value>(
                               mlir::Value, mlir::ValueRange)> &body);
  /// if (cond) { body }
  void ifThen(mlir::Value cond, const std::function<void()> &body);
  /// if (cond) { then } else { otherwise }
  void ifThenElse(mlir::Value cond, const std::function<void()> &then,
                  const std::function<void()> &otherwise);
  /// `then()`'s values when `cond`, else `otherwise` (values computed
  /// before the branch, of the types `then` returns): an scf.if with results,
  /// so work that would not change the values can be skipped.
  mlir::ValueRange ifThenOr(mlir::Value cond, mlir::ValueRange otherwise,
                            const std::function<llvm::SmallVector<mlir::Value>()> &then);
  /// The sum of `value` over the 32 lanes of the warp (xor butterfly, every
  /// lane gets the total). All 32 lanes must be active.
  mlir::Value warpSum(mlir::Value value);

  mlir::Value add(mlir::Value a, mlir::Value c);
  mlir::Value sub(mlir::Value a, mlir::Value c);
  mlir::Value mul(mlir::Value a, mlir::Value c);
  mlir::Value div(mlir::Value a, mlir::Value c);
  /// i64 -> f32
  mlir::Value toF32(mlir::Value integer);
  /// The correctly rounded f32 square root (sqrt.rn.f32, libdevice's
  /// __nv_fsqrt_rn). math.sqrt would lower to __nv_sqrtf, which is
  /// sqrt.approx.f32 unless the module asks for precise square roots.
  mlir::Value sqrtRn(mlir::Value value);

private:
  mlir::OpBuilder &b;
  mlir::Location loc;
  mlir::gpu::GPUFuncOp func;
  std::vector<bool> bf16Args;
  int64_t dynamicShared = 0;
  llvm::StringMap<int64_t> dynamicOffsets;
  int64_t dynamicEnd = 0;
};

/// A kernel: its spec (name, params, launch shape, the pe op) and the body.
struct KernelDef {
  GpuKernelSpec spec;
  std::function<void(KernelBuilder &)> body;
  /// Uses mma.sync on bf16 (sm_80 and newer): generated only for packages
  /// of precision bf16.
  bool tensorCores = false;
  /// Storage parameters: pointer parameters (by index) the body reads and
  /// writes only element-wise through KernelBuilder::load / store, so that
  /// their tensor may be stored in bf16. A bf16 variant of the kernel is
  /// named `NAME__` + one letter per storage parameter, `b` (bf16) or `f`
  /// (f32), with at least one `b` (kernelVariantName); planKernels picks it
  /// from the storage types of the values a launch binds there.
  std::vector<unsigned> storageParams;
  /// Of a variant: which arguments are bf16 (empty: none).
  std::vector<bool> bf16Args;
  /// The elements a thread loads from each operand it reads before it uses
  /// them (Little's law in the launch report, LaunchReport.cpp): 1, or
  /// kElementwiseVector for the vectorised elementwise kernels.
  int64_t elementsPerLoad = 1;
  /// A gather that reads one operand element per result element it writes
  /// (pe_select_token: one token's row of [B, T, D]): the launch report
  /// charges each operand stream at most the result's element count, not
  /// the operand's whole buffer.
  bool readsResultSized = false;
};

/// The elements a thread of a vectorised elementwise kernel
/// (ElementwiseKernels.cpp) handles per iteration: 16 bytes of bf16, two
/// 16-byte vectors of f32, so that the f32, bf16 and mixed variants of a
/// kernel (chosen after the op is lowered) take the same launch arguments.
inline constexpr int64_t kElementwiseVector = 8;
/// The `threads` argument of a vectorised elementwise kernel over `n`
/// elements (its first i64, by which the Elements grid rule sizes the grid):
/// ceil(n / kElementwiseVector) at every batch, or up to one thread a batch
/// sample more (each part rounded up on its own: an affine bound).
BatchAffine elementwiseThreads(BatchAffine n);

/// `base`'s variant for the storage types of its storage parameters
/// (true: bf16), or `base` itself when none is bf16.
std::string kernelVariantName(const KernelDef &base, const std::vector<bool> &bf16);

/// The kernels of each family (every kernel stringc can generate).
void appendElementwiseKernels(std::vector<KernelDef> &defs);
/// pe.dropout: dropout and drop-path masks from the step key (DropoutKernels.cpp).
void appendDropoutKernels(std::vector<KernelDef> &defs);
void appendNormKernels(std::vector<KernelDef> &defs);
void appendOptimizerKernels(std::vector<KernelDef> &defs);

void appendLinearKernels(std::vector<KernelDef> &defs);
/// The position family by sub-family, named as the reference kernels are
/// (PositionTableKernels.cpp, RotaryKernels.cpp, RotationKernels.cpp,
/// CayleyKernels.cpp, GeneratorKernels.cpp), the gather family
/// (GatherKernels.cpp) and the token ops (TokenKernels.cpp); helpers in
/// OpKernelUtil.h.
void appendPositionTableKernels(std::vector<KernelDef> &defs);
void appendRotaryKernels(std::vector<KernelDef> &defs);
void appendRotationKernels(std::vector<KernelDef> &defs);
void appendGatherKernels(std::vector<KernelDef> &defs);
void appendTokenKernels(std::vector<KernelDef> &defs);
/// pe.cross_entropy and its gradient (LossKernels.cpp).
void appendLossKernels(std::vector<KernelDef> &defs);
void appendCayleyKernels(std::vector<KernelDef> &defs);
/// FlashAttention-style attention and its gradient: plain, RoPE, relative
/// (AttentionKernels.cpp).
void appendAttentionKernels(std::vector<KernelDef> &defs);
void appendGeneratorKernels(std::vector<KernelDef> &defs);
/// The training images' augmentation, launched by the runtime as a batch
/// enters its step (AugmentKernels.cpp).
void appendAugmentKernels(std::vector<KernelDef> &defs);
/// The same ops on tensor cores, bf16 in and f32 accumulation
/// (AttentionMmaKernels.cpp; --gpu-precision=bf16).
void appendAttentionMmaKernels(std::vector<KernelDef> &defs);

/// All kernels, by family; names are unique.
const std::vector<KernelDef> &allKernelDefs();
/// The kernel of that name, a bf16 variant (`NAME__bf...`) included; null
/// when there is none.
const KernelDef *findKernelDef(llvm::StringRef name);

/// The op lowerings of each family (StepProgram.h): how an op becomes
/// launches of the family's kernels (and cuBLAS GEMMs).
void appendElementwiseLowerings(std::vector<OpLowering> &lowerings);
void appendDropoutLowerings(std::vector<OpLowering> &lowerings);
void appendNormLowerings(std::vector<OpLowering> &lowerings);
void appendLinearLowerings(std::vector<OpLowering> &lowerings);
void appendPositionTableLowerings(std::vector<OpLowering> &lowerings);
void appendRotaryLowerings(std::vector<OpLowering> &lowerings);
void appendRotationLowerings(std::vector<OpLowering> &lowerings);
void appendGatherLowerings(std::vector<OpLowering> &lowerings);
void appendTokenLowerings(std::vector<OpLowering> &lowerings);
void appendLossLowerings(std::vector<OpLowering> &lowerings);
void appendCayleyLowerings(std::vector<OpLowering> &lowerings);
void appendAttentionLowerings(std::vector<OpLowering> &lowerings);
void appendGeneratorLowerings(std::vector<OpLowering> &lowerings);
/// For GpuPrecision::BF16 only, with a higher benefit than the f32 attention
/// lowerings, which serve what they decline (skip masks, rel, other head
/// dims).
void appendAttentionMmaLowerings(std::vector<OpLowering> &lowerings);

/// All op lowerings, by family. Several may serve the same op class:
/// planKernels tries them by benefit and uses the first that accepts the op.
const std::vector<OpLowering> &allOpLowerings();

/// Helpers for lowerings. `value` / `divisor` when both parts divide exactly
/// (row counts of tensors), else none.
std::optional<BatchAffine> divideExactly(BatchAffine value, int64_t divisor);
/// Whether every operand and result of `op` is a ranked tensor dynamic in
/// dimension 0 at most (the batch): planKernels lowers only such ops.
bool hasBatchShapes(mlir::Operation &op);
/// The static size of the last dimension of a ranked tensor type (0 for a
/// rank-0 tensor, -1 when dynamic).
int64_t lastDimension(mlir::Type tensorType);

} // namespace stringc::cudagen

#endif // STRINGC_CUDAGEN_KERNELBUILDER_H
