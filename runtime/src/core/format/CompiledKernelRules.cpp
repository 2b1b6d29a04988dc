// The compiled kernels each op may name (CompiledKernelRules.h), checked
// against the compiled-kernel ABI (stringrt/abi/CompiledKernels.h), the rules
// the code generator builds its kernels by.
#include "format/CompiledKernelRules.h"

#include "format/AffineSize.h"
#include "format/Json.h"
#include "stringrt/Error.h"
#include "stringrt/KernelLibrary.h"
#include "stringrt/OpSchema.h"
#include "stringrt/abi/CompiledKernels.h"

#include <fmt/format.h>

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

// The kernels stringc generates for `op`, by the ABI's rules: an empty list
// for an op kind it generates none for; nullopt when the op's shapes are not
// ones it generates kernels for.
std::optional<std::vector<abi::KernelRule>> kernelRules(const ProgramOp &op,
                                                        const Program &program) {
  std::optional<OpCode> code = findOpCode(op.op);
  if (!code)
    return std::vector<abi::KernelRule>{};
  const OpShapes s{op, program};
  std::vector<Shape> operands, results;
  for (size_t k = 0; k < op.operands.size(); ++k)
    operands.push_back(s.in(k));
  for (size_t k = 0; k < op.results.size(); ++k)
    results.push_back(s.out(k));
  return abi::compiledKernelRules(*code, operands, results);
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
  std::optional<std::vector<abi::KernelRule>> rules = kernelRules(op, program);
  if (!rules)
    throw Error(where + ": names a compiled kernel, but stringc generates none for " + op.op +
                " with these shapes");
  if (rules->empty())
    throw Error(where + ": names a compiled kernel, but stringc generates none for " + op.op);
  if (rules->size() != op.kernels.size()) {
    std::string kinds;
    for (const abi::KernelRule &r : *rules)
      kinds += std::string(kinds.empty() ? "" : ", ") + abi::kernelKindName(r.kind);
    throw Error(fmt::format("{}: names {} compiled kernels, but {} runs {} ({})", where,
                            op.kernels.size(), op.op, rules->size(), kinds));
  }
  const std::string sizeDigest = opSizeDigest(OpShapes{op, program});
  for (size_t i = 0; i < rules->size(); ++i) {
    const abi::KernelRule &rule = (*rules)[i];
    const std::string ruleKind = abi::kernelKindName(rule.kind);
    const ProgramKernel &k = op.kernels[i];
    const std::string at = fmt::format("{}.kernels[{}]", where, i);
    std::optional<abi::KernelSymbolParts> symbol = abi::parseKernelSymbol(k.symbol);
    if (!symbol)
      throw Error(fmt::format("{}: kernel {} is not a generated kernel's symbol "
                              "(\"stringc_k<N>_<digest>_{}\")",
                              at, quoteForMessage(k.symbol), ruleKind));
    if (symbol->kind != ruleKind)
      throw Error(fmt::format("{}: kernel {} is a \"{}\" kernel, but {} runs a \"{}\" kernel "
                              "here",
                              at, quoteForMessage(k.symbol), symbol->kind, op.op, ruleKind));
    if (symbol->digest != sizeDigest)
      throw Error(fmt::format("{}: kernel {} was generated for buffers of other sizes than the "
                              "value table gives this op (digest {}, the value table's {}): the "
                              "manifest does not match its kernel library",
                              at, quoteForMessage(k.symbol), symbol->digest, sizeDigest));
    if (k.range != rule.range)
      throw Error(fmt::format("{}.range: {}, but the \"{}\" kernel of {} with these shapes "
                              "runs over {}",
                              at, rangeText(k.range), ruleKind, op.op, rangeText(rule.range)));
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
