// The executor's kernel sets (KernelSet.h): the fast table replaces exactly
// the adapters of the ops that have a fast CPU kernel, keeping their operand
// and result counts; and every one of those ops, run as a one-op program on
// each kernel set, gives the same results (norm-wise relative 1e-4) for each
// of its forms (bias or not, every attention mask, rel or not, rope modes,
// gelu forms).
#include "Executor.h"

#include "stringrt/Error.h"
#include "stringrt/KernelSet.h"

#include <gtest/gtest.h>

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
    "pe.cross_entropy_grad"};

TEST(ExecutorFastTest, TheFastTableOverridesExactlyTheFastOps) {
  const detail::OpTable &reference = opTable(KernelSet::Reference);
  const detail::OpTable &fast = opTable(KernelSet::Fast);
  EXPECT_EQ(&opTable(), &reference); // the default
  ASSERT_EQ(fast.size(), reference.size());
  for (const auto &[op, spec] : reference) {
    auto it = fast.find(op);
    ASSERT_NE(it, fast.end()) << op;
    const detail::OpSpec &f = it->second;
    EXPECT_EQ(f.minOperands, spec.minOperands) << op;
    EXPECT_EQ(f.maxOperands, spec.maxOperands) << op;
    EXPECT_EQ(f.minResults, spec.minResults) << op;
    EXPECT_EQ(f.maxResults, spec.maxResults) << op;
    if (kFastOps.count(op))
      EXPECT_NE(f.run, spec.run) << op << " should run its fast kernel";
    else
      EXPECT_EQ(f.run, spec.run) << op << " has no fast kernel";
  }
  for (const std::string &op : kFastOps)
    EXPECT_TRUE(reference.count(op)) << op;
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

TEST_P(ExecutorFastOpTest, AgreesWithTheReferenceKernels) {
  const OpCase &c = GetParam();
  Program program = oneOpProgram(c);
  std::mt19937 gen(17);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<std::vector<float>> f32Inputs;
  std::vector<std::vector<int32_t>> i32Inputs;
  std::vector<HostTensor> inputs;
  f32Inputs.reserve(c.operands.size());
  i32Inputs.reserve(c.operands.size());
  for (const ProgramValue &v : c.operands) {
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
      inputs.emplace_back(f32Inputs.back().data(), v.shape);
    }
  }
  Executor reference(program, "forward", {}, KernelSet::Reference);
  Executor fast(program, "forward", {}, KernelSet::Fast);
  EXPECT_EQ(fast.kernels(), KernelSet::Fast);
  auto want = reference.run(inputs, std::nullopt, nullptr);
  auto got = fast.run(inputs, std::nullopt, nullptr);
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    ASSERT_EQ(got[k].shape, want[k].shape) << "result " << k;
    double norm = 0;
    for (float x : want[k].values) {
      ASSERT_TRUE(std::isfinite(x)) << "result " << k;
      norm += std::abs(x);
    }
    EXPECT_LE(relError(got[k].values, want[k].values), 1e-4) << "result " << k;
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
  };
  for (std::string mask : {"none", "causal", "skip"}) {
    cs.push_back({"attention_" + mask, "pe.attention", {act, act, act}, {act}, attention(mask)});
    cs.push_back({"attention_rel_" + mask, "pe.attention", {act, act, act, rel}, {act},
                  attention(mask)});
    cs.push_back({"attention_grad_" + mask, "pe.attention_grad", {act, act, act, act},
                  {act, act, act}, attention(mask)});
    cs.push_back({"attention_grad_rel_" + mask, "pe.attention_grad", {act, act, act, act, rel},
                  {act, act, act, rel}, attention(mask)});
  }
  return cs;
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

} // namespace
} // namespace stringrt
