//===- RelativeAttentionKernels.cpp - relative-position attention ---------===//
//
// What only the relative encoding of the f32 attention kernels needs
// (pe.attention and pe.attention_grad with `rel` [T, T, Dh, Dh], Dh 16;
// vit_generators). The pe_rel_attention* kernels themselves are the
// FlashAttention-2 kernels of AttentionKernels.cpp with Enc::Rel, in which
// the staged row enters rotated per pair, w = R_ij k_j (forward, dQ: s =
// q . w and dq += scale dS w) or u = R_ij^T q_i (dK/dV: s = u . k and dk +=
// scale dS u), by rotateTileRow below. The dQ kernel also writes dS
// [B * H, T, T] to a scratch buffer, and pe_rel_attention_grad_drel sums
// drel[i, j] = scale sum_{b,h} dS q_i k_j^T with one thread per (i, j, d),
// without atomics. The kernels read R from a copy that pe_rel_layout writes
// first, with the thread's own token fastest ([j, Dh, Dh, i] for a thread
// per query, [i, Dh, Dh, j] for dK/dV): read from rel itself, each thread's
// R_ij is its own 1 KB, so a warp's load of one entry touched 32 cache lines.
//
//===----------------------------------------------------------------------===//
#include "AttentionF32.h"

#include "stringc/Dialect/PE/PEOps.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;

namespace stringc::cudagen::attention {
namespace {
using Pred = arith::CmpIPredicate;
using Args = NamedArgs;
} // namespace

/// The relative rotation R = rel[i, j] applied to row c of a tile:
/// (R t)[d] = sum_e R[d, e] t[e], or its transpose (R^T t)[e] = sum_d R[d, e]
/// t[d]. `rel` is not the op's [T, T, Dh, Dh] but a copy that pe_rel_layout
/// wrote with the thread's own token fastest, [other, Dh, Dh, own] (own = i
/// for a thread per query, j for a thread per key; both in range): a warp's
/// load of one entry reads consecutive floats instead of one line per thread.
std::vector<Value> rotateTileRow(HeadBlock &g, Value rel, Value own, Value other, Value tile,
                                 Value c, bool transpose) {
  KernelBuilder &k = g.k;
  const int64_t dh = g.dh;
  Value base = k.add(k.mul(other, k.mul(k.i64(dh * dh), g.tokens)), own);
  Value rowBase = k.mul(c, k.i64(dh));
  std::vector<Value> t;
  for (int64_t e = 0; e < dh; ++e)
    t.push_back(k.load(tile, k.add(rowBase, k.i64(e))));
  std::vector<Value> out;
  for (int64_t a = 0; a < dh; ++a) {
    Value sum = k.f32(0.0);
    for (int64_t b = 0; b < dh; ++b) {
      int64_t at = transpose ? b * dh + a : a * dh + b; // R[b, a] or R[a, b]
      sum = fma(k, k.load(rel, k.add(base, k.mul(k.i64(at), g.tokens))), t[b], sum);
    }
    out.push_back(sum);
  }
  return out;
}

std::string relGradKernelName(int64_t dh, bool pairMajor) {
  return std::string(pairMajor ? "pe_rel_attention_rows_grad_drel_d" : "pe_rel_attention_grad_drel_d") +
         std::to_string(dh);
}

/// drel[i, j, d, e] = scale sum_{b, h} dS_ij q_i[d] k_j[e] (0 where key j
/// is hidden from query i): one thread per (i, j, d), looping over the
/// batch and heads in order, Dh accumulators. dS comes from the dQ kernel,
/// written for every visible pair: ds[bh, i, j] (the FA-2 kernels), or
/// ds[i, j, bh] (`pairMajor`: RelativeAttentionRows.cpp).
KernelDef relGradKernel(int64_t dh, bool pairMajor) {
  const ParamKind P = ParamKind::Ptr, I = ParamKind::I64, F = ParamKind::F32;
  std::vector<std::pair<std::string, ParamKind>> params = {
      {"drel", P},   {"q", P},     {"k", P},      {"ds", P},     {"n", I},    {"tokens", I},
      {"width", I},  {"heads", I}, {"batch_heads", I}, {"lookahead", I}, {"scale", F}};
  return {makeSpec(relGradKernelName(dh, pairMajor), pe::AttentionGradOp::getOperationName(),
                   params),
          [dh, pairMajor, params](KernelBuilder &k) {
            Args args{k, params};
            Value tokens = args("tokens"), width = args("width"), heads = args("heads");
            k.forGridStride(args("n"), [&](Value e) {
              Value d = remU(k, e, k.i64(dh)), ij = divU(k, e, k.i64(dh));
              Value i = divU(k, ij, tokens), j = remU(k, ij, tokens);
              SmallVector<Value> init(dh, k.f32(0.0));
              ValueRange sums = k.forLoop(
                  k.i64(0), args("batch_heads"), k.i64(1), init, [&](Value bh, ValueRange acc) {
                    Value b = divU(k, bh, heads), h = remU(k, bh, heads);
                    Value col = k.mul(h, k.i64(dh));
                    Value qd = k.load(args("q"), k.add(k.add(k.mul(k.add(k.mul(b, tokens), i),
                                                                   width), col), d));
                    Value dS = k.load(
                        args("ds"), pairMajor
                                        ? k.add(k.mul(ij, args("batch_heads")), bh)
                                        : k.add(k.mul(k.add(k.mul(bh, tokens), i), tokens), j));
                    Value f = k.mul(dS, qd);
                    Value kRow = k.add(k.mul(k.add(k.mul(b, tokens), j), width), col);
                    SmallVector<Value> next;
                    for (int64_t x = 0; x < dh; ++x)
                      next.push_back(fma(k, f, k.load(args("k"), k.add(kRow, k.i64(x))), acc[x]));
                    return next;
                  });
              Value seen = cmpI(k, Pred::sle, j, k.add(i, args("lookahead")));
              for (int64_t x = 0; x < dh; ++x)
                k.store(select(k, seen, k.mul(args("scale"), sums[x]), k.f32(0.0)), args("drel"),
                        k.add(k.mul(e, k.i64(dh)), k.i64(x)));
            });
          }};
}

/// out[other, a, b, own] = rel[i, j, a, b]: rel [T, T, Dh, Dh] with the
/// token of the kernels' threads fastest (rotateTileRow), own = i
/// (`key_fastest` 0: the forward, stats and dQ kernels, a thread per query)
/// or own = j (`key_fastest` 1: dK/dV, a thread per key). One thread per
/// output element, so the writes are coalesced.
KernelDef relLayoutKernel() {
  const ParamKind P = ParamKind::Ptr, I = ParamKind::I64;
  std::vector<std::pair<std::string, ParamKind>> params = {
      {"out", P}, {"rel", P}, {"n", I}, {"tokens", I}, {"entries", I}, {"key_fastest", I}};
  return {makeSpec("pe_rel_layout", pe::AttentionOp::getOperationName(), params),
          [params](KernelBuilder &k) {
            Args args{k, params};
            Value tokens = args("tokens"), entries = args("entries");
            Value keyFastest = cmpI(k, Pred::ne, args("key_fastest"), k.i64(0));
            k.forGridStride(args("n"), [&](Value e) {
              Value own = remU(k, e, tokens), rest = divU(k, e, tokens);
              Value at = remU(k, rest, entries), other = divU(k, rest, entries);
              Value i = select(k, keyFastest, other, own), j = select(k, keyFastest, own, other);
              Value from = k.add(k.mul(k.add(k.mul(i, tokens), j), entries), at);
              k.store(k.load(args("rel"), from), args("out"), e);
            });
          }};
}

/// rel [T, T, Dh, Dh] for q of this shape, a head dim with rel kernels and a
/// mask other than skip.
bool relFits(const AttentionShape &s, Type rel, pe::MaskKind mask) {
  auto shape = batchShape(rel);
  return mask != pe::MaskKind::Skip && llvm::is_contained(kRelHeadDims, s.dh) && shape &&
         *shape == std::vector<int64_t>{s.tokens, s.tokens, s.dh, s.dh};
}

} // namespace stringc::cudagen::attention
