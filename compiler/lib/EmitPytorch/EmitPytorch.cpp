//===- EmitPytorch.cpp - a checked model as a PyTorch module --------------===//
//
// The graph is unrolled (every block use instantiated, docs/language.md);
// this file folds it back: the ops of each use (GraphOp::scope, "encoder.1")
// become an instance; the uses of one block must have the same ops, operand
// wiring and types, and may differ in attribute values (a layer index),
// which become constructor arguments of the block's class. Values cross an
// instance's boundary as its forward's arguments (first-use order) and
// results. Op expressions come from PytorchOps.cpp.
//
//===----------------------------------------------------------------------===//
#include "stringc/EmitPytorch/EmitPytorch.h"

#include "PytorchOps.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <memory>
#include <set>
#include <sstream>

namespace stringc {

namespace {

using pytorch::pythonLiteral;
using stringrt::OpCode;

struct Instance;

// One step of an instance's body: an op of its own, or a use of a block.
struct Item {
  int op = -1;
  Instance *child = nullptr;
};

struct Instance {
  std::string path;  // "" for the model, "encoder.0", "layer.0.mlp.1"
  std::string block; // "encoder"; "" for the model
  int64_t use = 0;
  Instance *parent = nullptr;
  std::vector<Item> items;
  std::set<int> ops; // every op of the instance and of the uses inside it
  int firstOp = -1;
  std::vector<int> args, results; // value ids
  // Attribute values by item and name (a use inside: its constructor's).
  std::map<std::pair<size_t, std::string>, std::string> attrs;
  std::map<std::string, std::string> ctorValues; // this use's constructor arguments
};

// A block's class: built from its first use.
struct BlockClass {
  std::string className;
  Instance *first = nullptr;
  std::vector<Instance *> uses;
  std::map<std::pair<size_t, std::string>, std::string> ctorArgs; // (item, attr) -> argument
  std::vector<std::string> ctorOrder;
};

std::string camelCase(const std::string &name) {
  std::string result;
  bool upper = true;
  for (char c : name) {
    if (c == '_') {
      upper = true;
      continue;
    }
    result += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    upper = false;
  }
  return result;
}

// A Python variable name from a name of the .pe file (never one letter).
std::string variableName(const std::string &name, const char *suffix) {
  return name.size() == 1 ? name + suffix : name;
}

// The dropout masks' key of a class with dropout (pe_ops.py's dropout).
const char *const kStepKeyInit =
    "        self.step_key = (0, 0, 0)  # (seed, step, first sample): set_step_key\n";

class Emitter {
public:
  Emitter(const ModelGraph &graph, std::ostream &errors) : graph_(graph), errors_(errors) {}
  bool run(std::ostream &out);

private:
  Instance *instanceFor(const std::string &path, int op);
  bool analyse();
  bool buildClass(const std::string &block);
  std::string localParam(const Instance &instance, const GraphOp &op) const;
  std::string structureKey(Instance &instance) const;
  // Writes the statements of `items` of `instance` (those with keep[j]) into
  // `body`, with the expressions of the values so far in `exprs`.
  bool emitItems(const Instance &instance, const BlockClass *cls, const std::vector<bool> &keep,
                 std::map<int, std::string> &exprs, std::set<std::string> &names,
                 std::string &body);
  std::string valueNoun(int value) const;
  std::string fresh(std::set<std::string> &names, const std::string &base) const;
  std::string writeClass(const BlockClass &cls);
  bool writeModel(std::string &text);
  std::string moduleListOf(const Instance &instance, const BlockClass *cls,
                           const std::string &block) const;
  std::string parameterLines(const Instance &instance) const;
  // "FILE:LINE:COL: error: --emit=pytorch: MESSAGE" at `loc`.
  bool fail(const SourceLoc &loc, const std::string &message) {
    errors_ << graph_.sourcePath << ":" << loc.line << ":" << loc.col
            << ": error: --emit=pytorch: " << message << "\n";
    return false;
  }
  // Where a block use was made: among its first op's call sites (innermost
  // first), the one as many levels out as that op is nested below the use.
  SourceLoc useSite(const Instance &instance) const {
    const GraphOp &op = graph_.ops[instance.firstOp];
    auto depth = [](const std::string &path) {
      return path.empty() ? size_t{0} : (std::count(path.begin(), path.end(), '.') + 1) / 2;
    };
    size_t level = depth(op.scope) - depth(instance.path);
    return level < op.callSites.size() ? op.callSites[level] : op.loc;
  }

  const ModelGraph &graph_;
  std::ostream &errors_;
  std::map<std::string, std::unique_ptr<Instance>> instances_;
  Instance *root_ = nullptr;
  std::vector<std::vector<int>> users_; // value id -> ops using it
  std::map<std::string, BlockClass> classes_;
  std::vector<std::string> classOrder_; // dependencies first
  std::set<std::string> helpers_{"load_checkpoint"};
  std::set<std::string> reserved_;
  bool failed_ = false;
  bool usesDropout_ = false; // a dropout anywhere: the model gets set_step_key
  std::string forwardParams_, lossParams_; // "image", "image, label"
};

Instance *Emitter::instanceFor(const std::string &path, int op) {
  auto it = instances_.find(path);
  if (it != instances_.end())
    return it->second.get();
  auto instance = std::make_unique<Instance>();
  instance->path = path;
  instance->firstOp = op;
  Instance *raw = instance.get();
  instances_[path] = std::move(instance);
  if (path.empty())
    return raw;
  // "layer.0.mlp.1": the use "mlp.1" inside "layer.0".
  size_t useDot = path.rfind('.');
  size_t nameDot = useDot == 0 ? std::string::npos : path.rfind('.', useDot - 1);
  size_t nameStart = nameDot == std::string::npos ? 0 : nameDot + 1;
  raw->block = path.substr(nameStart, useDot - nameStart);
  raw->use = std::stoll(path.substr(useDot + 1));
  raw->parent = instanceFor(nameDot == std::string::npos ? "" : path.substr(0, nameDot), op);
  raw->parent->items.push_back({-1, raw});
  return raw;
}

std::string Emitter::localParam(const Instance &instance, const GraphOp &op) const {
  const std::string *full = std::get_if<std::string>(op.attr("param"));
  std::string name = full ? *full : "";
  if (!instance.path.empty() && name.rfind(instance.path + ".", 0) == 0)
    name = name.substr(instance.path.size() + 1);
  return name;
}

bool Emitter::analyse() {
  root_ = instanceFor("", 0);
  users_.assign(graph_.values.size(), {});
  for (size_t i = 0; i < graph_.ops.size(); ++i) {
    const GraphOp &op = graph_.ops[i];
    Instance *instance = instanceFor(op.scope, static_cast<int>(i));
    instance->items.push_back({static_cast<int>(i), nullptr});
    for (Instance *at = instance; at; at = at->parent)
      at->ops.insert(static_cast<int>(i));
    for (int operand : op.operands)
      users_[operand].push_back(static_cast<int>(i));
  }
  std::set<int> visible; // outputs and the loss
  for (const GraphOutput &output : graph_.outputs)
    visible.insert(output.valueId);
  visible.insert(graph_.lossId);
  for (auto &[path, instance] : instances_) {
    if (path.empty())
      continue;
    std::set<int> seen;
    for (int i : instance->ops) {
      for (int operand : graph_.ops[i].operands) {
        int definer = graph_.values[operand].opIndex;
        if (definer >= 0 && instance->ops.count(definer))
          continue;
        if (definer > instance->firstOp)
          return fail(useSite(*instance), "the use '" + path + "' of block '" + instance->block +
                      "' reads a value computed after it begins");
        if (seen.insert(operand).second)
          instance->args.push_back(operand);
      }
      int result = graph_.ops[i].resultId;
      bool outside = visible.count(result) > 0;
      for (int user : users_[result])
        outside = outside || !instance->ops.count(user);
      if (outside)
        instance->results.push_back(result);
    }
  }
  return true;
}

// The instance's body as text, attribute values left out (recorded in
// instance.attrs): equal for the uses of one block.
std::string Emitter::structureKey(Instance &instance) const {
  std::map<int, std::string> refs;
  for (size_t k = 0; k < instance.args.size(); ++k)
    refs[instance.args[k]] = "a" + std::to_string(k);
  std::ostringstream key;
  for (size_t j = 0; j < instance.items.size(); ++j) {
    const Item &item = instance.items[j];
    std::vector<int> operands;
    if (item.child) {
      const BlockClass &cls = classes_.at(item.child->block);
      key << "use " << item.child->block << "." << item.child->use;
      operands = item.child->args;
      for (const std::string &arg : cls.ctorOrder)
        instance.attrs[{j, arg}] = item.child->ctorValues.at(arg);
      for (size_t r = 0; r < item.child->results.size(); ++r)
        refs[item.child->results[r]] = "v" + std::to_string(j) + "." + std::to_string(r);
    } else {
      const GraphOp &op = graph_.ops[item.op];
      key << op.name << " " << formatType(op.result);
      operands = op.operands;
      for (const NamedAttr &attr : op.attrs) {
        if (attr.first == "param") {
          key << " param " << localParam(instance, op);
          continue;
        }
        key << " " << attr.first;
        instance.attrs[{j, attr.first}] = pythonLiteral(attr.second);
      }
      refs[op.resultId] = "v" + std::to_string(j);
    }
    key << "(";
    for (int operand : operands)
      key << refs.at(operand) << ",";
    key << ");";
  }
  key << " -> ";
  for (int result : instance.results)
    key << refs.at(result) << ",";
  return key.str();
}

bool Emitter::buildClass(const std::string &block) {
  if (classes_.count(block))
    return true;
  BlockClass cls;
  for (auto &[path, instance] : instances_)
    if (instance->block == block && !path.empty())
      cls.uses.push_back(instance.get());
  std::sort(cls.uses.begin(), cls.uses.end(),
            [](const Instance *a, const Instance *b) { return a->firstOp < b->firstOp; });
  // The blocks used inside first (their constructor arguments are attributes here).
  for (Instance *use : cls.uses)
    for (const Item &item : use->items)
      if (item.child && !buildClass(item.child->block))
        return false;
  cls.first = cls.uses.front();
  std::string firstKey = structureKey(*cls.first);
  for (Instance *use : cls.uses)
    if (structureKey(*use) != firstKey)
      return fail(useSite(*use), "the uses '" + cls.first->path + "' and '" + use->path +
                                     "' of block '" +
                  block + "' differ in their ops, not only in attribute values");
  // Attributes that differ between the uses: constructor arguments.
  std::map<std::string, int> nameCount;
  std::vector<std::pair<size_t, std::string>> differing;
  for (const auto &[where, value] : cls.first->attrs) {
    bool same = true;
    for (Instance *use : cls.uses)
      same = same && use->attrs.at(where) == value;
    if (!same) {
      differing.push_back(where);
      ++nameCount[where.second];
    }
  }
  std::map<std::string, int> nameSeen; // stream_1, stream_2: in body order
  for (const auto &where : differing) {
    std::string arg = nameCount[where.second] == 1
                          ? where.second
                          : where.second + "_" + std::to_string(++nameSeen[where.second]);
    cls.ctorArgs[where] = arg;
    cls.ctorOrder.push_back(arg);
    for (Instance *use : cls.uses)
      use->ctorValues[arg] = use->attrs.at(where);
  }
  cls.className = camelCase(block);
  if (cls.className == camelCase(graph_.modelName))
    cls.className += "Block";
  classes_[block] = cls;
  classOrder_.push_back(block);
  return true;
}

std::string Emitter::fresh(std::set<std::string> &names, const std::string &base) const {
  std::string name = base;
  for (int k = 2; names.count(name) || reserved_.count(name); ++k)
    name = base + "_" + std::to_string(k);
  names.insert(name);
  return name;
}

std::string Emitter::valueNoun(int value) const {
  const GraphValue &v = graph_.values[value];
  if (v.inputIndex >= 0)
    return variableName(graph_.inputs[v.inputIndex].name, "_input");
  const GraphOp &op = graph_.ops[v.opIndex];
  if (op.code == OpCode::GetParam) {
    const std::string *full = std::get_if<std::string>(op.attr("param"));
    std::string name = full ? *full : "param";
    return variableName(name.substr(name.rfind('.') + 1), "_param");
  }
  if (op.result.hasBatch() && op.code != OpCode::CrossEntropy)
    return "hidden";
  return pytorch::resultNoun(op);
}

bool Emitter::emitItems(const Instance &instance, const BlockClass *cls,
                        const std::vector<bool> &keep, std::map<int, std::string> &exprs,
                        std::set<std::string> &names, std::string &body) {
  const std::string indent = "        ";
  bool dtypeWritten = false;
  for (size_t j = 0; j < instance.items.size(); ++j) {
    if (!keep[j])
      continue;
    const Item &item = instance.items[j];
    if (item.child) {
      std::string call = "self." + item.child->block + "[" + std::to_string(item.child->use) + "](";
      for (size_t k = 0; k < item.child->args.size(); ++k)
        call += (k ? ", " : "") + exprs.at(item.child->args[k]);
      call += ")";
      std::string targets;
      for (size_t r = 0; r < item.child->results.size(); ++r) {
        std::string name = fresh(names, valueNoun(item.child->results[r]));
        exprs[item.child->results[r]] = name;
        targets += (r ? ", " : "") + name;
      }
      body += indent + targets + " = " + call + "\n";
      continue;
    }
    const GraphOp &op = graph_.ops[item.op];
    if (op.code == OpCode::GetParam) {
      exprs[op.resultId] = "self." + localParam(instance, op);
      continue;
    }
    if (pytorch::needsDtype(op) && !dtypeWritten) {
      body += indent + "dtype = next(self.parameters()).dtype\n";
      names.insert("dtype");
      dtypeWritten = true;
    }
    std::vector<std::string> operands;
    for (int operand : op.operands)
      operands.push_back(exprs.at(operand));
    pytorch::AttrText attr = [&](const std::string &name) -> std::optional<std::string> {
      if (cls) {
        auto arg = cls->ctorArgs.find({j, name});
        if (arg != cls->ctorArgs.end())
          return "self." + arg->second;
      }
      const AttrValue *value = op.attr(name);
      if (!value)
        return std::nullopt;
      return pythonLiteral(*value);
    };
    std::string error;
    std::optional<std::string> expr =
        pytorch::renderOp(op, operands, attr, "dtype", helpers_, error);
    if (!expr)
      return fail(op.loc, error);
    std::string name = fresh(names, pytorch::resultNoun(op));
    exprs[op.resultId] = name;
    body += indent + name + " = " + *expr + "\n";
  }
  return true;
}

// `self.NAME = nn.ModuleList([...])` of the uses of `block` inside
// `instance` (of class `cls`, null for the model): a constructor argument
// that differs between the uses of `instance`'s own block is its own.
std::string Emitter::moduleListOf(const Instance &instance, const BlockClass *cls,
                                  const std::string &block) const {
  const BlockClass &used = classes_.at(block);
  std::vector<std::pair<size_t, const Instance *>> uses;
  for (size_t j = 0; j < instance.items.size(); ++j)
    if (instance.items[j].child && instance.items[j].child->block == block)
      uses.emplace_back(j, instance.items[j].child);
  std::sort(uses.begin(), uses.end(),
            [](const auto &a, const auto &b) { return a.second->use < b.second->use; });
  std::string line = "        self." + block + " = nn.ModuleList([";
  if (used.ctorOrder.empty() && uses.size() > 1)
    return line + used.className + "() for use in range(" + std::to_string(uses.size()) + ")])\n";
  for (size_t u = 0; u < uses.size(); ++u) {
    line += (u ? ", " : "") + used.className + "(";
    for (size_t a = 0; a < used.ctorOrder.size(); ++a) {
      const std::string &arg = used.ctorOrder[a];
      std::string value = uses[u].second->ctorValues.at(arg);
      if (cls) {
        auto own = cls->ctorArgs.find({uses[u].first, arg});
        if (own != cls->ctorArgs.end())
          value = own->second;
      }
      line += (a ? ", " : "") + arg + "=" + value;
    }
    line += ")";
  }
  return line + "])\n";
}

std::string Emitter::parameterLines(const Instance &instance) const {
  std::string lines;
  for (const Item &item : instance.items) {
    if (item.child || graph_.ops[item.op].code != OpCode::GetParam)
      continue;
    const GraphOp &op = graph_.ops[item.op];
    const std::string *full = std::get_if<std::string>(op.attr("param"));
    const GraphParam *param = full ? graph_.findParam(*full) : nullptr;
    if (!param)
      continue;
    std::string shape;
    for (size_t d = 0; d < param->type.dims.size(); ++d)
      shape += (d ? ", " : "") + std::to_string(param->type.dims[d]);
    if (param->type.dims.empty())
      shape = "()";
    lines += "        self." + localParam(instance, op) + " = nn.Parameter(torch.zeros(" + shape +
             ")" + (param->frozen ? ", requires_grad=False" : "") + ")\n";
  }
  return lines;
}

std::string Emitter::writeClass(const BlockClass &cls) {
  const Instance &first = *cls.first;
  std::string text = "\n\nclass " + cls.className + "(nn.Module):\n";
  text += "    \"\"\"The block `" + first.block + "` of " + graph_.modelName +
          ": one instance per use, in the nn.ModuleList `" + first.block + "` of its user.\"\"\"\n\n";
  text += "    def __init__(self";
  for (const std::string &arg : cls.ctorOrder)
    text += ", " + arg;
  text += "):\n        super().__init__()\n";
  for (const std::string &arg : cls.ctorOrder)
    text += "        self." + arg + " = " + arg + "\n";
  text += parameterLines(first);
  std::vector<std::string> listed;
  for (const Item &item : first.items)
    if (item.child && std::find(listed.begin(), listed.end(), item.child->block) == listed.end()) {
      listed.push_back(item.child->block);
      text += moduleListOf(first, &cls, item.child->block);
    }
  const size_t initEnd = text.size();
  std::set<std::string> names;
  std::map<int, std::string> exprs;
  text += "\n    def forward(self";
  for (int arg : first.args) {
    std::string name = fresh(names, valueNoun(arg));
    exprs[arg] = name;
    text += ", " + name;
  }
  text += "):\n";
  std::string body;
  if (!emitItems(first, &cls, std::vector<bool>(first.items.size(), true), exprs, names, body)) {
    failed_ = true;
    return "";
  }
  text += body + "        return ";
  for (size_t r = 0; r < first.results.size(); ++r)
    text += (r ? ", " : "") + exprs.at(first.results[r]);
  if (body.find("self.step_key") != std::string::npos) {
    text.insert(initEnd, kStepKeyInit);
    usesDropout_ = true;
  }
  return text + "\n";
}

bool Emitter::writeModel(std::string &text) {
  const Instance &root = *root_;
  // The model's items that compute `targets`, stopping at `given`.
  std::map<int, size_t> itemOf;
  for (size_t j = 0; j < root.items.size(); ++j) {
    const Item &item = root.items[j];
    if (item.child)
      for (int result : item.child->results)
        itemOf[result] = j;
    else
      itemOf[graph_.ops[item.op].resultId] = j;
  }
  auto needed = [&](std::vector<int> targets, const std::set<int> &given, std::set<int> &inputs) {
    std::vector<bool> keep(root.items.size(), false);
    while (!targets.empty()) {
      int value = targets.back();
      targets.pop_back();
      if (given.count(value))
        continue;
      if (graph_.values[value].inputIndex >= 0) {
        inputs.insert(graph_.values[value].inputIndex);
        continue;
      }
      size_t j = itemOf.at(value);
      if (keep[j])
        continue;
      keep[j] = true;
      const Item &item = root.items[j];
      for (int operand : item.child ? item.child->args : graph_.ops[item.op].operands)
        targets.push_back(operand);
    }
    return keep;
  };
  auto signature = [&](const std::set<int> &inputs, std::set<std::string> &names,
                       std::map<int, std::string> &exprs) {
    std::string params;
    for (size_t i = 0; i < graph_.inputs.size(); ++i) {
      if (!inputs.count(static_cast<int>(i)))
        continue;
      std::string name = fresh(names, variableName(graph_.inputs[i].name, "_input"));
      exprs[graph_.inputs[i].valueId] = name;
      params += ", " + name;
    }
    return params;
  };

  const std::string className = camelCase(graph_.modelName);
  std::vector<int> outputs;
  for (const GraphOutput &output : graph_.outputs)
    outputs.push_back(output.valueId);
  std::set<int> forwardInputs;
  std::vector<bool> forwardItems = needed(outputs, {}, forwardInputs);

  text += "\n\nclass " + className + "(nn.Module):\n";
  text += "    \"\"\"The model " + graph_.modelName +
          ". Its parameters are zeros until loaded:\n"
          "    model.load_state_dict(load_checkpoint(\"" +
          graph_.modelName + ".ckpt\")).\"\"\"\n\n";
  text += "    def __init__(self):\n        super().__init__()\n";
  text += parameterLines(root);
  std::vector<std::string> listed;
  for (const Item &item : root.items)
    if (item.child && std::find(listed.begin(), listed.end(), item.child->block) == listed.end()) {
      listed.push_back(item.child->block);
      text += moduleListOf(root, nullptr, item.child->block);
    }

  const size_t initEnd = text.size();
  // forward: the outputs.
  std::set<std::string> names;
  std::map<int, std::string> exprs;
  std::string forwardParams = signature(forwardInputs, names, exprs);
  forwardParams_ = forwardParams.empty() ? "" : forwardParams.substr(2);
  text += "\n    def forward(self" + forwardParams + "):\n";
  text += "        \"\"\"The model's output" + std::string(outputs.size() > 1 ? "s, by name" : "") +
          ".\"\"\"\n";
  std::string body;
  if (!emitItems(root, nullptr, forwardItems, exprs, names, body))
    return false;
  text += body;
  if (graph_.outputs.size() == 1) {
    text += "        return " + exprs.at(outputs[0]) + "\n";
  } else {
    text += "        return {";
    for (size_t k = 0; k < graph_.outputs.size(); ++k)
      text += std::string(k ? ", " : "") + "\"" + graph_.outputs[k].name + "\": " + exprs.at(outputs[k]);
    text += "}\n";
  }

  // loss: the outputs from forward, then the loss's own ops.
  std::set<int> given(outputs.begin(), outputs.end());
  std::set<int> lossInputs;
  std::vector<bool> lossItems = needed({graph_.lossId}, given, lossInputs);
  bool usesOutputs = false;
  {
    std::set<int> all;
    std::vector<bool> full = needed({graph_.lossId}, {}, all);
    for (size_t j = 0; j < full.size(); ++j)
      usesOutputs = usesOutputs || (full[j] && !lossItems[j]);
  }
  if (usesOutputs || given.count(graph_.lossId))
    lossInputs.insert(forwardInputs.begin(), forwardInputs.end());
  names.clear();
  exprs.clear();
  std::string lossParams = signature(lossInputs, names, exprs);
  lossParams_ = lossParams.empty() ? "" : lossParams.substr(2);
  text += "\n    def loss(self" + lossParams + "):\n";
  text += "        \"\"\"The training loss (a 0-d tensor).\"\"\"\n";
  if (usesOutputs || given.count(graph_.lossId)) {
    std::string call = "self.forward(" + (forwardParams.empty() ? "" : forwardParams.substr(2)) + ")";
    if (graph_.outputs.size() == 1) {
      std::string name = fresh(names, variableName(graph_.outputs[0].name, "_output"));
      text += "        " + name + " = " + call + "\n";
      exprs[outputs[0]] = name;
    } else {
      std::string name = fresh(names, "outputs");
      text += "        " + name + " = " + call + "\n";
      for (size_t k = 0; k < graph_.outputs.size(); ++k)
        exprs[outputs[k]] = name + "[\"" + graph_.outputs[k].name + "\"]";
    }
  }
  body.clear();
  if (!emitItems(root, nullptr, lossItems, exprs, names, body))
    return false;
  text += body + "        return " + exprs.at(graph_.lossId) + "\n";
  if (text.find("self.step_key", initEnd) != std::string::npos) {
    text.insert(initEnd, kStepKeyInit);
    usesDropout_ = true;
  }
  if (usesDropout_)
    text += "\n    def set_step_key(self, seed, step, first_sample=0):\n"
            "        \"\"\"The key of the dropout masks of the steps to come, as the runtime's\n"
            "        (DropoutMask.h): `stringrun train --seed S` draws step t's with (S, t - 1, 0).\"\"\"\n"
            "        for module in self.modules():\n"
            "            if hasattr(module, \"step_key\"):\n"
            "                module.step_key = (seed, step, first_sample)\n";
  return true;
}

bool Emitter::run(std::ostream &out) {
  if (!analyse())
    return false;
  // Names the functions of the file and the modules take.
  for (const char *name : {"self", "torch", "nn", "F", "math", "json", "struct", "dtype"})
    reserved_.insert(name);
  for (const std::string &name : pytorch::supportFunctionNames())
    reserved_.insert(name);
  std::vector<std::string> blocks;
  for (auto &[path, instance] : instances_)
    if (!path.empty() && std::find(blocks.begin(), blocks.end(), instance->block) == blocks.end())
      blocks.push_back(instance->block);
  for (const std::string &block : blocks)
    if (!buildClass(block))
      return false;
  std::string classes;
  for (const std::string &block : classOrder_)
    if (!failed_)
      classes += writeClass(classes_.at(block));
  std::string model;
  if (failed_ || !writeModel(model))
    return false;
  const std::string className = camelCase(graph_.modelName);
  out << "\"\"\"" << graph_.modelName << " (" << graph_.sourcePath
      << ") as a PyTorch module, written by `stringc --emit=pytorch` (docs/pytorch.md).\n\n"
      << "    model = " << className << "()\n"
      << "    model.load_state_dict(load_checkpoint(\"" << graph_.modelName
      << ".ckpt\"))   # names as in the package's checkpoints\n"
      << "    " << (graph_.outputs.size() == 1 ? graph_.outputs[0].name : "outputs")
      << " = model(" << forwardParams_ << ")\n"
      << "    loss = model.loss(" << lossParams_ << ")\n\n"
      << "The pe ops are the functions below the imports (docs/dialect.md's semantics);\n"
      << "the model works in the dtype of its parameters (model.double() for float64).\n"
      << "\"\"\"\n\nimport json\nimport math\nimport struct\n\nimport torch\n"
      << "import torch.nn.functional as F\nfrom torch import nn\n";
  out << pytorch::supportFunctions(helpers_) << classes << model;
  return true;
}

} // namespace

bool emitPytorch(const ModelGraph &graph, std::ostream &out, std::ostream &errors) {
  Emitter emitter(graph, errors);
  std::ostringstream text;
  if (!emitter.run(text))
    return false;
  out << text.str();
  return true;
}

} // namespace stringc
