// The compiled-kernel ABI's rules (stringrt/abi/CompiledKernels.h): the one
// definition of the kernels stringc generates per op, their kinds and ranges.
#include "stringrt/abi/CompiledKernels.h"

#include "stringrt/Manifest.h"

#include <array>
#include <cctype>

namespace stringrt::abi {

namespace {

constexpr std::array kKindNames = {
#define STRINGRT_KERNEL_KIND_NAME(Enum, name) name,
    STRINGRT_COMPILED_KERNEL_KINDS(STRINGRT_KERNEL_KIND_NAME)
#undef STRINGRT_KERNEL_KIND_NAME
};

constexpr std::string_view kSymbolPrefix = "stringc_k";
constexpr size_t kDigestLength = 16;

int64_t staticNumel(const Shape &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

// The rows of an elementwise kernel: the result seen as [d0, rest] (a
// scalar as [1, 1], a batch vector [B] as [B, 1], a static vector as [1, n]).
int64_t flatRows(const Shape &s) {
  if (s.empty())
    return 1;
  if (s.size() == 1)
    return s[0] == kBatchDim ? kBatchDim : 1;
  return s[0];
}

// The rows of a row kernel (layer norm, cross entropy's gradient): x
// [d0, ..., D] as [d0, m, D], a vector [D] as one row.
int64_t leadingRows(const Shape &s) { return s.size() >= 2 ? s[0] : 1; }

using Rules = std::optional<std::vector<KernelRule>>;

Rules one(KernelKind kind, int64_t range) { return std::vector<KernelRule>{{kind, range}}; }

Rules layerNormRules(OpCode code, const Shape &x) {
  if (x.empty())
    return std::nullopt;
  switch (code) {
  case OpCode::LayerNorm:
    return one(KernelKind::LayerNorm, leadingRows(x));
  case OpCode::LayerNormGrad:
    return std::vector<KernelRule>{{KernelKind::LayerNormGradDx, leadingRows(x)},
                                   {KernelKind::LayerNormGradDparams, x.back()}};
  default: // OpCode::LayerNormGradAcc
    return std::vector<KernelRule>{{KernelKind::LayerNormGradAccDx, leadingRows(x)},
                                   {KernelKind::LayerNormGradAccDparams, x.back()}};
  }
}

} // namespace

const char *kernelKindName(KernelKind kind) { return kKindNames[static_cast<size_t>(kind)]; }

std::optional<KernelKind> findKernelKind(std::string_view name) {
  for (size_t i = 0; i < kKindNames.size(); ++i)
    if (name == kKindNames[i])
      return static_cast<KernelKind>(i);
  return std::nullopt;
}

bool generatesKernels(OpCode code) {
  switch (code) {
  case OpCode::Add:
  case OpCode::Sub:
  case OpCode::Mul:
  case OpCode::Scale:
  case OpCode::Relu:
  case OpCode::ReluGrad:
  case OpCode::Gelu:
  case OpCode::GeluGrad:
  case OpCode::Attention:
  case OpCode::AttentionGrad:
  case OpCode::RopeAttention:
  case OpCode::RopeAttentionGrad:
  case OpCode::LayerNorm:
  case OpCode::LayerNormGrad:
  case OpCode::LayerNormGradAcc:
  case OpCode::SumTo:
  case OpCode::CrossEntropyGrad:
  case OpCode::RopeApply:
  case OpCode::RopeApplyGradTable:
  case OpCode::TokenEmbed:
  case OpCode::TokenEmbedGrad:
  case OpCode::ClassToken:
  case OpCode::ClassTokenGrad:
  case OpCode::SelectToken:
  case OpCode::SelectTokenGrad:
    return true;
  default:
    return false;
  }
}

std::optional<std::vector<KernelRule>> compiledKernelRules(OpCode code,
                                                           const std::vector<Shape> &operands,
                                                           const std::vector<Shape> &results) {
  if (!generatesKernels(code))
    return std::vector<KernelRule>{};
  // The schema fixes the counts (the manifest checks them first); an op
  // without its operands or results has no kernels of this ABI.
  if (operands.empty() || results.empty())
    return std::nullopt;
  const Shape &in0 = operands[0], &out0 = results[0];
  switch (code) {
  case OpCode::Add:
    return one(KernelKind::Add, flatRows(out0));
  case OpCode::Sub:
    return one(KernelKind::Sub, flatRows(out0));
  case OpCode::Mul:
    return one(KernelKind::Mul, flatRows(out0));
  case OpCode::Scale:
    return one(KernelKind::Scale, flatRows(out0));
  case OpCode::Relu:
    return one(KernelKind::Relu, flatRows(out0));
  case OpCode::ReluGrad:
    return one(KernelKind::ReluGrad, flatRows(out0));
  case OpCode::Gelu:
    return one(KernelKind::Gelu, flatRows(out0));
  case OpCode::GeluGrad:
    return one(KernelKind::GeluGrad, flatRows(out0));
  case OpCode::Attention:
  case OpCode::AttentionGrad:
  case OpCode::RopeAttention:
  case OpCode::RopeAttentionGrad: {
    if (in0.size() != 3)
      return std::nullopt;
    const KernelKind kind = code == OpCode::Attention       ? KernelKind::Attention
                            : code == OpCode::AttentionGrad ? KernelKind::AttentionGrad
                            : code == OpCode::RopeAttention ? KernelKind::RopeAttention
                                                            : KernelKind::RopeAttentionGrad;
    return one(kind, in0[0]);
  }
  case OpCode::LayerNorm:
  case OpCode::LayerNormGrad:
    return layerNormRules(code, in0);
  case OpCode::LayerNormGradAcc: // x after the prior
    if (operands.size() < 2)
      return std::nullopt;
    return layerNormRules(code, operands[1]);
  case OpCode::SumTo:
    return one(KernelKind::SumTo, staticNumel(out0));
  case OpCode::CrossEntropyGrad:
    if (in0.empty())
      return std::nullopt;
    return one(KernelKind::CrossEntropyGrad, leadingRows(in0));
  case OpCode::RopeApply: // x [..., T, D]; [T, D] is one row
    if (in0.size() < 2)
      return std::nullopt;
    return one(KernelKind::RopeApply, in0.size() == 2 ? 1 : in0[0]);
  case OpCode::RopeApplyGradTable:
    if (in0.size() < 2)
      return std::nullopt;
    return one(KernelKind::RopeApplyGradTable, in0[in0.size() - 2]);
  case OpCode::TokenEmbed: // ids [d0, T]
    if (in0.size() != 2)
      return std::nullopt;
    return one(KernelKind::TokenEmbed, in0[0]);
  case OpCode::TokenEmbedGrad: // -> dtable [V, D], in blocks of rows
    if (out0.size() != 2 || out0[0] < 1)
      return std::nullopt;
    return one(KernelKind::TokenEmbedGrad,
               (out0[0] + kTokenEmbedGradBlock - 1) / kTokenEmbedGradBlock);
  case OpCode::ClassToken: // x [d0, N, D]
  case OpCode::SelectToken:
    if (in0.size() != 3)
      return std::nullopt;
    return one(code == OpCode::ClassToken ? KernelKind::ClassToken : KernelKind::SelectToken,
               in0[0]);
  case OpCode::ClassTokenGrad: // dy [d0, N + 1, D]
    if (in0.size() != 3)
      return std::nullopt;
    return std::vector<KernelRule>{{KernelKind::ClassTokenGradDx, in0[0]},
                                   {KernelKind::ClassTokenGradDcls, in0[2]}};
  case OpCode::SelectTokenGrad: // -> dx [d0, T, D]
    if (out0.size() != 3)
      return std::nullopt;
    return one(KernelKind::SelectTokenGrad, out0[0]);
  default:
    return std::vector<KernelRule>{};
  }
}

std::string kernelSymbol(size_t index, const std::string &digest, KernelKind kind) {
  return std::string(kSymbolPrefix) + std::to_string(index) + "_" + digest + "_" +
         kernelKindName(kind);
}

std::optional<KernelSymbolParts> parseKernelSymbol(const std::string &symbol) {
  if (symbol.rfind(kSymbolPrefix, 0) != 0)
    return std::nullopt;
  size_t at = kSymbolPrefix.size();
  const size_t digits = at;
  while (at < symbol.size() && std::isdigit(static_cast<unsigned char>(symbol[at])))
    ++at;
  if (at == digits || symbol.size() < at + kDigestLength + 3 || symbol[at] != '_' ||
      symbol[at + 1 + kDigestLength] != '_')
    return std::nullopt;
  std::string digest = symbol.substr(at + 1, kDigestLength);
  for (char c : digest)
    if (!std::isdigit(static_cast<unsigned char>(c)) && (c < 'a' || c > 'f'))
      return std::nullopt;
  return KernelSymbolParts{digest, symbol.substr(at + 2 + kDigestLength)};
}

} // namespace stringrt::abi
