// The attention kernels of compiler/lib/CudaGen/AttentionKernels.cpp run on
// random data and compared with the reference kernels (runtime/src/reference),
// launch by launch as the compiler's op lowerings compose them: the same
// kernel names, argument lists, explicit grids and statistics scratch. The
// cases are written against a small backend interface so they run on a GPU
// (AttentionKernelsTest.cpp, KernelSet launches) and on anything else that
// can launch the generated kernels by name.
//
// Tolerance, |got - want| <= tol * (1 + |want|): 1e-4 for the flash kernels
// (f32 FMA dot products and sums over up to 197 keys against double
// references; the scores of the "peaked" cases reach +-100, past exp's f32
// range without the running maximum), 0 for the skip gathers (no arithmetic;
// dq and dk exact zeros).
//
// The tensor-core kernels (`bf16` cases, AttentionMmaKernels.cpp) round q,
// k, v, dy, P and dS to bf16, whose 8-bit significand has a relative
// rounding error of up to u = 2^-9 (~2e-3), and accumulate in f32. An error
// relative to each element's own size is meaningless where the result is a
// sum of cancelling terms (y is an average of v rows, near 0), so the
// bound is relative to the tensor's largest magnitude: |got - want| <= tol *
// max |want|, tol = 1e-2 (5 u) for y and 2e-2 (10 u) for dq, dk, dv, which
// take two more rounded products (dP = dy v^T, then dS k or P^T dy). A wrong
// index, mask or fragment element gives errors of the size of the values
// (tol 1 and more). Peaked rows (q * 25) are not bf16 cases: an error of
// 2^-9 in scores of +-100 moves probabilities by tens of percent, the
// expected behaviour of bf16 attention rather than a kernel fault.
//
// The `storage` cases launch the tensor-core kernels' variants with
// storage parameters in bf16 (KernelDef::storageParams: q, k, v, dy read and
// y, dq, dk, dv written as bf16, as a bf16 package stores its activations):
// the inputs are the bf16 values of the random data (the reference gets the
// same values), and each output is rounded once more, to bf16 (up to 2^-9
// of the largest |want|), within the same bounds.
#pragma once

#include "Bf16Bits.h"
#include "stringrt/cuda/CudaBackend.h"
#include "stringrt/ops/FusedOps.h"
#include "stringrt/reference/LayerKernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace stringrt::cuda::attention_cases {

// What the cases need from a device: buffers (addresses) and launches.
class Backend {
public:
  virtual ~Backend() = default;
  virtual uint64_t put(const std::vector<float> &values) = 0;
  virtual std::vector<float> get(uint64_t address, size_t n) = 0;
  // A buffer of bf16 elements (`values` rounded, toBf16) and one read back
  // widened to f32.
  virtual uint64_t putBf16(const std::vector<float> &values) = 0;
  virtual std::vector<float> getBf16(uint64_t address, size_t n) = 0;
  // `grid` is null for kernels of a grid rule other than explicit.
  virtual void launch(const std::string &kernel, const std::vector<KernelArg> &args,
                      const std::array<int64_t, 3> *grid) = 0;
  // Filled with NaN: an element a kernel leaves unwritten fails the comparison.
  uint64_t output(size_t n) { return put(std::vector<float>(n, NAN)); }
  uint64_t outputBf16(size_t n) { return putBf16(std::vector<float>(n, NAN)); }
};

enum class Mask { None, Causal, Skip };

// The activations a bf16 package may store in bf16 (Case::storage).
enum Storage : unsigned {
  kQ = 1, kK = 2, kV = 4, kDy = 8, kY = 16, kDq = 32, kDk = 64, kDv = 128,
  kAllStorage = 255,
};
// "q k v dy" and so on; "all" for every one.
inline std::string storageName(unsigned storage) {
  if (storage == kAllStorage)
    return "all";
  std::string name;
  const std::pair<unsigned, const char *> names[] = {{kQ, "q"},   {kK, "k"},   {kV, "v"},
                                                     {kDy, "dy"}, {kY, "y"},   {kDq, "dq"},
                                                     {kDk, "dk"}, {kDv, "dv"}};
  for (auto [bit, n] : names)
    if (storage & bit)
      name += (name.empty() ? "" : ",") + std::string(n);
  return name;
}

struct Case {
  int64_t batch, tokens, heads, headDim;
  Mask mask;
  int64_t skipBase = 1;
  bool rope = false;
  double qScale = 1.0; // multiplies q: large values give peaked softmax rows
  bool rel = false;     // relative attention: a random rel [T, T, Dh, Dh]
  bool bf16 = false;    // the tensor-core kernels (--gpu-precision=bf16)
  // ...their variant with these activations in bf16 (bf16 only; Storage
  // bits: every one, or some, as a package that stores some in f32).
  unsigned storage = 0;
  bool rows = false;    // rel on the batch x head rows kernels (pe_rel_attention_rows_*)
  int64_t rowsBlocks = 0; // ...on this many blocks (each loops over work items), not the lowering's
  int64_t width() const { return heads * headDim; }
  std::string describe() const {
    const char *masks[] = {"none", "causal", "skip"};
    return "B=" + std::to_string(batch) + " T=" + std::to_string(tokens) +
           " H=" + std::to_string(heads) + " Dh=" + std::to_string(headDim) +
           " mask=" + masks[int(mask)] + (rope ? " rope" : "") + (rel ? " rel" : "") +
           (rows ? " rows" : "") + (rowsBlocks ? " blocks=" + std::to_string(rowsBlocks) : "") + (bf16 ? " bf16" : "") + (storage ? " storage=" + storageName(storage) : "") +
           (qScale != 1.0 ? " q*" + std::to_string(qScale) : "");
  }
};

// The kernels' geometry (AttentionKernels.cpp): rows per block and names.
inline int64_t rowsPerBlock(int64_t headDim) { return headDim > 32 ? 32 : 64; }
// The tensor-core kernels (AttentionMmaKernels.cpp): 4 warps of 16 rows.
constexpr int64_t kMmaRowsPerBlock = 64;
inline int64_t rowsPerBlock(const Case &c) {
  return c.bf16 ? kMmaRowsPerBlock : rowsPerBlock(c.headDim);
}
// The storage cases' variants (kernelVariantName): a `b` or an `f` per
// storage parameter, y q k v / dk dv q k v dy / dq q k v dy / y dy (delta).
inline std::string storageVariant(const Case &c, const std::vector<unsigned> &params) {
  if (!c.storage)
    return "";
  std::string variant = "__";
  for (unsigned bit : params)
    variant += c.storage & bit ? 'b' : 'f';
  return variant;
}
inline std::string flashKernel(const Case &c, const std::string &part) {
  std::string variant =
      storageVariant(c, part.empty()            ? std::vector<unsigned>{kY, kQ, kK, kV}
                        : part == "_grad_dkdv" ? std::vector<unsigned>{kDk, kDv, kQ, kK, kV, kDy}
                                               : std::vector<unsigned>{kDq, kQ, kK, kV, kDy});
  return std::string(c.rope ? "pe_rope_attention" : c.rel ? "pe_rel_attention" : "pe_attention") +
         (c.rows ? "_rows" : "") + (c.bf16 ? "_mma" : "") + part + "_d" +
         std::to_string(c.headDim) + variant;
}

// The rows kernels (RelativeAttentionRows.cpp): work items of 32 (batch,
// head) rows by 4 tokens on the `elements` grid of n = 4 G B H + 124 G
// (G = ceil(T / 4)), as the lowering passes it.
inline int64_t rowsGridElements(const Case &c) {
  if (c.rowsBlocks)
    return 128 * c.rowsBlocks;
  const int64_t groups = (c.tokens + 3) / 4;
  return 4 * groups * c.batch * c.heads + 124 * groups;
}

inline void expectClose(const std::vector<float> &got, const std::vector<float> &want,
                        double tol, const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_LE(std::fabs(double(got[i]) - want[i]), tol * (1 + std::fabs(double(want[i]))))
        << what << " at " << i << ": " << got[i] << " vs " << want[i];
}

// |got - want| <= tol * max |want| (the bf16 kernels' bound, see above).
inline void expectCloseToLargest(const std::vector<float> &got, const std::vector<float> &want,
                                 double tol, const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double largest = 0;
  for (float x : want)
    largest = std::max(largest, std::fabs(double(x)));
  ASSERT_GT(largest, 0) << what << ": the reference is all zeros";
  double worst = 0;
  size_t worstAt = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double error = std::fabs(double(got[i]) - want[i]); // NaN fails below
    if (!(error <= worst)) {
      worst = error;
      worstAt = i;
    }
  }
  ASSERT_LE(worst, tol * largest) << what << ": at " << worstAt << " " << got[worstAt] << " vs "
                                  << want[worstAt] << " (largest |want| " << largest << ")";
}

// Prints the largest |got - want| and |got - want| / (1 + |want|) (the
// rows cases' accuracy, which docs/cuda.md quotes).
inline void printErrors(const std::string &what, const std::vector<float> &got,
                        const std::vector<float> &want) {
  double abs = 0, rel = 0;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    double e = std::fabs(double(got[i]) - want[i]);
    abs = std::max(abs, e);
    rel = std::max(rel, e / (1 + std::fabs(double(want[i]))));
  }
  std::printf("  %-14s max abs %.2e, max abs / (1 + |want|) %.2e\n", what.c_str(), abs, rel);
}

struct Data {
  std::vector<float> q, k, v, dy, table, rel;
};

// The reference rope_apply of x by the table (its inverse with `inverse`),
// a step of rope_attention's composition.
inline ref::Tensor<float> rotated(ref::TensorRef<const float> x, ref::TensorRef<const float> table,
                                  bool inverse) {
  ref::Tensor<float> y = ref::Tensor<float>::zeros(x.shape);
  ref::ropeApply<float>(x, table, inverse, y.ref());
  return y;
}

inline Data randomData(const Case &c, std::mt19937 &rng) {
  const size_t n = size_t(c.batch * c.tokens * c.width());
  std::uniform_real_distribution<float> dist(-1.5f, 1.5f);
  auto fill = [&](size_t count) {
    std::vector<float> v(count);
    for (float &x : v)
      x = dist(rng);
    return v;
  };
  Data d{fill(n), fill(n), fill(n), fill(n), {}, {}};
  if (c.rel) { // entries in [-0.5, 0.5]: R k of the size of k
    d.rel = fill(size_t(c.tokens * c.tokens * c.headDim * c.headDim));
    for (float &x : d.rel)
      x /= 3.0f;
  }
  for (float &x : d.q)
    x = float(x * c.qScale);
  if (c.rope) { // (cos, sin) of random angles, [T, D/2, 2]
    std::uniform_real_distribution<double> angle(-3.2, 3.2);
    for (int64_t i = 0; i < c.tokens * c.width() / 2; ++i) {
      double a = angle(rng);
      d.table.push_back(float(std::cos(a)));
      d.table.push_back(float(std::sin(a)));
    }
  }
  return d;
}

// Runs the op (`backward`: its gradient) on the backend as the lowering does
// and compares with the reference kernels.
inline void runCase(Backend &backend, const Case &c, bool backward, std::mt19937 &rng) {
  SCOPED_TRACE(c.describe() + (backward ? " backward" : " forward"));
  const int64_t B = c.batch, T = c.tokens, D = c.width(), H = c.heads, n = B * T * D;
  const double scale = 1.0 / std::sqrt(double(c.headDim));
  Data d = randomData(c, rng);
  for (auto [x, bit] : {std::pair{&d.q, kQ}, {&d.k, kK}, {&d.v, kV}, {&d.dy, kDy}})
    if (c.storage & bit) // the values a bf16 buffer holds
      for (float &e : *x)
        e = fromBf16(toBf16(e));
  const std::vector<int64_t> shape = {B, T, D};
  using ref::TensorRef;
  auto in = [&](const std::vector<float> &v, std::vector<int64_t> s) {
    return TensorRef<const float>{v.data(), std::move(s)};
  };
  ref::AttentionMask mask = c.mask == Mask::None     ? ref::AttentionMask::None
                            : c.mask == Mask::Causal ? ref::AttentionMask::Causal
                                                     : ref::AttentionMask::Skip;
  using KA = KernelArg;
  // Activations: bf16 buffers where the storage case says.
  auto putActivation = [&](unsigned bit, const std::vector<float> &x) {
    return c.storage & bit ? backend.putBf16(x) : backend.put(x);
  };
  auto outputActivation = [&](unsigned bit, size_t count) {
    return c.storage & bit ? backend.outputBf16(count) : backend.output(count);
  };
  auto getActivation = [&](unsigned bit, uint64_t address, size_t count) {
    return c.storage & bit ? backend.getBf16(address, count) : backend.get(address, count);
  };
  const uint64_t q = putActivation(kQ, d.q), k = putActivation(kK, d.k),
                 v = putActivation(kV, d.v);
  const uint64_t dy = putActivation(kDy, d.dy);

  if (c.mask == Mask::Skip) { // the gathers: head h lags skip_base + h
    const std::vector<KA> sizes = {KA::integer(n), KA::integer(T), KA::integer(D),
                                   KA::integer(c.headDim), KA::integer(c.skipBase)};
    if (!backward) {
      uint64_t y = backend.output(size_t(n));
      std::vector<KA> args = {KA::pointer(y), KA::pointer(v)};
      args.insert(args.end(), sizes.begin(), sizes.end());
      backend.launch("pe_attention_skip", args, nullptr);
      // The log-sum-exp of a skip row: its one score, -inf without a key.
      const int64_t rows = B * H * T;
      uint64_t lse = backend.output(size_t(rows));
      backend.launch("pe_attention_skip_lse",
                     {KA::pointer(lse), KA::pointer(q), KA::pointer(k), KA::integer(rows),
                      KA::integer(T), KA::integer(D), KA::integer(H), KA::integer(c.skipBase),
                      KA::real(float(scale))},
                     nullptr);
      std::vector<float> want(static_cast<size_t>(n)), wantLse(static_cast<size_t>(rows));
      ref::attention<float>(in(d.q, shape), in(d.k, shape), in(d.v, shape), std::nullopt, H,
                            scale, mask, c.skipBase, {want.data(), shape},
                            TensorRef<float>{wantLse.data(), {B, H, T}});
      expectClose(backend.get(y, size_t(n)), want, 0, "skip attention y");
      const std::vector<float> gotLse = backend.get(lse, size_t(rows));
      for (size_t r = 0; r < gotLse.size(); ++r) {
        if (std::isinf(wantLse[r])) {
          ASSERT_TRUE(std::isinf(gotLse[r]) && gotLse[r] < 0) << "skip lse at " << r;
          continue;
        }
        ASSERT_NEAR(gotLse[r], wantLse[r], 1e-5 * (1 + std::fabs(wantLse[r])))
            << "skip lse at " << r;
      }
      return;
    }
    uint64_t dq = backend.output(size_t(n)), dk = backend.output(size_t(n)),
             dv = backend.output(size_t(n));
    std::vector<KA> args = {KA::pointer(dq), KA::pointer(dk), KA::pointer(dv), KA::pointer(dy)};
    args.insert(args.end(), sizes.begin(), sizes.end());
    backend.launch("pe_attention_skip_grad", args, nullptr);
    std::vector<float> wq(static_cast<size_t>(n)), wk(wq.size()), wv(wq.size());
    ref::attentionGrad<float>(in(d.q, shape), in(d.k, shape), in(d.v, shape), in(d.dy, shape),
                              std::nullopt, H, scale, mask, c.skipBase, {wq.data(), shape},
                              {wk.data(), shape}, {wv.data(), shape}, std::nullopt);
    expectClose(backend.get(dq, size_t(n)), wq, 0, "skip attention dq");
    expectClose(backend.get(dk, size_t(n)), wk, 0, "skip attention dk");
    expectClose(backend.get(dv, size_t(n)), wv, 0, "skip attention dv");
    return;
  }

  // A query sees the keys up to `lookahead` tokens after its own.
  const int64_t lookahead = c.mask == Mask::Causal ? 0 : T - 1;
  const std::array<int64_t, 3> grid = {B * H, (T + rowsPerBlock(c) - 1) / rowsPerBlock(c), 1};
  auto compare = [&](const std::vector<float> &got, const std::vector<float> &want,
                     double bf16Tol, const std::string &what) {
    if (c.rows)
      printErrors(c.describe() + ": " + what, got, want);
    if (c.bf16)
      expectCloseToLargest(got, want, bf16Tol, what);
    else
      expectClose(got, want, 1e-4, what);
  };
  std::vector<KA> inputs = {KA::pointer(q), KA::pointer(k), KA::pointer(v)};
  const uint64_t table = c.rope ? backend.put(d.table) : 0;
  if (c.rope)
    inputs.push_back(KA::pointer(table));
  const std::vector<int64_t> relShape = {T, T, c.headDim, c.headDim};
  const int64_t relCount = T * T * c.headDim * c.headDim;
  // The kernels read rel as pe_rel_layout copies it, with the thread's own
  // token fastest: by query for the forward, stats and dQ, by key for dK/dV;
  // the rows kernels read rel itself.
  uint64_t relByQuery = 0, relByKey = 0;
  if (c.rel && c.rows) {
    relByQuery = relByKey = backend.put(d.rel);
    inputs.push_back(KA::pointer(relByQuery));
  } else if (c.rel) {
    const uint64_t rel = backend.put(d.rel);
    relByQuery = backend.output(size_t(relCount));
    relByKey = backend.output(size_t(relCount));
    for (auto [out, byKey] : {std::pair{relByQuery, 0}, std::pair{relByKey, 1}})
      backend.launch("pe_rel_layout",
                     {KA::pointer(out), KA::pointer(rel), KA::integer(relCount), KA::integer(T),
                      KA::integer(c.headDim * c.headDim), KA::integer(byKey)},
                     nullptr);
    inputs.push_back(KA::pointer(relByQuery));
  }
  using Rel = ref::OptionalInput<float>;
  const Rel refRel = c.rel ? Rel(in(d.rel, relShape)) : Rel(std::nullopt);
  std::vector<KA> sizes = {KA::integer(T), KA::integer(D), KA::integer(H),
                           KA::integer(lookahead), KA::real(float(scale))};
  if (c.rows) { // the grid's elements first, the (batch, head) rows last
    sizes.insert(sizes.begin(), KA::integer(rowsGridElements(c)));
    sizes.push_back(KA::integer(B * H));
  }
  auto call = [&](const std::string &part, std::vector<KA> front, std::vector<KA> middle,
                  bool threadPerKey = false) {
    std::vector<KA> args = std::move(front);
    args.insert(args.end(), inputs.begin(), inputs.end());
    if (c.rel && threadPerKey)
      args[args.size() - 1] = KA::pointer(relByKey);
    args.insert(args.end(), middle.begin(), middle.end());
    args.insert(args.end(), sizes.begin(), sizes.end());
    backend.launch(flashKernel(c, part), args, c.rows ? nullptr : &grid);
  };
  const std::vector<int64_t> tableShape = {T, D / 2, 2};

  // The forward (y and lse [B, H, T]); the backward reads both, as the
  // gradient op's operands.
  const int64_t rows = B * H * T;
  uint64_t y = outputActivation(kY, size_t(n)), lse = backend.output(size_t(rows));
  call("", {KA::pointer(y), KA::pointer(lse)}, {});
  if (!backward) {
    std::vector<float> want(static_cast<size_t>(n)), wantLse(static_cast<size_t>(rows));
    const TensorRef<float> refLse{wantLse.data(), {B, H, T}};
    if (c.rope) // rope_attention's reference: its composition (ops/Compositions.cpp)
      ref::attention<float>(rotated(in(d.q, shape), in(d.table, tableShape), false).cref(),
                            rotated(in(d.k, shape), in(d.table, tableShape), false).cref(),
                            in(d.v, shape), std::nullopt, H, scale, mask, 0,
                            {want.data(), shape}, refLse);
    else
      ref::attention<float>(in(d.q, shape), in(d.k, shape), in(d.v, shape), refRel, H, scale,
                            mask, 0, {want.data(), shape}, refLse);
    compare(getActivation(kY, y, size_t(n)), want, 1e-2, "attention y");
    // lse in f32 either way (bf16 scores: within a few bf16 roundings of the
    // scores' size).
    const std::vector<float> gotLse = backend.get(lse, size_t(rows));
    for (size_t r = 0; r < gotLse.size(); ++r)
      ASSERT_NEAR(gotLse[r], wantLse[r], (c.bf16 ? 3e-2 : 1e-4) * (1 + std::fabs(wantLse[r])))
          << "attention lse at " << r;
    return;
  }
  // delta (scratch: B * H * T), then dK/dV and dQ from the forward's lse.
  uint64_t delta = backend.output(size_t(rows));
  uint64_t dq = outputActivation(kDq, size_t(n)), dk = outputActivation(kDk, size_t(n)),
           dv = outputActivation(kDv, size_t(n));
  const bool deltaVariant = c.storage & (kY | kDy);
  backend.launch(c.bf16 ? "pe_attention_mma_grad_delta" +
                              (deltaVariant ? storageVariant(c, {kY, kDy}) : std::string())
                        : "pe_attention_grad_delta",
                 {KA::pointer(delta), KA::pointer(y), KA::pointer(dy), KA::integer(rows),
                  KA::integer(T), KA::integer(D), KA::integer(H)},
                 nullptr);
  const std::vector<KA> saved = {KA::pointer(dy), KA::pointer(lse), KA::pointer(delta)};
  call("_grad_dkdv", {KA::pointer(dk), KA::pointer(dv)}, saved, /*threadPerKey=*/true);
  // With rel, the dQ kernel also writes dS [B * H, T, T] ([T, T, B * H] for
  // the rows kernels) for the drel kernel.
  const uint64_t ds = c.rel ? backend.output(size_t(B * H * T * T)) : 0;
  std::vector<KA> dqFront = {KA::pointer(dq)};
  if (c.rel)
    dqFront.push_back(KA::pointer(ds));
  call("_grad_dq", dqFront, saved);
  const uint64_t drel = c.rel ? backend.output(size_t(relCount)) : 0;
  if (c.rel)
    backend.launch(flashKernel(c, "_grad_drel"),
                   {KA::pointer(drel), KA::pointer(q), KA::pointer(k), KA::pointer(ds),
                    KA::integer(T * T * c.headDim), KA::integer(T), KA::integer(D),
                    KA::integer(H), KA::integer(B * H), KA::integer(lookahead),
                    KA::real(float(scale))},
                   nullptr);
  std::vector<float> wq(static_cast<size_t>(n)), wk(wq.size()), wv(wq.size());
  if (c.rope) { // rope_attention_grad's reference: its composition
    const ref::TensorRef<const float> table = in(d.table, tableShape);
    ref::Tensor<float> dqr = ref::Tensor<float>::zeros(shape), dkr = dqr;
    ref::attentionGrad<float>(rotated(in(d.q, shape), table, false).cref(),
                              rotated(in(d.k, shape), table, false).cref(), in(d.v, shape),
                              in(d.dy, shape), std::nullopt, H, scale, mask, 0, dqr.ref(),
                              dkr.ref(), {wv.data(), shape}, std::nullopt);
    ref::ropeApply<float>(dqr.cref(), table, true, {wq.data(), shape});
    ref::ropeApply<float>(dkr.cref(), table, true, {wk.data(), shape});
  }
  std::vector<float> wrel(static_cast<size_t>(c.rel ? relCount : 0));
  using Drel = ref::OptionalOutput<float>;
  if (!c.rope)
    ref::attentionGrad<float>(in(d.q, shape), in(d.k, shape), in(d.v, shape), in(d.dy, shape),
                              refRel, H, scale, mask, 0, {wq.data(), shape}, {wk.data(), shape},
                              {wv.data(), shape},
                              c.rel ? Drel(ref::TensorRef<float>{wrel.data(), relShape})
                                    : Drel(std::nullopt));
  compare(getActivation(kDq, dq, size_t(n)), wq, 2e-2, "attention dq");
  compare(getActivation(kDk, dk, size_t(n)), wk, 2e-2, "attention dk");
  compare(getActivation(kDv, dv, size_t(n)), wv, 2e-2, "attention dv");
  if (c.rel) {
    const std::vector<float> got = backend.get(drel, size_t(relCount));
    if (c.rows)
      printErrors(c.describe() + ": attention drel", got, wrel);
    expectClose(got, wrel, 1e-4, "attention drel");
  }
}

// Every combination the tests cover: T in {7, 50, 64, 197}, the three head
// dims (heads 4, 3, 2: widths 64, 96, 128), batch 1 and 3, masks none,
// causal and skip (skip_base 0 and 2), RoPE with none and causal, peaked
// softmax rows (q * 25), and relative attention (Dh 16, T in {7, 50, 64}).
inline std::vector<Case> allCases() {
  std::vector<Case> cases;
  const std::pair<int64_t, int64_t> dims[] = {{4, 16}, {3, 32}, {2, 64}};
  for (int64_t T : {7, 50, 64, 197})
    for (auto [H, Dh] : dims)
      for (int64_t B : {1, 3}) {
        cases.push_back({B, T, H, Dh, Mask::None});
        cases.push_back({B, T, H, Dh, Mask::Causal});
        cases.push_back({B, T, H, Dh, Mask::Skip, B == 1 ? 0 : 2});
        cases.push_back({B, T, H, Dh, Mask::None, 1, true});
        cases.push_back({B, T, H, Dh, Mask::Causal, 1, true});
      }
  for (auto [H, Dh] : dims) {
    cases.push_back({2, 100, H, Dh, Mask::None, 1, false, 25.0});
    cases.push_back({2, 100, H, Dh, Mask::Causal, 1, true, 25.0});
  }
  // Relative attention (Dh 16 only, as vit_generators).
  for (int64_t T : {7, 50, 64})
    for (int64_t B : {1, 3}) {
      cases.push_back({B, T, 4, 16, Mask::None, 1, false, 1.0, true});
      cases.push_back({B, T, 4, 16, Mask::Causal, 1, false, 1.0, true});
    }
  return cases;
}

// The relative rows kernels' cases: T in {7, 50, 130} (ragged ends of the
// 4-token groups and of the 4-token (Dh 16) staged tiles), masks none and
// causal, Dh 16 (4 heads) and 32 (2 heads); batch x heads 12 (one partly
// filled 32-row tile, with blocks past it that return) and 36 (a full tile
// and a partial one), and one case on fewer blocks than work items.
inline std::vector<Case> relRowsCases() {
  std::vector<Case> cases;
  auto add = [&](int64_t B, int64_t T, int64_t H, int64_t Dh) {
    for (Mask mask : {Mask::None, Mask::Causal}) {
      Case c{B, T, H, Dh, mask, 1, false, 1.0, true};
      c.rows = true;
      cases.push_back(c);
    }
  };
  for (int64_t T : {7, 50, 130})
    add(3, T, 4, 16);
  add(9, 50, 4, 16);
  for (int64_t T : {7, 50})
    add(3, T, 2, 32);
  // 3 blocks for the 2 x 13 work items (the runtime caps a grid at 65536
  // blocks): each block loops over several.
  Case few{9, 50, 4, 16, Mask::Causal, 1, false, 1.0, true};
  few.rows = true;
  few.rowsBlocks = 3;
  cases.push_back(few);
  return cases;
}

// The tensor-core kernels' cases (--gpu-precision=bf16): T in {7, 50, 64,
// 130, 197} (ragged ends of the 64-token tiles, one to four row tiles), the
// three head dims, masks none and causal, with and without RoPE; batch 2
// for the short sequences (the batch's offsets), 1 for the long ones (the
// emulator runs one block at a time).
inline std::vector<Case> bf16Cases() {
  std::vector<Case> cases;
  const std::pair<int64_t, int64_t> dims[] = {{4, 16}, {3, 32}, {2, 64}};
  for (int64_t T : {7, 50, 64, 130, 197})
    for (auto [H, Dh] : dims)
      for (Mask mask : {Mask::None, Mask::Causal})
        for (bool rope : {false, true}) {
          Case c{T <= 50 ? 2 : 1, T, H, Dh, mask, 1, rope};
          c.bf16 = true;
          cases.push_back(c);
        }
  return cases;
}

// Head dim 128, whose kernels keep their tiles in dynamic shared memory
// (more than static shared memory's 48 KiB): one head of width 128, T in
// {7, 130} (one row tile, and three with a ragged end), masks none and
// causal, with and without RoPE; f32 kernels, or with `bf16` the
// tensor-core ones (and with `storage` their bf16-storage variants).
inline std::vector<Case> headDim128Cases(bool bf16, bool storage = false) {
  std::vector<Case> cases;
  for (int64_t T : {7, 130})
    for (Mask mask : {Mask::None, Mask::Causal})
      for (bool rope : {false, true}) {
        Case c{1, T, 1, 128, mask, 1, rope};
        c.bf16 = bf16;
        if (storage)
          c.storage = kAllStorage;
        cases.push_back(c);
      }
  return cases;
}

// The tensor-core kernels' bf16-storage variants on every case of bf16Cases.
inline std::vector<Case> bf16StorageCases() {
  std::vector<Case> cases;
  for (Case c : bf16Cases()) {
    c.storage = kAllStorage;
    cases.push_back(c);
  }
  return cases;
}

// Mixed storage, as vit_cayley's bf16 package launches the kernels (its
// Cayley-rotated q and k, and v, stay f32; y and dy are bf16):
// pe_attention_mma_d16__bfff, _grad_dkdv_d16__fffffb, _grad_dq_d16__ffffb
// and the delta's __bb, which tests/cuda/kernels.pkg carries by
// --gpu-kernel (with the same at Dh 64). Their tiles mix the register and
// cp.async paths (dc4236c's prologue wait).
inline std::vector<Case> bf16MixedStorageCases() {
  std::vector<Case> cases;
  for (auto [H, Dh] : {std::pair<int64_t, int64_t>{4, 16}, {2, 64}})
    for (int64_t T : {7, 50, 130})
      for (Mask mask : {Mask::None, Mask::Causal}) {
        Case c{3, T, H, Dh, mask};
        c.bf16 = true;
        c.storage = kY | kDy;
        cases.push_back(c);
      }
  return cases;
}

} // namespace stringrt::cuda::attention_cases
