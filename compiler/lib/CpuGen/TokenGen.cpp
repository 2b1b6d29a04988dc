//===- TokenGen.cpp - token_embed, class_token, select_token --------------===//
//
// The token ops and their gradients, all over the batch dimension d0 but
// for the two sums over it:
//   token_embed        ids [d0, T] (i32), table [V, D] -> y [d0, T, D]: row
//                      copies (the executor checks the ids against V before
//                      the call, checkCompiledIndices);
//   token_embed_grad   ids, dy [d0, T, D] -> dtable [V, D]: a scatter-add,
//                      split over the *destination* rows so that no two
//                      threads add into one row: the parallel loop runs over
//                      blocks of kVocabBlock table rows, each scanning all
//                      the ids once and summing its rows' dy rows in row
//                      order in double, rounded once (the reference's order
//                      and precision: bit for bit);
//   class_token        x [d0, N, D], cls [D] -> y [d0, N + 1, D];
//   class_token_grad   two kernels: _dx (rows 1.. of dy) over d0, _dcls
//                      (sum_b dy[b, 0, :], in order in double) over D;
//   select_token       x [d0, T, D] -> y [d0, D], row `index`;
//   select_token_grad  dy [d0, D] -> dx [d0, T, D], zero but row `index`.
// Everything but the two sums is a copy: exact.
//
//===----------------------------------------------------------------------===//
#include "MemrefKernelBuilder.h"

#include "stringc/Dialect/PE/PEOps.h"
#include "stringrt/abi/CompiledKernels.h"

#include <algorithm>

using namespace mlir;

namespace stringc::codegen::detail {
namespace {

/// Table rows per iteration of token_embed_grad's parallel loop.
constexpr int64_t kVocabBlock = stringrt::abi::kTokenEmbedGradBlock;

/// class_token's and class_token_grad's row copies are memory-bound: split
/// over threads at the elementwise grain they measured slower than the
/// reference's single loop (the pool's dispatch costs more than it saves),
/// so a chunk copies at least this many elements.
constexpr int64_t kCopyChunkElements = int64_t(1) << 20;

Value toIndex(MemrefKernelBuilder &kb, Value i32) {
  return kb.b().create<arith::IndexCastOp>(kb.loc(), kb.b().getIndexType(), i32);
}

int64_t selectIndex(Operation *op) {
  if (auto select = dyn_cast<pe::SelectTokenOp>(op))
    return int64_t(select.getIndex());
  return int64_t(cast<pe::SelectTokenGradOp>(op).getIndex());
}

void buildTokenEmbed(Operation *, const KernelSpec &spec, MemrefKernelBuilder &kb) {
  Value ids = kb.arg(0), table = kb.arg(1), y = kb.arg(2);
  const int64_t T = spec.views[0][1], D = spec.views[1][1];
  kb.loop(kb.begin(), kb.end(), [&](Value i) {
    kb.loop(kb.index(0), kb.index(T), [&](Value t) {
      Value row = toIndex(kb, kb.load(ids, {i, t}));
      kb.loop(kb.index(0), kb.index(D), [&](Value d) {
        kb.store(kb.load(table, {row, d}), y, {i, t, d});
      });
    });
  });
  kb.finish();
}

void buildTokenEmbedGrad(Operation *, const KernelSpec &spec, MemrefKernelBuilder &kb) {
  Value ids = kb.arg(0), dy = kb.arg(1), dtable = kb.arg(2);
  const int64_t T = spec.views[0][1], V = spec.views[2][0], D = spec.views[2][1];
  OpBuilder &b = kb.b();
  Location loc = kb.loc();
  Value acc = b.create<memref::AllocaOp>(loc, MemRefType::get({kVocabBlock, D}, b.getF64Type()));
  Value block = kb.index(kVocabBlock);
  kb.loop(kb.begin(), kb.end(), [&](Value blk) {
    Value first = b.create<arith::MulIOp>(loc, blk, block);
    Value last = b.create<arith::MinSIOp>(loc, b.create<arith::AddIOp>(loc, first, block),
                                          kb.index(V));
    Value rows = b.create<arith::SubIOp>(loc, last, first);
    kb.loop(kb.index(0), rows, [&](Value r) {
      kb.loop(kb.index(0), kb.index(D), [&](Value d) { kb.store(kb.f64(0), acc, {r, d}); });
    });
    kb.loop(kb.index(0), kb.dim(ids, 0), [&](Value i) {
      kb.loop(kb.index(0), kb.index(T), [&](Value t) {
        Value id = toIndex(kb, kb.load(ids, {i, t}));
        Value r = b.create<arith::SubIOp>(loc, id, first);
        // first <= id < last, as one unsigned comparison of id - first.
        Value mine = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ult, r, rows);
        auto ifOp = b.create<scf::IfOp>(loc, mine, /*withElseRegion=*/false);
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(&ifOp.getThenRegion().front());
        kb.loop(kb.index(0), kb.index(D), [&](Value d) {
          Value sum = kb.add(kb.load(acc, {r, d}), kb.toF64(kb.load(dy, {i, t, d})));
          kb.store(sum, acc, {r, d});
        });
      });
    });
    kb.loop(kb.index(0), rows, [&](Value r) {
      Value row = b.create<arith::AddIOp>(loc, first, r);
      kb.loop(kb.index(0), kb.index(D), [&](Value d) {
        kb.store(kb.toF32(kb.load(acc, {r, d})), dtable, {row, d});
      });
    });
  });
  kb.finish();
}

void buildClassToken(Operation *, const KernelSpec &spec, MemrefKernelBuilder &kb) {
  Value x = kb.arg(0), cls = kb.arg(1), y = kb.arg(2);
  const int64_t N = spec.views[0][1], D = spec.views[0][2];
  OpBuilder &b = kb.b();
  kb.loop(kb.begin(), kb.end(), [&](Value i) {
    kb.loop(kb.index(0), kb.index(D), [&](Value d) {
      kb.store(kb.load(cls, {d}), y, {i, kb.index(0), d});
    });
    kb.loop(kb.index(0), kb.index(N), [&](Value n) {
      Value to = b.create<arith::AddIOp>(kb.loc(), n, kb.index(1));
      kb.loop(kb.index(0), kb.index(D), [&](Value d) {
        kb.store(kb.load(x, {i, n, d}), y, {i, to, d});
      });
    });
  });
  kb.finish();
}

void buildClassTokenGradDx(Operation *, const KernelSpec &spec, MemrefKernelBuilder &kb) {
  Value dy = kb.arg(0), dx = kb.arg(1);
  const int64_t N = spec.views[1][1], D = spec.views[1][2];
  OpBuilder &b = kb.b();
  kb.loop(kb.begin(), kb.end(), [&](Value i) {
    kb.loop(kb.index(0), kb.index(N), [&](Value n) {
      Value from = b.create<arith::AddIOp>(kb.loc(), n, kb.index(1));
      kb.loop(kb.index(0), kb.index(D), [&](Value d) {
        kb.store(kb.load(dy, {i, from, d}), dx, {i, n, d});
      });
    });
  });
  kb.finish();
}

void buildClassTokenGradDcls(Operation *, const KernelSpec &spec, MemrefKernelBuilder &kb) {
  Value dy = kb.arg(0), dcls = kb.arg(2);
  const int64_t D = spec.views[2][0];
  OpBuilder &b = kb.b();
  Value acc = b.create<memref::AllocaOp>(kb.loc(), MemRefType::get({D}, b.getF64Type()));
  kb.loop(kb.begin(), kb.end(), [&](Value d) { kb.store(kb.f64(0), acc, {d}); });
  kb.loop(kb.index(0), kb.dim(dy, 0), [&](Value i) {
    kb.loop(kb.begin(), kb.end(), [&](Value d) {
      Value sum = kb.add(kb.load(acc, {d}), kb.toF64(kb.load(dy, {i, kb.index(0), d})));
      kb.store(sum, acc, {d});
    });
  });
  kb.loop(kb.begin(), kb.end(), [&](Value d) {
    kb.store(kb.toF32(kb.load(acc, {d})), dcls, {d});
  });
  kb.finish();
}

void buildSelectToken(Operation *op, const KernelSpec &spec, MemrefKernelBuilder &kb) {
  Value x = kb.arg(0), y = kb.arg(1);
  const int64_t D = spec.views[1][1];
  Value index = kb.index(selectIndex(op));
  kb.loop(kb.begin(), kb.end(), [&](Value i) {
    kb.loop(kb.index(0), kb.index(D), [&](Value d) {
      kb.store(kb.load(x, {i, index, d}), y, {i, d});
    });
  });
  kb.finish();
}

void buildSelectTokenGrad(Operation *op, const KernelSpec &spec, MemrefKernelBuilder &kb) {
  Value dy = kb.arg(0), dx = kb.arg(1);
  const int64_t T = spec.views[1][1], D = spec.views[1][2];
  Value index = kb.index(selectIndex(op));
  kb.loop(kb.begin(), kb.end(), [&](Value i) {
    kb.loop(kb.index(0), kb.index(T), [&](Value t) {
      kb.loop(kb.index(0), kb.index(D), [&](Value d) { kb.store(kb.f32(0), dx, {i, t, d}); });
    });
    kb.loop(kb.index(0), kb.index(D), [&](Value d) {
      kb.store(kb.load(dy, {i, d}), dx, {i, index, d});
    });
  });
  kb.finish();
}

std::string keyOf(const KernelSpec &spec, const std::string &attrs = "") {
  std::string key = spec.kind + attrs;
  for (const Shape &v : spec.views)
    key += "|" + shapeKey(v);
  return key;
}

/// The f32 shapes of `types`, or nullopt if one is not a kernel shape.
std::optional<std::vector<Shape>> shapesOf(TypeRange types) {
  std::vector<Shape> shapes;
  for (Type t : types) {
    std::optional<Shape> s = kernelShape(t);
    if (!s)
      return std::nullopt;
    shapes.push_back(*s);
  }
  return shapes;
}

std::vector<KernelSpec> tokenEmbedSpecs(Operation *op) {
  std::optional<Shape> ids = kernelShapeI32(op->getOperand(0).getType());
  std::optional<Shape> other = kernelShape(op->getOperand(1).getType());
  std::optional<Shape> result = kernelShape(op->getResult(0).getType());
  if (!ids || !other || !result || ids->size() != 2 || ShapedType::isDynamic((*ids)[1]))
    return {};
  KernelSpec spec;
  spec.i32Views = {true, false, false};
  if (isa<pe::TokenEmbedOp>(op)) {
    // ids [d0, T], table [V, D] -> y [d0, T, D]
    const Shape &table = *other;
    if (table.size() != 2 || ShapedType::isDynamic(table[0]) ||
        *result != Shape{(*ids)[0], (*ids)[1], table[1]})
      return {};
    spec.kind = "token_embed";
    spec.views = {*ids, table, *result};
    spec.grain = grainFor((*ids)[1] * table[1]);
    spec.build = buildTokenEmbed;
  } else {
    // ids [d0, T], dy [d0, T, D] -> dtable [V, D]
    const Shape &table = *result;
    if (table.size() != 2 || ShapedType::isDynamic(table[0]) ||
        *other != Shape{(*ids)[0], (*ids)[1], table[1]})
      return {};
    spec.kind = "token_embed_grad";
    spec.views = {*ids, *other, table};
    // Every block scans all the ids: keep at most about 8 chunks.
    const int64_t blocks = (table[0] + kVocabBlock - 1) / kVocabBlock;
    spec.grain = std::max<int64_t>(1, (blocks + 7) / 8);
    spec.build = buildTokenEmbedGrad;
  }
  spec.key = keyOf(spec);
  return {spec};
}

} // namespace

std::vector<KernelSpec> tokenSpecs(Operation *op) {
  if (isa<pe::TokenEmbedOp, pe::TokenEmbedGradOp>(op))
    return tokenEmbedSpecs(op);
  if (!isa<pe::ClassTokenOp, pe::ClassTokenGradOp, pe::SelectTokenOp, pe::SelectTokenGradOp>(op))
    return {};
  std::optional<std::vector<Shape>> ins = shapesOf(op->getOperandTypes());
  std::optional<std::vector<Shape>> outs = shapesOf(op->getResultTypes());
  if (!ins || !outs)
    return {};
  KernelSpec spec;
  if (isa<pe::ClassTokenOp>(op)) {
    // x [d0, N, D], cls [D] -> y [d0, N + 1, D]
    const Shape &x = (*ins)[0];
    if (x.size() != 3 || (*ins)[1] != Shape{x[2]} || (*outs)[0] != Shape{x[0], x[1] + 1, x[2]})
      return {};
    spec.kind = "class_token";
    spec.views = {x, (*ins)[1], (*outs)[0]};
    spec.grain = std::max<int64_t>(1, kCopyChunkElements / ((x[1] + 1) * x[2]));
    spec.build = buildClassToken;
    spec.key = keyOf(spec);
    return {spec};
  }
  if (isa<pe::ClassTokenGradOp>(op)) {
    // dy [d0, N + 1, D] -> dx [d0, N, D], dcls [D]
    const Shape &dy = (*ins)[0];
    if (dy.size() != 3 || dy[1] < 1 || (*outs)[0] != Shape{dy[0], dy[1] - 1, dy[2]} ||
        (*outs)[1] != Shape{dy[2]})
      return {};
    spec.views = {dy, (*outs)[0], (*outs)[1]};
    KernelSpec dx = spec, dcls = spec;
    dx.kind = "class_token_grad_dx";
    dx.grain = std::max<int64_t>(1, kCopyChunkElements / (dy[1] * dy[2]));
    dx.build = buildClassTokenGradDx;
    dx.key = keyOf(dx);
    dcls.kind = "class_token_grad_dcls";
    // B x D additions: one chunk (each would read a row of every batch element).
    dcls.grain = dy[2];
    dcls.build = buildClassTokenGradDcls;
    dcls.key = keyOf(dcls);
    return {dx, dcls};
  }
  const int64_t index = selectIndex(op);
  if (isa<pe::SelectTokenOp>(op)) {
    // x [d0, T, D] -> y [d0, D]
    const Shape &x = (*ins)[0];
    if (x.size() != 3 || index < 0 || index >= x[1] || (*outs)[0] != Shape{x[0], x[2]})
      return {};
    spec.kind = "select_token";
    spec.views = {x, (*outs)[0]};
    spec.grain = grainFor(x[2]);
    spec.build = buildSelectToken;
  } else {
    // dy [d0, D] -> dx [d0, T, D]
    const Shape &dx = (*outs)[0];
    if (dx.size() != 3 || index < 0 || index >= dx[1] || (*ins)[0] != Shape{dx[0], dx[2]})
      return {};
    spec.kind = "select_token_grad";
    spec.views = {(*ins)[0], dx};
    spec.grain = grainFor(dx[1] * dx[2]);
    spec.build = buildSelectTokenGrad;
  }
  spec.key = keyOf(spec, "|index" + std::to_string(index));
  return {spec};
}

} // namespace stringc::codegen::detail
