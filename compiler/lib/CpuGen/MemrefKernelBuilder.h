//===- MemrefKernelBuilder.h - kernels on memrefs -----------*- C++ -*-===//
//
// Private to compiler/lib/CpuGen. A KernelSpec describes one kernel to
// build (its memref views and its parallel range); the builders of each op
// family (ElementwiseGen.cpp, NormGen.cpp) fill a func.func body
// through MemrefKernelBuilder's small vocabulary: constants, loads and stores,
// loops, reductions.
//
//===----------------------------------------------------------------------===//
#ifndef STRINGC_CPUGEN_MEMREFKERNELBUILDER_H
#define STRINGC_CPUGEN_MEMREFKERNELBUILDER_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace stringc::codegen::detail {

/// Row-major shape with at most dimension 0 dynamic (ShapedType::kDynamic).
using Shape = llvm::SmallVector<int64_t, 4>;

class MemrefKernelBuilder;

/// One kernel function to build: its argument views (operands then results),
/// and what the package records for its call.
struct KernelSpec {
  std::string kind;                 // "add", "layer_norm_grad_dx", ...: the symbol's tail
  std::vector<Shape> views;         // one memref view per operand, then per result
  // Outer iterations (-1: the batch size): KernelGen sets it from the
  // compiled-kernel ABI's rule for `kind` (stringrt/abi/CompiledKernels.h).
  int64_t range = 1;
  int64_t grain = 1;                // fewest outer iterations per thread
  std::string key;                  // identical keys share one kernel
  /// Per view: whether it holds i32 (token ids, labels); empty: all f32.
  std::vector<bool> i32Views;
  /// The family's body builder; null: KernelGen dispatches on `kind`.
  void (*build)(mlir::Operation *op, const KernelSpec &spec, MemrefKernelBuilder &kb) = nullptr;
};

/// Fewest outer iterations per thread so that a chunk does at least about
/// this many element operations (the runtime's elementwise grain).
constexpr int64_t kChunkElements = 16384;
inline int64_t grainFor(int64_t elementsPerIteration) {
  return elementsPerIteration <= 0 ? 1 : 1 + (kChunkElements - 1) / elementsPerIteration;
}

/// Builds the body of one kernel func: arguments are the views, then `begin`
/// and `end` (index).
class MemrefKernelBuilder {
public:
  MemrefKernelBuilder(mlir::func::FuncOp func);

  mlir::OpBuilder &b() { return builder; }
  mlir::Location loc() const { return location; }
  /// The memref argument for view k.
  mlir::Value arg(unsigned k) { return func.getArgument(k); }
  mlir::Value begin() { return func.getArgument(func.getNumArguments() - 2); }
  mlir::Value end() { return func.getArgument(func.getNumArguments() - 1); }

  mlir::Value index(int64_t v);
  mlir::Value f32(double v);
  mlir::Value f64(double v);
  /// Size of dimension `dim` of memref `m` (a constant when static).
  mlir::Value dim(mlir::Value m, int64_t dim);

  mlir::Value load(mlir::Value m, mlir::ValueRange indices);
  void store(mlir::Value v, mlir::Value m, mlir::ValueRange indices);

  // Arithmetic; `reassoc` lets LLVM vectorise a reduction.
  mlir::Value add(mlir::Value a, mlir::Value c, bool reassoc = false);
  mlir::Value sub(mlir::Value a, mlir::Value c);
  mlir::Value mul(mlir::Value a, mlir::Value c);
  mlir::Value div(mlir::Value a, mlir::Value c);
  mlir::Value toF64(mlir::Value v);
  mlir::Value toF32(mlir::Value v);

  /// for iv in [lb, ub) { body(iv) }
  void loop(mlir::Value lb, mlir::Value ub, const std::function<void(mlir::Value)> &body);
  /// acc = init; for iv in [lb, ub) { acc = body(iv, acc) }; returns acc.
  mlir::Value reduce(mlir::Value lb, mlir::Value ub, mlir::Value init,
                     const std::function<mlir::Value(mlir::Value, mlir::Value)> &body);

  /// `lanes` consecutive floats of m from `indices` on (the last index
  /// the first lane's) as a vector<lanes x f32>; lanes 1: the float.
  mlir::Value loadLanes(mlir::Value m, mlir::ValueRange indices, int64_t lanes);
  /// The float x in each of `lanes` lanes; lanes 1: x itself.
  mlir::Value splat(mlir::Value x, int64_t lanes);
  /// The f32 sum of the terms of [0, n), n static, in a fixed order.
  /// term(d, lanes) returns terms d .. d + lanes - 1: a vector<lanes x f32>
  /// (built from loadLanes, splat and the arithmetic above), or the float
  /// when lanes is 1. Blocks of 8 terms go to two vector partial sums (the
  /// even blocks and the odd ones, each from its first block), which are
  /// added, then halved lane-wise (8 -> 4 -> 2 -> 1: lanes l and l + w/2
  /// added); the last n mod 8 terms are then added one by one (to 0 when n
  /// < 8). A `reassoc` reduction over a short static row was fully
  /// unrolled by LLVM into one chain of 64 dependent scalar adds (the
  /// layer-norm rows of the ViTs) instead of vectorised.
  mlir::Value sum(int64_t n, const std::function<mlir::Value(mlir::Value, int64_t)> &term);

  // KernelMath.cpp, on an f32 or a vector of f32:
  /// exp(x) for x <= 0 (a softmax score minus its row's max, gelu's
  /// -x^2/2); arguments are clamped to [-87, 0] (exp(-87) is still a normal
  /// float; positive ones give 1). Cephes' expf polynomial, as MLIR's
  /// math.exp, whose lowering also handles any x (two more clamps, a floor,
  /// a conversion): here n = round(x log2 e) and 2^n both come from one FMA
  /// onto 1.5 * 2^23 + 127.
  mlir::Value expOfNonPositive(mlir::Value x);
  /// erf(x), within 3.4e-7 (a rational function on [-4, 4]).
  mlir::Value erf(mlir::Value x);

  void finish(); // func.return

private:
  mlir::func::FuncOp func;
  mlir::OpBuilder builder;
  mlir::Location location;
};

/// The kernel builders of each op family: build the body of `func` for `op`
/// with the views of `spec`.
void buildElementwiseKernel(mlir::Operation *op, const KernelSpec &spec, MemrefKernelBuilder &kb);
void buildNormKernel(mlir::Operation *op, const KernelSpec &spec, MemrefKernelBuilder &kb);
void buildSumToKernel(mlir::Operation *op, const KernelSpec &spec, MemrefKernelBuilder &kb);
void buildAttentionKernel(mlir::Operation *op, const KernelSpec &spec, MemrefKernelBuilder &kb);
/// Attention with a skip mask (SkipAttentionGen.cpp; buildAttentionKernel
/// hands it over): the forward, or the gradient when `grad`.
void buildSkipAttentionKernel(const KernelSpec &spec, MemrefKernelBuilder &kb, bool grad,
                              int64_t heads, int64_t skipBase);

/// The specs of the kernels for `op`, or nothing when the op is not supported
/// with these shapes (it then runs on the runtime's kernels).
std::vector<KernelSpec> elementwiseSpecs(mlir::Operation *op);
std::vector<KernelSpec> normSpecs(mlir::Operation *op);
std::vector<KernelSpec> sumToSpecs(mlir::Operation *op);
std::vector<KernelSpec> attentionSpecs(mlir::Operation *op); // AttentionGen.cpp
// These set KernelSpec::build: RopeGen.cpp (rope_apply,
// rope_apply_grad_table), TokenGen.cpp (token_embed, class_token,
// select_token and their gradients), LossGen.cpp (cross_entropy_grad).
std::vector<KernelSpec> ropeSpecs(mlir::Operation *op);
std::vector<KernelSpec> tokenSpecs(mlir::Operation *op);
std::vector<KernelSpec> lossSpecs(mlir::Operation *op);

/// Shape of a ranked f32 tensor whose dimensions are static but for
/// dimension 0; nullopt otherwise.
std::optional<Shape> kernelShape(mlir::Type type);
/// The same for a ranked i32 tensor (token ids, labels).
std::optional<Shape> kernelShapeI32(mlir::Type type);
int64_t numel(llvm::ArrayRef<int64_t> shape); // static dimensions only
/// "?x50x64": a view as the dedup key spells it.
std::string shapeKey(llvm::ArrayRef<int64_t> shape);

} // namespace stringc::codegen::detail

#endif // STRINGC_CPUGEN_MEMREFKERNELBUILDER_H
