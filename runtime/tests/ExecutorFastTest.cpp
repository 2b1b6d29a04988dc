// The executor's kernel sets (KernelSet.h): the fast table replaces exactly
// the adapters of the ops that have a fast CPU kernel, keeping their operand
// and result counts; and every one of those ops, run as a one-op program on
// each kernel set, gives the same results (norm-wise relative 1e-4) for each
// of its forms (bias or not, every attention mask, rel or not, rope modes,
// gelu forms, broadcast directions, skew and general Cayley S), also when
// its result buffers come recycled and full of NaN; and the buffer pool
// recycles: a second run of a program allocates nothing.
#include "execution/Executor.h"

#include "stringrt/Error.h"
#include "stringrt/KernelSet.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace stringrt {
namespace {

using detail::Executor;
using detail::opTable;

ProgramValue f32(std::vector<int64_t> shape) { return {DType::F32, std::move(shape)}; }
ProgramValue i32(std::vector<int64_t> shape) { return {DType::I32, std::move(shape)}; }

// The ops with a fast kernel (ExecutorFastOps.cpp).
const std::set<std::string> kFastOps = {
    "pe.linear",           "pe.layer_norm",         "pe.gelu",
    "pe.patch_embed",      "pe.token_embed",        "pe.attention",
    "pe.cross_entropy",    "pe.rope",               "pe.linear_grad_input",
    "pe.linear_grad_weight", "pe.layer_norm_grad",  "pe.gelu_grad",
    "pe.patch_embed_grad", "pe.token_embed_grad",   "pe.attention_grad",
    "pe.cross_entropy_grad", "pe.add",              "pe.sub",
    "pe.mul",              "pe.scale",              "pe.sum_to",
    "pe.dropout",
    "pe.cayley",           "pe.cayley_grad",        "pe.spd_gate",
    "pe.spd_gate_grad",    "pe.generator_exp",      "pe.generator_exp_grad",
    "pe.apply_rotation",   "pe.apply_rotation_grad",
    // The fused ops with a fast kernel (PEFusedOps.td; ops/fused/).
    "pe.rope_apply",       "pe.rope_apply_grad_table", "pe.rope_attention",
    "pe.rope_attention_grad", "pe.linear_gelu",     "pe.linear_residual",
    "pe.linear_grad_input_acc", "pe.layer_norm_grad_acc", "pe.cayley_weight",
    "pe.cayley_weight_grad"};

TEST(ExecutorFastTest, TheFastTableOverridesExactlyTheFastOps) {
  const detail::OpTable &reference = opTable(KernelSet::Reference);
  const detail::OpTable &fast = opTable(KernelSet::Fast);
  EXPECT_EQ(&opTable(), &reference); // the default
  for (size_t i = 0; i < kOpCodeCount; ++i) {
    const OpCode code = static_cast<OpCode>(i);
    const std::string op = opName(code);
    const detail::OpSpec *r = reference.find(code);
    const detail::OpSpec *f = fast.find(code);
    // Every op of the schema has a reference adapter, but pe.get_param.
    EXPECT_EQ(r == nullptr, code == OpCode::GetParam) << op;
    ASSERT_EQ(f == nullptr, r == nullptr) << op;
    if (!r)
      continue;
    EXPECT_EQ(f->check, r->check) << op;
    if (kFastOps.count(op))
      EXPECT_NE(f->run, r->run) << op << " should run its fast kernel";
    else
      EXPECT_EQ(f->run, r->run) << op << " has no fast kernel";
  }
  for (const std::string &op : kFastOps)
    EXPECT_TRUE(findOpCode(op)) << op;
  EXPECT_STREQ(kernelSetName(KernelSet::Fast), "fast");
  EXPECT_STREQ(kernelSetName(KernelSet::Reference), "reference");
  EXPECT_EQ(parseKernelSet("fast"), KernelSet::Fast);
  EXPECT_EQ(parseKernelSet("reference"), KernelSet::Reference);
  EXPECT_EQ(parseKernelSet("slow"), std::nullopt);
}

// One op as a program: an input per operand, an output per result. i32
// operands get ids in [0, idRange).
struct OpCase {
  std::string name;
  std::string op;
  std::vector<ProgramValue> operands;
  std::vector<ProgramValue> results;
  std::map<std::string, AttrValue> attrs;
  int32_t idRange = 1;
  // An f32 [d, d] operand to make skew (S = (A - A^T) / 2), or -1.
  int skewOperand = -1;
};

std::ostream &operator<<(std::ostream &os, const OpCase &c) { return os << c.name; }

Program oneOpProgram(const OpCase &c) {
  Program p;
  ProgramOp op;
  op.op = c.op;
  op.attrs = c.attrs;
  for (const ProgramValue &v : c.operands) {
    p.values.push_back(v);
    p.inputs.push_back(p.values.size() - 1);
    op.operands.push_back(p.values.size() - 1);
  }
  for (size_t k = 0; k < c.results.size(); ++k) {
    p.values.push_back(c.results[k]);
    op.results.push_back(p.values.size() - 1);
    ProgramOutput out;
    out.name = "r" + std::to_string(k);
    out.value = op.results.back();
    p.outputs.push_back(out);
  }
  p.ops.push_back(op);
  return p;
}

// ||got - want|| / max(||want||, 1e-6), in double.
double relError(const std::vector<float> &got, const std::vector<float> &want) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    double d = double(got[i]) - double(want[i]);
    diff += d * d;
    norm += double(want[i]) * double(want[i]);
  }
  return std::sqrt(diff) / std::max(std::sqrt(norm), 1e-6);
}

class ExecutorFastOpTest : public ::testing::TestWithParam<OpCase> {};

// Random inputs of a case (normal f32, i32 ids in [0, idRange)), views of
// which go into `inputs`.
struct CaseInputs {
  std::vector<std::vector<float>> f32Inputs;
  std::vector<std::vector<int32_t>> i32Inputs;
  std::vector<HostTensor> inputs;
};

void makeInputs(const OpCase &c, CaseInputs &in) {
  std::mt19937 gen(17);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<std::vector<float>> &f32Inputs = in.f32Inputs;
  std::vector<std::vector<int32_t>> &i32Inputs = in.i32Inputs;
  std::vector<HostTensor> &inputs = in.inputs;
  f32Inputs.reserve(c.operands.size());
  i32Inputs.reserve(c.operands.size());
  for (size_t k = 0; k < c.operands.size(); ++k) {
    const ProgramValue &v = c.operands[k];
    size_t n = static_cast<size_t>(ref::shapeNumel(v.shape));
    if (v.dtype == DType::I32) {
      i32Inputs.emplace_back(n);
      for (size_t i = 0; i < n; ++i)
        i32Inputs.back()[i] = static_cast<int32_t>(gen() % static_cast<uint32_t>(c.idRange));
      inputs.emplace_back(i32Inputs.back().data(), v.shape);
    } else {
      f32Inputs.emplace_back(n);
      for (float &x : f32Inputs.back())
        x = normal(gen);
      if (static_cast<int>(k) == c.skewOperand) {
        std::vector<float> &a = f32Inputs.back();
        const int64_t d = v.shape.at(0);
        for (int64_t i = 0; i < d; ++i)
          for (int64_t j = 0; j <= i; ++j) {
            const float half = 0.5f * (a[i * d + j] - a[j * d + i]);
            a[i * d + j] = half;
            a[j * d + i] = -half;
          }
      }
      inputs.emplace_back(f32Inputs.back().data(), v.shape);
    }
  }
}

TEST_P(ExecutorFastOpTest, AgreesWithTheReferenceKernels) {
  const OpCase &c = GetParam();
  Program program = oneOpProgram(c);
  CaseInputs in;
  makeInputs(c, in);
  const std::vector<HostTensor> &inputs = in.inputs;
  Executor reference(program, "forward", {}, KernelSet::Reference);
  Executor fast(program, "forward", {}, KernelSet::Fast);
  EXPECT_EQ(fast.kernels(), KernelSet::Fast);
  auto want = reference.run(inputs, std::nullopt, nullptr);
  auto got = fast.run(inputs, std::nullopt, nullptr);
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    ASSERT_EQ(got[k].shape, want[k].shape) << "result " << k;
    // Finite values compare within the bound; the log-sum-exp of a skip row
    // without a key is -inf (the log of an empty sum), in both.
    std::vector<float> gotFinite, wantFinite;
    double norm = 0;
    for (size_t i = 0; i < want[k].values.size(); ++i) {
      const float x = want[k].values[i];
      if (std::isinf(x) && x < 0 && c.name.find("lse_skip") != std::string::npos) {
        EXPECT_EQ(got[k].values[i], x) << "result " << k << " at " << i;
        continue;
      }
      ASSERT_TRUE(std::isfinite(x)) << "result " << k;
      norm += std::abs(x);
      gotFinite.push_back(got[k].values[i]);
      wantFinite.push_back(x);
    }
    EXPECT_LE(relError(gotFinite, wantFinite), 1e-4) << "result " << k;
    // A non-trivial check: most results are not all zeros (skip's dq, dk are).
    if (c.name.find("skip") == std::string::npos)
      EXPECT_GT(norm, 0.0) << "result " << k;
  }
}

constexpr int64_t B = 2, T = 7, D = 24, H = 3, Dh = D / H, O = 20, V = 11, C = 10;

std::map<std::string, AttrValue> attention(const std::string &mask) {
  std::map<std::string, AttrValue> a = {
      {"heads", int64_t(H)}, {"scale", 1.0 / std::sqrt(double(Dh))}, {"mask", mask}};
  if (mask == "skip")
    a["skip_base"] = int64_t(1);
  return a;
}

std::vector<OpCase> cases() {
  const ProgramValue act = f32({B, T, D});
  const ProgramValue rel = f32({T, T, Dh, Dh});
  const ProgramValue lse = f32({B, H, T}); // the forward's log-sum-exp
  std::vector<OpCase> cs = {
      {"linear", "pe.linear", {act, f32({D, O})}, {f32({B, T, O})}, {}},
      {"linear_bias", "pe.linear", {act, f32({D, O}), f32({O})}, {f32({B, T, O})}, {}},
      {"linear_grad_input", "pe.linear_grad_input", {f32({B, T, O}), f32({D, O})}, {act}, {}},
      {"linear_grad_weight", "pe.linear_grad_weight", {act, f32({B, T, O})}, {f32({D, O})}, {}},
      {"layer_norm", "pe.layer_norm", {act, f32({D}), f32({D})}, {act}, {{"epsilon", 1e-5}}},
      {"layer_norm_grad", "pe.layer_norm_grad", {act, f32({D}), act},
       {act, f32({D}), f32({D})}, {{"epsilon", 1e-6}}},
      {"gelu", "pe.gelu", {act}, {act}, {{"approximate", false}}},
      {"gelu_tanh", "pe.gelu", {act}, {act}, {{"approximate", true}}},
      {"gelu_grad", "pe.gelu_grad", {act, act}, {act}, {{"approximate", false}}},
      {"gelu_grad_tanh", "pe.gelu_grad", {act, act}, {act}, {{"approximate", true}}},
      {"patch_embed", "pe.patch_embed", {f32({B, 3, 8, 12}), f32({3 * 4 * 4, D}), f32({D})},
       {f32({B, 6, D})}, {{"patch", int64_t(4)}}},
      {"patch_embed_grad", "pe.patch_embed_grad", {f32({B, 3, 8, 12}), f32({B, 6, D})},
       {f32({3 * 4 * 4, D}), f32({D})}, {{"patch", int64_t(4)}}},
      {"token_embed", "pe.token_embed", {i32({B, T}), f32({V, D})}, {act}, {}, int32_t(V)},
      {"token_embed_grad", "pe.token_embed_grad", {i32({B, T}), act}, {f32({V, D})}, {},
       int32_t(V)},
      {"cross_entropy", "pe.cross_entropy", {f32({B, T, C}), i32({B, T})}, {f32({})}, {},
       int32_t(C)},
      {"cross_entropy_grad", "pe.cross_entropy_grad", {f32({B, T, C}), i32({B, T}), f32({})},
       {f32({B, T, C})}, {}, int32_t(C)},
      {"rope_seq", "pe.rope", {act, f32({T, 1}), f32({D / 2, 1})}, {act},
       {{"mode", std::string("seq")}}},
      {"rope_axial", "pe.rope", {act, f32({T, 2}), f32({D / 2, 2})}, {act},
       {{"mode", std::string("axial")}}},
      {"rope_mixed", "pe.rope", {act, f32({T, 2}), f32({D / 2, 2})}, {act},
       {{"mode", std::string("mixed")}}},
      {"scale", "pe.scale", {act}, {act}, {{"factor", -0.5}, {"bias", 0.25}}},
      {"scale_no_bias", "pe.scale", {act}, {act}, {{"factor", 3.0}}},
      {"dropout", "pe.dropout", {act}, {act}, {{"p", 0.3}, {"stream", int64_t(2)}}},
      {"drop_path", "pe.dropout", {act}, {act},
       {{"p", 0.5}, {"stream", int64_t(3)}, {"per_sample", true}}},
      {"sum_to_row", "pe.sum_to", {act}, {f32({D})}, {}},
      {"sum_to_matrix", "pe.sum_to", {act}, {f32({T, D})}, {}},
      {"sum_to_scalar", "pe.sum_to", {act}, {f32({})}, {}},
      {"sum_to_same", "pe.sum_to", {act}, {act}, {}},
      {"cayley_skew", "pe.cayley", {act, f32({D, D})}, {act}, {}, 1, 1},
      {"cayley_general", "pe.cayley", {act, f32({D, D})}, {act}, {}},
      {"cayley_grad_skew", "pe.cayley_grad", {act, f32({D, D}), act}, {act, f32({D, D})}, {}, 1,
       1},
      {"cayley_grad_general", "pe.cayley_grad", {act, f32({D, D}), act}, {act, f32({D, D})}, {}},
      {"spd_gate", "pe.spd_gate", {act, f32({D})}, {act}, {}},
      {"spd_gate_grad", "pe.spd_gate_grad", {act, f32({T, D}), act}, {act, f32({T, D})}, {}},
      {"generator_exp", "pe.generator_exp", {f32({T, T, 2}), f32({2, Dh, Dh})},
       {f32({T, T, Dh, Dh})}, {}},
      {"generator_exp_grad", "pe.generator_exp_grad",
       {f32({T, T, 2}), f32({2, Dh, Dh}), f32({T, T, Dh, Dh})}, {f32({2, Dh, Dh})}, {}},
      {"apply_rotation", "pe.apply_rotation", {act, f32({T, Dh, Dh})}, {act},
       {{"heads", int64_t(H)}}},
      {"apply_rotation_grad", "pe.apply_rotation_grad", {act, f32({T, Dh, Dh}), act},
       {act, f32({T, Dh, Dh})}, {{"heads", int64_t(H)}}},
      {"cayley_weight", "pe.cayley_weight", {f32({D, D})}, {f32({D, D})}, {}, 1, 0},
      {"cayley_weight_grad", "pe.cayley_weight_grad", {f32({D, D}), f32({D, D})},
       {f32({D, D})}, {}, 1, 0},
  };
  for (std::string op : {"add", "sub", "mul"}) {
    cs.push_back({op, "pe." + op, {act, act}, {act}, {}});
    cs.push_back({op + "_rhs_row", "pe." + op, {act, f32({D})}, {act}, {}});
    cs.push_back({op + "_lhs_row", "pe." + op, {f32({D}), act}, {act}, {}});
    cs.push_back({op + "_rhs_matrix", "pe." + op, {act, f32({T, D})}, {act}, {}});
    cs.push_back({op + "_lhs_scalar", "pe." + op, {f32({}), act}, {act}, {}});
  }
  for (std::string mask : {"none", "causal", "skip"}) {
    cs.push_back({"attention_" + mask, "pe.attention", {act, act, act}, {act}, attention(mask)});
    cs.push_back({"attention_lse_" + mask, "pe.attention", {act, act, act}, {act, lse},
                  attention(mask)});
    cs.push_back({"attention_rel_" + mask, "pe.attention", {act, act, act, rel}, {act},
                  attention(mask)});
    cs.push_back({"attention_rel_lse_" + mask, "pe.attention", {act, act, act, rel},
                  {act, lse}, attention(mask)});
    cs.push_back({"attention_grad_" + mask, "pe.attention_grad", {act, act, act, act, lse, act},
                  {act, act, act}, attention(mask)});
    cs.push_back({"attention_grad_rel_" + mask, "pe.attention_grad",
                  {act, act, act, act, lse, act, rel}, {act, act, act, rel}, attention(mask)});
  }
  // The fused ops (PEFusedOps.td; ops/fused/); rope_attention takes no skip mask.
  const ProgramValue table = f32({T, D / 2, 2});
  for (bool inverse : {false, true}) {
    const std::string suffix = inverse ? "_inverse" : "";
    cs.push_back({"rope_apply" + suffix, "pe.rope_apply", {act, table}, {act},
                  {{"inverse", inverse}}});
    cs.push_back({"rope_apply_grad_table" + suffix, "pe.rope_apply_grad_table", {act, act},
                  {table}, {{"inverse", inverse}}});
  }
  for (std::string mask : {"none", "causal"}) {
    cs.push_back({"rope_attention_" + mask, "pe.rope_attention", {act, act, act, table}, {act},
                  attention(mask)});
    cs.push_back({"rope_attention_lse_" + mask, "pe.rope_attention", {act, act, act, table},
                  {act, lse}, attention(mask)});
    cs.push_back({"rope_attention_grad_" + mask, "pe.rope_attention_grad",
                  {act, act, act, table, act, lse, act}, {act, act, act}, attention(mask)});
  }
  cs.push_back({"linear_gelu", "pe.linear_gelu", {act, f32({D, O}), f32({O})},
                {f32({B, T, O}), f32({B, T, O})}, {{"approximate", false}}});
  cs.push_back({"linear_gelu_no_bias", "pe.linear_gelu", {act, f32({D, O})},
                {f32({B, T, O}), f32({B, T, O})}, {}});
  cs.push_back({"linear_residual", "pe.linear_residual",
                {f32({B, T, O}), act, f32({D, O}), f32({O})}, {f32({B, T, O})}, {}});
  cs.push_back({"linear_residual_no_bias", "pe.linear_residual", {f32({B, T, O}), act, f32({D, O})},
                {f32({B, T, O})}, {}});
  cs.push_back({"linear_grad_input_acc", "pe.linear_grad_input_acc",
                {act, f32({B, T, O}), f32({D, O})}, {act}, {}});
  cs.push_back({"layer_norm_grad_acc", "pe.layer_norm_grad_acc",
                {act, act, f32({D}), act}, {act, f32({D}), f32({D})}, {{"epsilon", 1e-6}}});
  return cs;
}

// Result buffers are not zeroed: with a pool that hands out NaN-filled
// buffers, each kernel set gives exactly its results from a fresh run.
TEST_P(ExecutorFastOpTest, OverwritesRecycledResultBuffers) {
  const OpCase &c = GetParam();
  Program program = oneOpProgram(c);
  CaseInputs in;
  makeInputs(c, in);
  for (KernelSet k : {KernelSet::Reference, KernelSet::Fast}) {
    Executor exec(program, "forward", {}, k);
    auto want = exec.run(in.inputs, std::nullopt, nullptr);
    detail::BufferPool pool;
    pool.setPoison(true);
    for (int run = 0; run < 2; ++run) { // fresh buffers, then recycled ones
      auto got = exec.run(in.inputs, std::nullopt, nullptr, nullptr, &pool);
      ASSERT_EQ(got.size(), want.size());
      for (size_t r = 0; r < want.size(); ++r)
        EXPECT_EQ(got[r].values, want[r].values)
            << kernelSetName(k) << " result " << r << ", run " << run;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, ExecutorFastOpTest, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<OpCase> &info) {
                           return info.param.name;
                         });

TEST(ExecutorFastTest, CoversEveryFastOp) {
  std::set<std::string> covered;
  for (const OpCase &c : cases())
    covered.insert(c.op);
  EXPECT_EQ(covered, kFastOps);
}

TEST(ExecutorFastTest, FastAdaptersCheckAttributesLikeTheReferenceOnes) {
  OpCase c = {"rope_bad_mode", "pe.rope", {f32({B, T, D}), f32({T, 1}), f32({D / 2, 1})},
              {f32({B, T, D})}, {{"mode", std::string("axial")}}};
  Program program = oneOpProgram(c);
  std::vector<float> x(B * T * D), pos(T), freqs(D / 2);
  std::vector<HostTensor> inputs = {HostTensor(x.data(), {B, T, D}), HostTensor(pos.data(), {T, 1}),
                                    HostTensor(freqs.data(), {D / 2, 1})};
  for (KernelSet k : {KernelSet::Reference, KernelSet::Fast}) {
    Executor exec(program, "forward", {}, k);
    try {
      exec.run(inputs, std::nullopt, nullptr);
      ADD_FAILURE() << kernelSetName(k) << ": no error";
    } catch (const Error &e) {
      EXPECT_NE(std::string(e.what()).find("mode axial needs positions [T, 2], got [7, 1]"),
                std::string::npos)
          << kernelSetName(k) << ": " << e.what();
    }
  }
}

// x [B, T, D], b [D]: h = x + b; g = h * x; out0 = sum_to(g) [D], out1 = 2 h.
Program chainProgram() {
  Program p;
  auto value = [&](ProgramValue v) {
    p.values.push_back(std::move(v));
    return static_cast<ValueId>(p.values.size() - 1);
  };
  auto op = [&](const std::string &name, std::vector<ValueId> operands, ProgramValue result,
                std::map<std::string, AttrValue> attrs = {}) {
    ProgramOp o;
    o.op = name;
    o.operands = std::move(operands);
    o.results = {value(std::move(result))};
    o.attrs = std::move(attrs);
    p.ops.push_back(o);
    return o.results[0];
  };
  const ProgramValue act = f32({kBatchDim, T, D});
  ValueId x = value(act), b = value(f32({D}));
  p.inputs = {x, b};
  ValueId h = op("pe.add", {x, b}, act);
  ValueId g = op("pe.mul", {h, x}, act);
  ValueId sum = op("pe.sum_to", {g}, f32({D}));
  ValueId twice = op("pe.scale", {h}, act, {{"factor", 2.0}});
  for (auto [name, v] : {std::pair<const char *, ValueId>{"sum", sum}, {"twice", twice}}) {
    ProgramOutput out;
    out.name = name;
    out.value = v;
    p.outputs.push_back(out);
  }
  return p;
}

TEST(ExecutorBufferPool, ASecondRunAllocatesNothingAndGivesTheSameResults) {
  Program program = chainProgram();
  std::vector<float> x(3 * T * D), b(D);
  std::mt19937 gen(5);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (float &v : x)
    v = normal(gen);
  for (float &v : b)
    v = normal(gen);
  auto inputsFor = [&](int64_t batch) {
    return std::vector<HostTensor>{HostTensor(x.data(), {batch, T, D}), HostTensor(b.data(), {D})};
  };
  for (KernelSet k : {KernelSet::Reference, KernelSet::Fast}) {
    Executor exec(program, "forward", {}, k);
    detail::BufferPool pool;
    detail::RunStats first, second, other, back;
    auto want = exec.run(inputsFor(2), 2, nullptr);
    auto got1 = exec.run(inputsFor(2), 2, nullptr, &first, &pool);
    auto got2 = exec.run(inputsFor(2), 2, nullptr, &second, &pool);
    EXPECT_GT(first.allocatedBytes, 0) << kernelSetName(k);
    EXPECT_EQ(second.allocatedBytes, 0) << kernelSetName(k);
    EXPECT_EQ(second.peakBytes, first.peakBytes);
    EXPECT_EQ(second.totalBytes, first.totalBytes);
    // h, g and the outputs: each [2, T, D] buffer reused within the run too.
    EXPECT_LT(first.allocatedBytes, first.totalBytes) << kernelSetName(k);
    EXPECT_LE(pool.heldBytes(), first.totalBytes);
    for (size_t r = 0; r < want.size(); ++r) {
      EXPECT_EQ(got1[r].values, want[r].values) << kernelSetName(k) << " result " << r;
      EXPECT_EQ(got2[r].values, want[r].values) << kernelSetName(k) << " result " << r;
    }
    // Another batch size allocates its own buffers; the pool stays within the
    // largest run's total, the old size's buffers aging out first.
    auto big = exec.run(inputsFor(3), 3, nullptr, &other, &pool);
    EXPECT_GT(other.allocatedBytes, 0);
    EXPECT_LE(pool.heldBytes(), std::max(first.totalBytes, other.totalBytes));
    exec.run(inputsFor(3), 3, nullptr, &back, &pool);
    EXPECT_EQ(back.allocatedBytes, 0) << kernelSetName(k);
    EXPECT_EQ(big[0].values, exec.run(inputsFor(3), 3, nullptr)[0].values);
    pool.clear();
    EXPECT_EQ(pool.heldBytes(), 0);
    EXPECT_EQ(pool.heldBuffers(), 0u);
  }
}

} // namespace
} // namespace stringrt
