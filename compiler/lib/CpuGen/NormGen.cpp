//===- NormGen.cpp - layer_norm and layer_norm_grad kernels ---------------===//
//
// x [..., D] is seen as [d0, M, D] (M the product of the middle dimensions;
// a rank-1 x as [1, 1, D]); the parallel loop runs over d0, each (i, q) a
// row. Row statistics as the runtime's fast kernel computes them: the mean
// and the centred sum of squares in float (two passes, each row sum in
// MemrefKernelBuilder::sum's fixed order: vectors of 8 terms, which differs from
// the runtime's only in the order of the float additions),
// rstd = 1 / sqrt(sq / D + epsilon) in double.
//
// layer_norm_grad is two kernels (layer_norm_grad_acc the same two, its dx
// kernel adding the prior as it stores dx: prior + dx, the add's bits):
//   *_dx      rows in parallel: dx = rstd (g - mean(g) - xhat mean(g xhat)),
//             g = dy gamma;
//   *_dparams columns in parallel (range D): dgamma = sum_rows dy xhat and
//             dbeta = sum_rows dy, each column summed in row order in
//             double (so the result does not depend on the thread count),
//             four rows per pass over the columns; each column chunk
//             recomputes the row statistics, so the grain keeps the chunks
//             few.
//
//===----------------------------------------------------------------------===//
#include "MemrefKernelBuilder.h"

#include "stringc/Dialect/PE/PEOps.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;

namespace stringc::codegen::detail {
namespace {

/// [d0, M, D] (see the file comment).
Shape rowView(const Shape &x) {
  if (x.size() == 1)
    return {1, 1, x[0]};
  llvm::ArrayRef<int64_t> dims(x);
  return {dims.front(), numel(dims.slice(1, dims.size() - 2)), dims.back()};
}

double epsilonOf(Operation *op) {
  if (auto norm = dyn_cast<pe::LayerNormOp>(op))
    return norm.getEpsilon().convertToDouble();
  if (auto acc = dyn_cast<pe::LayerNormGradAccOp>(op))
    return acc.getEpsilon().convertToDouble();
  return cast<pe::LayerNormGradOp>(op).getEpsilon().convertToDouble();
}

/// The kernel arguments of layer_norm_grad (x, gamma, dy -> dx, dgamma,
/// dbeta) or, after a leading prior, of layer_norm_grad_acc.
struct GradArgs {
  bool hasPrior;
  unsigned x, gamma, dy, dx, dgamma, dbeta;

  explicit GradArgs(bool hasPrior)
      : hasPrior(hasPrior), x(hasPrior), gamma(x + 1), dy(x + 2), dx(x + 3), dgamma(x + 4),
        dbeta(x + 5) {}
};

bool isAccKind(llvm::StringRef kind) { return kind.starts_with("layer_norm_grad_acc"); }

struct RowStats {
  Value mean, rstd; // f32
};

/// Mean and rstd of row (i, q) of the view `x`.
RowStats rowStats(MemrefKernelBuilder &kb, Value x, Value i, Value q, int64_t D, double epsilon) {
  Value sum = kb.sum(D, [&](Value d, int64_t lanes) { return kb.loadLanes(x, {i, q, d}, lanes); });
  Value mean = kb.div(sum, kb.f32(double(D)));
  Value sq = kb.sum(D, [&](Value d, int64_t lanes) {
    Value c = kb.sub(kb.loadLanes(x, {i, q, d}, lanes), kb.splat(mean, lanes));
    return kb.mul(c, c);
  });
  Value var = kb.add(kb.div(kb.toF64(sq), kb.f64(double(D))), kb.f64(epsilon));
  Value root = kb.b().create<math::SqrtOp>(kb.loc(), var);
  return {mean, kb.toF32(kb.div(kb.f64(1.0), root))};
}

void buildLayerNorm(const KernelSpec &spec, MemrefKernelBuilder &kb, double epsilon) {
  Value x = kb.arg(0), gamma = kb.arg(1), beta = kb.arg(2), y = kb.arg(3);
  const Shape &view = spec.views[0];
  const int64_t D = view[2];
  kb.loop(kb.begin(), kb.end(), [&](Value i) {
    kb.loop(kb.index(0), kb.index(view[1]), [&](Value q) {
      RowStats s = rowStats(kb, x, i, q, D, epsilon);
      kb.loop(kb.index(0), kb.index(D), [&](Value d) {
        Value xhat = kb.mul(kb.sub(kb.load(x, {i, q, d}), s.mean), s.rstd);
        kb.store(kb.add(kb.mul(xhat, kb.load(gamma, {d})), kb.load(beta, {d})), y, {i, q, d});
      });
    });
  });
  kb.finish();
}

void buildLayerNormGradDx(const KernelSpec &spec, MemrefKernelBuilder &kb, double epsilon,
                          GradArgs args) {
  Value x = kb.arg(args.x), gamma = kb.arg(args.gamma), dy = kb.arg(args.dy),
        dx = kb.arg(args.dx);
  Value prior = args.hasPrior ? kb.arg(0) : Value();
  const Shape &view = spec.views[args.x];
  const int64_t D = view[2];
  kb.loop(kb.begin(), kb.end(), [&](Value i) {
    kb.loop(kb.index(0), kb.index(view[1]), [&](Value q) {
      RowStats s = rowStats(kb, x, i, q, D, epsilon);
      Value zero = kb.index(0), width = kb.index(D);
      // d .. d + lanes - 1 of g = dy gamma and of xhat (lanes 1: d's floats).
      auto g = [&](Value d, int64_t lanes = 1) {
        return kb.mul(kb.loadLanes(dy, {i, q, d}, lanes), kb.loadLanes(gamma, {d}, lanes));
      };
      auto xhat = [&](Value d, int64_t lanes = 1) {
        return kb.mul(kb.sub(kb.loadLanes(x, {i, q, d}, lanes), kb.splat(s.mean, lanes)),
                      kb.splat(s.rstd, lanes));
      };
      Value sumG = kb.sum(D, g);
      Value sumGX = kb.sum(D, [&](Value d, int64_t lanes) { return kb.mul(g(d, lanes), xhat(d, lanes)); });
      Value meanG = kb.div(sumG, kb.f32(double(D)));
      Value meanGX = kb.div(sumGX, kb.f32(double(D)));
      kb.loop(zero, width, [&](Value d) {
        Value v = kb.sub(kb.sub(g(d), meanG), kb.mul(xhat(d), meanGX));
        Value grad = kb.mul(s.rstd, v);
        // prior + grad, each rounded: the bits of the add after the op
        // (no contraction into an FMA: the ops carry no fastmath flags).
        if (prior)
          grad = kb.add(kb.load(prior, {i, q, d}), grad);
        kb.store(grad, dx, {i, q, d});
      });
    });
  });
  kb.finish();
}

/// Rows per pass of layer_norm_grad_dparams (the remainder two at a time).
constexpr int64_t kRowsPerPass = 4;

void buildLayerNormGradParams(const KernelSpec &spec, MemrefKernelBuilder &kb, double epsilon,
                              GradArgs args) {
  Value x = kb.arg(args.x), dy = kb.arg(args.dy), dgamma = kb.arg(args.dgamma),
        dbeta = kb.arg(args.dbeta);
  const Shape &view = spec.views[args.x];
  const int64_t D = view[2];
  OpBuilder &b = kb.b();
  // Per-column accumulators in double, on the stack (D is static).
  auto accType = MemRefType::get({D}, b.getF64Type());
  Value accG = b.create<memref::AllocaOp>(kb.loc(), accType);
  Value accB = b.create<memref::AllocaOp>(kb.loc(), accType);
  kb.loop(kb.begin(), kb.end(), [&](Value d) {
    kb.store(kb.f64(0), accG, {d});
    kb.store(kb.f64(0), accB, {d});
  });
  // Rows q, q + 1, .. of batch element i (`rows` of them) into the
  // accumulators, each column's terms added in row order: several rows per
  // pass over the columns load and store each accumulator once for all of
  // them (a third of the kernel's time went to those loads and stores at
  // one row a pass), and their row statistics are independent chains of
  // sums, square root and division that overlap (four rows: 12% faster
  // than two on a Zen 3 EPYC; eight: no faster than four).
  auto addRows = [&](Value i, Value q, int64_t rows) {
    SmallVector<RowStats, kRowsPerPass> stats;
    for (int64_t r = 0; r < rows; ++r)
      stats.push_back(rowStats(kb, x, i, b.create<arith::AddIOp>(kb.loc(), q, kb.index(r)), D, epsilon));
    kb.loop(kb.begin(), kb.end(), [&](Value d) {
      Value sumG = kb.load(accG, {d}), sumB = kb.load(accB, {d});
      for (int64_t r = 0; r < rows; ++r) {
        Value row = b.create<arith::AddIOp>(kb.loc(), q, kb.index(r));
        Value g = kb.load(dy, {i, row, d});
        Value xhat = kb.mul(kb.sub(kb.load(x, {i, row, d}), stats[r].mean), stats[r].rstd);
        sumG = kb.add(sumG, kb.toF64(kb.mul(g, xhat)));
        sumB = kb.add(sumB, kb.toF64(g));
      }
      kb.store(sumG, accG, {d});
      kb.store(sumB, accB, {d});
    });
  };
  const int64_t M = view[1];
  kb.loop(kb.index(0), kb.dim(x, 0), [&](Value i) {
    kb.loop(kb.index(0), kb.index(M / kRowsPerPass), [&](Value pass) {
      addRows(i, b.create<arith::MulIOp>(kb.loc(), pass, kb.index(kRowsPerPass)), kRowsPerPass);
    });
    for (int64_t q = M / kRowsPerPass * kRowsPerPass; q < M; q += 2)
      addRows(i, kb.index(q), std::min<int64_t>(2, M - q));
  });
  kb.loop(kb.begin(), kb.end(), [&](Value d) {
    kb.store(kb.toF32(kb.load(accG, {d})), dgamma, {d});
    kb.store(kb.toF32(kb.load(accB, {d})), dbeta, {d});
  });
  kb.finish();
}

} // namespace

std::vector<KernelSpec> normSpecs(Operation *op) {
  if (!isa<pe::LayerNormOp, pe::LayerNormGradOp, pe::LayerNormGradAccOp>(op))
    return {};
  const bool hasPrior = isa<pe::LayerNormGradAccOp>(op);
  std::optional<Shape> x = kernelShape(op->getOperand(GradArgs(hasPrior).x).getType());
  if (!x || x->empty() || ShapedType::isDynamic(x->back()))
    return {};
  // Every other operand and result: x's shape or [D].
  SmallVector<Type> types(op->getOperandTypes());
  llvm::append_range(types, op->getResultTypes());
  for (Type t : types) {
    std::optional<Shape> s = kernelShape(t);
    if (!s || (*s != *x && *s != Shape{x->back()}))
      return {};
  }
  const Shape row = rowView(*x), column = {x->back()};
  const int64_t D = row[2];
  std::string attrs =
      "eps" + llvm::utohexstr(llvm::APFloat(epsilonOf(op)).bitcastToAPInt().getZExtValue());

  KernelSpec spec;
  // layer_norm: x, gamma, beta -> y; layer_norm_grad: x, gamma, dy -> dx,
  // dgamma, dbeta; layer_norm_grad_acc: prior, then as layer_norm_grad.
  if (isa<pe::LayerNormOp>(op))
    spec.views = {row, column, column, row};
  else
    spec.views = {row, column, row, row, column, column};
  if (hasPrior)
    spec.views.insert(spec.views.begin(), row);
  spec.grain = grainFor(row[1] * D);
  std::string views;
  for (const Shape &v : spec.views)
    views += "|" + shapeKey(v);

  if (isa<pe::LayerNormOp>(op)) {
    spec.kind = "layer_norm";
    spec.key = spec.kind + "|" + attrs + views;
    return {spec};
  }
  const std::string family = hasPrior ? "layer_norm_grad_acc" : "layer_norm_grad";
  KernelSpec dx = spec, dparams = spec;
  dx.kind = family + "_dx";
  dx.key = dx.kind + "|" + attrs + views;
  dparams.kind = family + "_dparams";
  dparams.key = dparams.kind + "|" + attrs + views;
  dparams.grain = std::max<int64_t>(1, (D + 3) / 4); // at most 4 chunks
  return {dx, dparams};
}

void buildNormKernel(Operation *op, const KernelSpec &spec, MemrefKernelBuilder &kb) {
  double epsilon = epsilonOf(op);
  if (spec.kind == "layer_norm")
    buildLayerNorm(spec, kb, epsilon);
  else if (llvm::StringRef(spec.kind).ends_with("_dx"))
    buildLayerNormGradDx(spec, kb, epsilon, GradArgs(isAccKind(spec.kind)));
  else
    buildLayerNormGradParams(spec, kb, epsilon, GradArgs(isAccKind(spec.kind)));
}

} // namespace stringc::codegen::detail
