//===- Graph.cpp - ModelGraph helpers and the --emit=graph dump -----------===//

#include "stringc/Frontend/Graph.h"

#include <fmt/format.h>

namespace stringc {

const char *dtypeName(DType dtype) { return dtype == DType::F32 ? "f32" : "i32"; }

std::string formatShape(const std::vector<int64_t> &dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i > 0)
      out += ", ";
    out += dims[i] == kBatchDim ? std::string("B") : std::to_string(dims[i]);
  }
  return out + "]";
}

std::string formatType(const TensorType &type) {
  return dtypeName(type.dtype) + formatShape(type.dims);
}

const AttrValue *findAttr(const std::vector<NamedAttr> &attrs, std::string_view name) {
  for (const auto &[attrName, value] : attrs)
    if (attrName == name)
      return &value;
  return nullptr;
}

namespace {
std::string formatDouble(double value) {
  std::string text = fmt::format("{}", value);
  if (text.find_first_of(".eEn") == std::string::npos)
    text += ".0";
  return text;
}

std::string quote(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out + "\"";
}

struct AttrPrinter {
  std::string operator()(int64_t v) const { return std::to_string(v); }
  std::string operator()(double v) const { return formatDouble(v); }
  std::string operator()(bool v) const { return v ? "true" : "false"; }
  std::string operator()(const std::string &v) const { return quote(v); }
  std::string operator()(const EnumValue &v) const { return v.name; }
  std::string operator()(const std::vector<int64_t> &v) const { return formatShape(v); }
};

std::string formatAttrs(const std::vector<NamedAttr> &attrs) {
  if (attrs.empty())
    return "";
  std::string out = " {";
  for (size_t i = 0; i < attrs.size(); ++i) {
    if (i > 0)
      out += ", ";
    out += attrs[i].first + " = " + formatAttr(attrs[i].second);
  }
  return out + "}";
}
} // namespace

std::string formatAttr(const AttrValue &value) { return std::visit(AttrPrinter{}, value); }

std::vector<NamedAttr> GraphOptimizer::attributes() const {
  std::vector<NamedAttr> attrs = {{"kind", kind},
          {"lr", lr},
          {"beta1", beta1},
          {"beta2", beta2},
          {"eps", eps},
          {"weight_decay", weightDecay},
          {"momentum", momentum},
          {"clip_norm", clipNorm},
          {"schedule", schedule},
          {"warmup_steps", warmupSteps},
          {"min_lr", minLr}};
  if (emaDecay > 0)
    attrs.push_back({"ema_decay", emaDecay});
  return attrs;
}

std::vector<NamedAttr> GraphDataset::attributes() const {
  std::vector<NamedAttr> attrs = {{"kind", kind}, {"path", path}};
  if (kind == "text")
    attrs.push_back({"context_length", contextLength});
  if (cropPadding > 0)
    attrs.push_back({"crop_padding", cropPadding});
  if (flipProbability > 0)
    attrs.push_back({"flip", flipProbability});
  if (eraseProbability > 0)
    attrs.push_back({"erase", eraseProbability});
  return attrs;
}

const GraphOp *ModelGraph::definingOp(int valueId) const {
  if (valueId < 0 || valueId >= static_cast<int>(values.size()))
    return nullptr;
  int index = values[valueId].opIndex;
  return index >= 0 ? &ops[index] : nullptr;
}

const GraphParam *ModelGraph::findParam(std::string_view name) const {
  for (const GraphParam &param : params)
    if (param.name == name)
      return &param;
  return nullptr;
}

void printGraph(const ModelGraph &graph, std::ostream &os) {
  os << "model " << graph.modelName << '\n';
  os << "source " << graph.sourcePath << '\n';
  for (const GraphConstant &c : graph.constants) {
    os << "const " << c.name << " = ";
    if (const int64_t *i = std::get_if<int64_t>(&c.value))
      os << *i << '\n';
    else
      os << formatDouble(std::get<double>(c.value)) << '\n';
  }
  for (const GraphInput &input : graph.inputs)
    os << "input %" << input.valueId << ' ' << input.name << ": " << formatType(input.type) << '\n';
  for (const GraphParam &param : graph.params)
    os << "param " << param.name << ": " << formatType(param.type) << " = " << param.init
       << formatAttrs(param.initAttrs) << (param.frozen ? " frozen" : "") << '\n';
  for (const GraphOp &op : graph.ops) {
    os << '%' << op.resultId << " = " << op.name << '(';
    for (size_t i = 0; i < op.operands.size(); ++i)
      os << (i > 0 ? ", %" : "%") << op.operands[i];
    os << ')' << formatAttrs(op.attrs) << " : " << formatType(op.result) << "  loc(" << op.loc.line
       << ':' << op.loc.col;
    for (const SourceLoc &site : op.callSites)
      os << " <- " << site.line << ':' << site.col;
    os << ')' << (op.scope.empty() ? "" : "  in " + op.scope) << '\n';
  }
  for (const GraphOutput &output : graph.outputs)
    os << "output " << output.name << " = %" << output.valueId << '\n';
  os << "loss = %" << graph.lossId << '\n';
  os << "optimizer" << formatAttrs(graph.optimizer.attributes()) << '\n';
  if (graph.dataset)
    os << "dataset" << formatAttrs(graph.dataset->attributes()) << '\n';
}

} // namespace stringc
