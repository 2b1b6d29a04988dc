//===- SkipAttentionGen.cpp - generated attention with a skip mask --------===//
//
// The CPU kernels of pe.attention / pe.attention_grad with a `skip` mask:
// query i of head h sees the one key i - (n + h) (n = skip_base; none
// before token n + h), so the softmax is exactly 1 and the kernels copy
// rows:
//   y_i = v_{i - (n + h)} (0 when negative); dv_j = dy_{j + n + h} (0 past
//   T); dq = dk = 0.
// Scalar loops, no scratch; the parallel loop runs over the batch d0 as in
// AttentionGen.cpp, whose attentionSpecs makes their specs (kinds
// attention / attention_grad, mask in the key) and whose
// buildAttentionKernel hands a skip mask here.
//
//===----------------------------------------------------------------------===//
#include "MemrefKernelBuilder.h"

using namespace mlir;

namespace stringc::codegen::detail {
namespace {

/// The two kernels' sizes and the index arithmetic they need.
class SkipAttention {
public:
  SkipAttention(MemrefKernelBuilder &kb, const KernelSpec &spec, int64_t heads, int64_t skipBase)
      : kb(kb), b(kb.b()), loc(kb.loc()), T(spec.views[0][1]), D(spec.views[0][2]),
        Dh(D / heads), heads(heads), skipBase(skipBase) {}

  void buildForward();
  void buildBackward();

private:
  Value addi(Value x, Value y) { return b.create<arith::AddIOp>(loc, x, y); }
  Value muli(Value x, int64_t c) { return b.create<arith::MulIOp>(loc, x, kb.index(c)); }
  Value addc(Value x, int64_t c) { return c == 0 ? x : addi(x, kb.index(c)); }

  MemrefKernelBuilder &kb;
  OpBuilder &b;
  Location loc;
  int64_t T, D, Dh, heads, skipBase;
};

void SkipAttention::buildForward() {
  Value v = kb.arg(2), y = kb.arg(3);
  Value zero = kb.index(0);
  kb.loop(kb.begin(), kb.end(), [&](Value bi) {
    kb.loop(zero, kb.index(heads), [&](Value h) {
      Value col0 = muli(h, Dh), offset = addc(h, skipBase);
      kb.loop(zero, kb.index(T), [&](Value i) {
        // Query i sees key i - (n + h); none before token n + h.
        Value seen = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::sge, i, offset);
        b.create<scf::IfOp>(
            loc, seen,
            [&](OpBuilder &, Location) {
              Value j = b.create<arith::SubIOp>(loc, i, offset);
              kb.loop(zero, kb.index(Dh), [&](Value d) {
                kb.store(kb.load(v, {bi, j, addi(col0, d)}), y, {bi, i, addi(col0, d)});
              });
              b.create<scf::YieldOp>(loc);
            },
            [&](OpBuilder &, Location) {
              kb.loop(zero, kb.index(Dh), [&](Value d) { kb.store(kb.f32(0), y, {bi, i, addi(col0, d)}); });
              b.create<scf::YieldOp>(loc);
            });
      });
    });
  });
  kb.finish();
}

void SkipAttention::buildBackward() {
  // Operands q, k, v, y, lse, dy; results dq, dk, dv.
  Value dy = kb.arg(5), dq = kb.arg(6), dk = kb.arg(7), dv = kb.arg(8);
  Value zero = kb.index(0);
  kb.loop(kb.begin(), kb.end(), [&](Value bi) {
    kb.loop(zero, kb.index(T), [&](Value t) {
      kb.loop(zero, kb.index(D), [&](Value c) {
        kb.store(kb.f32(0), dq, {bi, t, c});
        kb.store(kb.f32(0), dk, {bi, t, c});
      });
    });
    kb.loop(zero, kb.index(heads), [&](Value h) {
      Value col0 = muli(h, Dh), offset = addc(h, skipBase);
      kb.loop(zero, kb.index(T), [&](Value j) {
        // Key j is seen by query j + n + h, if there is one.
        Value i = addi(j, offset);
        Value seen = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::slt, i, kb.index(T));
        b.create<scf::IfOp>(
            loc, seen,
            [&](OpBuilder &, Location) {
              kb.loop(zero, kb.index(Dh), [&](Value d) {
                kb.store(kb.load(dy, {bi, i, addi(col0, d)}), dv, {bi, j, addi(col0, d)});
              });
              b.create<scf::YieldOp>(loc);
            },
            [&](OpBuilder &, Location) {
              kb.loop(zero, kb.index(Dh), [&](Value d) { kb.store(kb.f32(0), dv, {bi, j, addi(col0, d)}); });
              b.create<scf::YieldOp>(loc);
            });
      });
    });
  });
  kb.finish();
}

} // namespace

void buildSkipAttentionKernel(const KernelSpec &spec, MemrefKernelBuilder &kb, bool grad,
                              int64_t heads, int64_t skipBase) {
  SkipAttention skip(kb, spec, heads, skipBase);
  if (grad)
    skip.buildBackward();
  else
    skip.buildForward();
}

} // namespace stringc::codegen::detail
