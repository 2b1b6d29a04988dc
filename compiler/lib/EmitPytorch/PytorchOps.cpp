//===- PytorchOps.cpp - one pe op as a PyTorch expression -----------------===//
//
// Simple ops are written inline (`x @ w + b`, F.layer_norm, F.gelu); the
// rest call the pe_ops.py function of the same name, which the emitted file
// carries. Attribute names are docs/dialect.md's, and so are the keyword
// arguments of pe_ops.py's functions.
//
//===----------------------------------------------------------------------===//
#include "PytorchOps.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>

namespace stringc::pytorch {

using stringrt::OpCode;

namespace {

// pe_ops.py, embedded at build time (CMakeLists.txt).
#include "PeOpsSource.inc"

std::string formatDouble(double value) {
  char text[64];
  // Whole numbers as Python writes them (100.0, not 1e+02).
  if (value == static_cast<double>(static_cast<int64_t>(value)) && value > -1e15 && value < 1e15)
    return std::to_string(static_cast<int64_t>(value)) + ".0";
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(text, sizeof text, "%.*g", precision, value);
    if (std::strtod(text, nullptr) == value)
      break;
  }
  std::string result = text;
  if (result == "inf")
    return "math.inf";
  if (result == "-inf")
    return "-math.inf";
  if (result == "nan")
    return "math.nan";
  if (result.find_first_of(".e") == std::string::npos)
    result += ".0";
  return result;
}

std::string quote(const std::string &text) {
  std::string result = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\')
      result += '\\';
    result += c;
  }
  return result + "\"";
}

// NAME(operands..., key=attr, ...) for the attributes the op has, `keys`
// in order; the function comes from pe_ops.py.
std::string call(const std::string &name, const std::vector<std::string> &operands,
                 const std::vector<std::string> &keys, const AttrText &attr,
                 std::set<std::string> &helpers, const std::string &dtype = "") {
  helpers.insert(name);
  std::string text = name + "(";
  bool first = true;
  auto add = [&](const std::string &part) {
    text += (first ? "" : ", ") + part;
    first = false;
  };
  for (const std::string &operand : operands)
    add(operand);
  for (const std::string &key : keys)
    if (std::optional<std::string> value = attr(key))
      add(key + "=" + *value);
  if (!dtype.empty())
    add("dtype=" + dtype);
  return text + ")";
}

const char *noun(OpCode code) {
  switch (code) {
  case OpCode::Linear: return "projected";
  case OpCode::LayerNorm: return "normed";
  case OpCode::Gelu:
  case OpCode::Relu: return "activated";
  case OpCode::Add: return "summed";
  case OpCode::Sub: return "difference";
  case OpCode::Mul: return "product";
  case OpCode::Scale: return "scaled";
  case OpCode::Mean: return "mean";
  case OpCode::PatchEmbed: return "patches";
  case OpCode::TokenEmbed: return "embedded";
  case OpCode::ClassToken: return "tokens";
  case OpCode::SelectToken: return "selected";
  case OpCode::CrossEntropy: return "cross_entropy_loss";
  case OpCode::SeqPositions:
  case OpCode::GridPositions: return "positions";
  case OpCode::RopeFreqs: return "freqs";
  case OpCode::Rope:
  case OpCode::Cayley:
  case OpCode::ApplyRotation: return "rotated";
  case OpCode::Householder: return "reflected";
  case OpCode::Skew:
  case OpCode::SparseSkew: return "skew_matrix";
  case OpCode::RelativePositions: return "offsets";
  case OpCode::GeneratorExp: return "rotations";
  case OpCode::CommutatorNorm: return "commutator";
  case OpCode::SpdGate: return "gated";
  case OpCode::Sinusoidal: return "sinusoids";
  case OpCode::Attention: return "attended";
  case OpCode::Dropout: return "dropped";
  default: return nullptr;
  }
}

} // namespace

std::string pythonLiteral(const AttrValue &value) {
  struct Visitor {
    std::string operator()(int64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const { return formatDouble(v); }
    std::string operator()(bool v) const { return v ? "True" : "False"; }
    std::string operator()(const std::string &v) const { return quote(v); }
    std::string operator()(const EnumValue &v) const { return quote(v.name); }
    std::string operator()(const std::vector<int64_t> &v) const {
      std::string text = "[";
      for (size_t i = 0; i < v.size(); ++i)
        text += (i ? ", " : "") + std::to_string(v[i]);
      return text + "]";
    }
  };
  return std::visit(Visitor{}, value);
}

bool needsDtype(const GraphOp &op) {
  return op.code == OpCode::SeqPositions || op.code == OpCode::GridPositions ||
         op.code == OpCode::RopeFreqs || op.code == OpCode::Sinusoidal;
}

std::string resultNoun(const GraphOp &op) {
  if (const char *word = noun(op.code))
    return word;
  return op.name.substr(op.name.find('.') + 1) + "_out";
}

std::optional<std::string> renderOp(const GraphOp &op, const std::vector<std::string> &x,
                                    const AttrText &attr, const std::string &dtype,
                                    std::set<std::string> &helpers, std::string &error) {
  const std::string &name = op.name;
  const OpCode code = op.code;
  const size_t n = x.size();
  if (code == OpCode::Linear && (n == 2 || n == 3))
    return x[0] + " @ " + x[1] + (n == 3 ? " + " + x[2] : "");
  if (code == OpCode::Add && n == 2)
    return x[0] + " + " + x[1];
  if (code == OpCode::Sub && n == 2)
    return x[0] + " - " + x[1];
  if (code == OpCode::Mul && n == 2)
    return x[0] + " * " + x[1];
  if (code == OpCode::Scale && n == 1) {
    std::string text = attr("factor").value_or("1.0") + " * " + x[0];
    std::optional<std::string> bias = attr("bias");
    if (bias && *bias != "0.0")
      text += " + " + *bias;
    return text;
  }
  if (code == OpCode::LayerNorm && n == 3) {
    const std::vector<int64_t> &dims = op.result.dims;
    return "F.layer_norm(" + x[0] + ", (" + std::to_string(dims.back()) + ",), " + x[1] + ", " +
           x[2] + ", eps=" + attr("epsilon").value_or("1e-05") + ")";
  }
  if (code == OpCode::Gelu && n == 1)
    return "F.gelu(" + x[0] + (attr("approximate").value_or("False") == "True"
                                   ? ", approximate=\"tanh\")"
                                   : ")");
  if (code == OpCode::Relu && n == 1)
    return "torch.relu(" + x[0] + ")";
  if (code == OpCode::Mean && n == 1) {
    std::optional<std::string> axis = attr("axis");
    return x[0] + (axis ? ".mean(dim=" + *axis + ")" : ".mean()");
  }
  if (code == OpCode::TokenEmbed && n == 2)
    return x[1] + "[" + x[0] + ".long()]";
  if (code == OpCode::SelectToken && n == 1)
    return x[0] + "[:, " + attr("index").value_or("0") + "]";
  if (code == OpCode::PatchEmbed && (n == 2 || n == 3)) {
    std::vector<std::string> operands = x;
    if (n == 2)
      operands.push_back("None");
    return call("patch_embed", operands, {"patch"}, attr, helpers);
  }
  if (code == OpCode::Dropout && n == 1) {
    // Only while training, as the runtime (its forward program has none),
    // with its masks for the key the model's set_step_key gives.
    helpers.insert("dropout");
    std::string text = "dropout(" + x[0] + ", rate=" + attr("p").value_or("0.0") +
                       ", stream=" + attr("stream").value_or("0");
    if (attr("per_sample").value_or("False") == "True")
      text += ", per_sample=True";
    return text + ", key=self.step_key) if self.training else " + x[0];
  }
  if (code == OpCode::Attention && (n == 3 || n == 4)) {
    std::string text = call("attention", {x[0], x[1], x[2]}, {"heads", "scale", "mask", "skip_base"},
                            attr, helpers);
    if (n == 4)
      text.insert(text.size() - 1, ", relative=" + x[3]);
    return text;
  }
  // Ops that are a pe_ops.py function of the same name: its operands, then
  // these attributes.
  static const std::map<OpCode, std::pair<size_t, std::vector<std::string>>> functions = {
      {OpCode::ClassToken, {2, {}}},
      {OpCode::CrossEntropy, {2, {"smoothing"}}},
      {OpCode::SeqPositions, {0, {"length", "special"}}},
      {OpCode::GridPositions, {0, {"rows", "cols", "special"}}},
      {OpCode::RopeFreqs, {0, {"kind", "dim", "heads", "base"}}},
      {OpCode::Sinusoidal, {0, {"length", "dim", "base"}}},
      {OpCode::RelativePositions, {1, {}}},
      {OpCode::Rope, {3, {}}},
      {OpCode::Householder, {4, {}}},
      {OpCode::Skew, {1, {"dim"}}},
      {OpCode::SparseSkew, {1, {"dim", "support"}}},
      {OpCode::Cayley, {2, {}}},
      {OpCode::GeneratorExp, {2, {}}},
      {OpCode::ApplyRotation, {2, {"heads"}}},
      {OpCode::CommutatorNorm, {1, {}}},
      {OpCode::SpdGate, {2, {}}},
  };
  auto it = functions.find(code);
  if (it != functions.end() && it->second.first == n)
    return call(name.substr(3), x, it->second.second, attr, helpers,
                needsDtype(op) ? dtype : "");
  error = "'" + name + "' (" + std::to_string(n) + " operand" + (n == 1 ? "" : "s") +
          ") has no PyTorch form";
  return std::nullopt;
}

namespace {

// pe_ops.py's functions: each `def NAME(` at column 0 up to the next.
struct Function {
  std::string name, text;
  std::vector<std::string> uses;
};

std::vector<Function> parseFunctions() {
  std::vector<Function> functions;
  std::istringstream in(kPeOpsSource);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("def ", 0) == 0) {
      functions.push_back({line.substr(4, line.find('(') - 4), "", {}});
    } else if (functions.empty()) {
      continue; // the file's header comment
    }
    if (line.find("# uses:") != std::string::npos) {
      std::istringstream words(line.substr(line.find("# uses:") + 7));
      for (std::string word; words >> word;)
        functions.back().uses.push_back(word);
      continue;
    }
    functions.back().text += line + "\n";
  }
  return functions;
}

} // namespace

std::vector<std::string> supportFunctionNames() {
  std::vector<std::string> names;
  for (const Function &f : parseFunctions())
    names.push_back(f.name);
  return names;
}

std::string supportFunctions(const std::set<std::string> &helpers) {
  static const std::vector<Function> functions = parseFunctions();
  std::set<std::string> wanted = helpers;
  for (bool grew = true; grew;) {
    grew = false;
    for (const Function &f : functions)
      if (wanted.count(f.name))
        for (const std::string &use : f.uses)
          grew |= wanted.insert(use).second;
  }
  std::string text;
  for (const Function &f : functions) {
    if (!wanted.count(f.name))
      continue;
    std::string body = f.text;
    while (body.size() > 1 && body[body.size() - 1] == '\n' && body[body.size() - 2] == '\n')
      body.pop_back();
    text += "\n\n" + body;
  }
  return text;
}

} // namespace stringc::pytorch
