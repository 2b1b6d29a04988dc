// The compiled kernels each op may name (CompiledKernelRules.h). The rules
// mirror the code generator's (compiler/lib/Codegen: each family's
// KernelSpec kind and range); docs/codegen.md lists them.
#include "format/CompiledKernelRules.h"

#include "format/AffineSize.h"
#include "format/Json.h"
#include "stringrt/Error.h"
#include "stringrt/KernelLibrary.h"

#include <fmt/format.h>

#include <cctype>
#include <map>
#include <optional>
#include <set>
#include <utility>

namespace stringrt::detail {

namespace {

using Shape = std::vector<int64_t>;

// An op's operand and result shapes (the manifest checked their counts).
struct OpShapes {
  const ProgramOp &op;
  const Program &program;
  const Shape &in(size_t k) const { return program.values[op.operands.at(k)].shape; }
  const Shape &out(size_t k) const { return program.values[op.results.at(k)].shape; }
};

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

const std::set<std::string> kElementwise = {"add",  "sub",      "mul",  "scale",
                                            "relu", "relu_grad", "gelu", "gelu_grad"};
const std::set<std::string> kAttention = {"attention", "attention_grad", "rope_attention",
                                          "rope_attention_grad"};

// The kernels stringc generates for `op`, in order; an empty list for an op
// kind it generates none for; nullopt when the op's shapes are not ones it
// generates kernels for (a rank its kernels cannot have).
std::optional<std::vector<KernelRule>> kernelRules(const ProgramOp &op, const Program &program) {
  if (op.op.rfind("pe.", 0) != 0)
    return std::vector<KernelRule>{};
  const std::string kind = op.op.substr(3);
  const OpShapes s{op, program};
  if (kElementwise.count(kind))
    return std::vector<KernelRule>{{kind, flatRows(s.out(0))}};
  if (kAttention.count(kind)) {
    if (s.in(0).size() != 3)
      return std::nullopt;
    return std::vector<KernelRule>{{kind, s.in(0)[0]}};
  }
  if (kind == "layer_norm" || kind == "layer_norm_grad" || kind == "layer_norm_grad_acc") {
    const Shape &x = s.in(kind == "layer_norm_grad_acc" ? 1 : 0); // after the prior
    if (x.empty())
      return std::nullopt;
    if (kind == "layer_norm")
      return std::vector<KernelRule>{{kind, leadingRows(x)}};
    return std::vector<KernelRule>{{kind + "_dx", leadingRows(x)},
                                   {kind + "_dparams", x.back()}};
  }
  if (kind == "sum_to")
    return std::vector<KernelRule>{{kind, staticNumel(s.out(0))}};
  if (kind == "cross_entropy_grad") {
    if (s.in(0).empty())
      return std::nullopt;
    return std::vector<KernelRule>{{kind, leadingRows(s.in(0))}};
  }
  if (kind == "rope_apply" || kind == "rope_apply_grad_table") {
    const Shape &x = s.in(0); // [..., T, D]; [T, D] is one row
    if (x.size() < 2)
      return std::nullopt;
    if (kind == "rope_apply")
      return std::vector<KernelRule>{{kind, x.size() == 2 ? 1 : x[0]}};
    return std::vector<KernelRule>{{kind, x[x.size() - 2]}};
  }
  if (kind == "token_embed") { // ids [d0, T]
    if (s.in(0).size() != 2)
      return std::nullopt;
    return std::vector<KernelRule>{{kind, s.in(0)[0]}};
  }
  if (kind == "token_embed_grad") { // -> dtable [V, D], blocks of 16 rows
    const Shape &table = s.out(0);
    if (table.size() != 2 || table[0] < 1)
      return std::nullopt;
    return std::vector<KernelRule>{{kind, (table[0] + 15) / 16}};
  }
  if (kind == "class_token" || kind == "select_token") { // x [d0, N, D]
    if (s.in(0).size() != 3)
      return std::nullopt;
    return std::vector<KernelRule>{{kind, s.in(0)[0]}};
  }
  if (kind == "class_token_grad") { // dy [d0, N + 1, D]
    const Shape &dy = s.in(0);
    if (dy.size() != 3)
      return std::nullopt;
    return std::vector<KernelRule>{{"class_token_grad_dx", dy[0]},
                                   {"class_token_grad_dcls", dy[2]}};
  }
  if (kind == "select_token_grad") { // -> dx [d0, T, D]
    if (s.out(0).size() != 3)
      return std::nullopt;
    return std::vector<KernelRule>{{kind, s.out(0)[0]}};
  }
  return std::vector<KernelRule>{};
}

// A generated kernel's symbol "stringc_k<N>_<digest>_<kind>": the digest of
// its buffer sizes (16 hex digits) and its kind.
struct KernelSymbol {
  std::string digest;
  std::string kind;
};

// The parts of a generated kernel's symbol; nullopt for another name.
std::optional<KernelSymbol> parseKernelSymbol(const std::string &symbol) {
  const std::string prefix = "stringc_k";
  if (symbol.rfind(prefix, 0) != 0)
    return std::nullopt;
  size_t at = prefix.size();
  const size_t digits = at;
  while (at < symbol.size() && std::isdigit(static_cast<unsigned char>(symbol[at])))
    ++at;
  constexpr size_t kDigestLength = 16;
  if (at == digits || symbol.size() < at + kDigestLength + 3 || symbol[at] != '_' ||
      symbol[at + 1 + kDigestLength] != '_')
    return std::nullopt;
  std::string digest = symbol.substr(at + 1, kDigestLength);
  for (char c : digest)
    if (!std::isdigit(static_cast<unsigned char>(c)) && (c < 'a' || c > 'f'))
      return std::nullopt;
  return KernelSymbol{digest, symbol.substr(at + 2 + kDigestLength)};
}

// The digest of `op`'s buffers, operands then results (kernelSizeDigest).
std::string opSizeDigest(const OpShapes &s) {
  std::vector<Shape> shapes;
  for (size_t k = 0; k < s.op.operands.size(); ++k)
    shapes.push_back(s.in(k));
  for (size_t k = 0; k < s.op.results.size(); ++k)
    shapes.push_back(s.out(k));
  return kernelSizeDigest(shapes);
}

std::string rangeText(int64_t range) {
  return range == kBatchDim ? "-1 (the batch)" : std::to_string(range);
}

} // namespace

void checkOpKernels(const ProgramOp &op, const Program &program, const std::string &where) {
  if (op.kernels.empty())
    return;
  std::optional<std::vector<KernelRule>> rules = kernelRules(op, program);
  if (!rules)
    throw Error(where + ": names a compiled kernel, but stringc generates none for " + op.op +
                " with these shapes");
  if (rules->empty())
    throw Error(where + ": names a compiled kernel, but stringc generates none for " + op.op);
  if (rules->size() != op.kernels.size()) {
    std::string kinds;
    for (const KernelRule &r : *rules)
      kinds += (kinds.empty() ? "" : ", ") + r.kind;
    throw Error(fmt::format("{}: names {} compiled kernels, but {} runs {} ({})", where,
                            op.kernels.size(), op.op, rules->size(), kinds));
  }
  const std::string sizeDigest = opSizeDigest(OpShapes{op, program});
  for (size_t i = 0; i < rules->size(); ++i) {
    const KernelRule &rule = (*rules)[i];
    const ProgramKernel &k = op.kernels[i];
    const std::string at = fmt::format("{}.kernels[{}]", where, i);
    std::optional<KernelSymbol> symbol = parseKernelSymbol(k.symbol);
    if (!symbol)
      throw Error(fmt::format("{}: kernel {} is not a generated kernel's symbol "
                              "(\"stringc_k<N>_<digest>_{}\")",
                              at, quoteForMessage(k.symbol), rule.kind));
    if (symbol->kind != rule.kind)
      throw Error(fmt::format("{}: kernel {} is a \"{}\" kernel, but {} runs a \"{}\" kernel "
                              "here",
                              at, quoteForMessage(k.symbol), symbol->kind, op.op, rule.kind));
    if (symbol->digest != sizeDigest)
      throw Error(fmt::format("{}: kernel {} was generated for buffers of other sizes than the "
                              "value table gives this op (digest {}, the value table's {}): the "
                              "manifest does not match its kernel library",
                              at, quoteForMessage(k.symbol), symbol->digest, sizeDigest));
    if (k.range != rule.range)
      throw Error(fmt::format("{}.range: {}, but the \"{}\" kernel of {} with these shapes "
                              "runs over {}",
                              at, rangeText(k.range), rule.kind, op.op, rangeText(rule.range)));
  }
}

void checkSharedKernels(const Manifest &manifest, const std::string &path) {
  struct Use {
    std::string where;
    const ProgramOp *op = nullptr;
    std::vector<std::pair<int64_t, int64_t>> sizes;
  };
  std::map<std::string, Use> first;
  for (const char *name : {"forward", "gradients"}) {
    const Program &program = manifest.program(name);
    for (size_t i = 0; i < program.ops.size(); ++i) {
      const ProgramOp &op = program.ops[i];
      if (op.kernels.empty())
        continue;
      Use use{fmt::format("manifest.programs.{}.ops[{}] ({})", name, i, op.op), &op, {}};
      for (const auto *ids : {&op.operands, &op.results})
        for (ValueId id : *ids)
          use.sizes.push_back(affineSize(program.values[id].shape));
      for (const ProgramKernel &k : op.kernels) {
        auto [it, inserted] = first.emplace(k.symbol, use);
        if (inserted)
          continue;
        const Use &other = it->second;
        // checkOpKernels already matched each op's sizes against the
        // symbol's digest; sizes are compared again here because FNV-1a is
        // no defence against a manifest crafted to collide with it.
        std::string differs = other.op->op != op.op        ? "another op"
                              : other.op->attrs != op.attrs ? "other attributes"
                              : other.sizes != use.sizes    ? "buffers of other sizes"
                                                            : "";
        if (!differs.empty())
          throw Error(path, fmt::format("{}: kernel {} is also the kernel of {}, which has {} "
                                        "(a kernel runs only the ops it was generated for)",
                                        use.where, quoteForMessage(k.symbol), other.where,
                                        differs));
      }
    }
  }
}

std::vector<std::string> manifestKernelSymbols(const Manifest &manifest) {
  std::vector<std::string> symbols;
  std::set<std::string> seen;
  for (const char *name : {"forward", "gradients"})
    for (const ProgramOp &op : manifest.program(name).ops)
      for (const ProgramKernel &k : op.kernels)
        if (seen.insert(k.symbol).second)
          symbols.push_back(k.symbol);
  return symbols;
}

} // namespace stringrt::detail
