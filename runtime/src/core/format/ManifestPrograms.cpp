// The programs of a package manifest (Manifest.cpp reads the rest): each
// program's values, inputs, ops, outputs and arena plan, and the outputs
// across programs. Every op's operand and result counts, dtypes and
// attributes are checked against the op schema (OpSchema.h), its kernels
// against the compiled-kernel rules, so the executor can index its value
// table without further checks.
#include "format/ManifestReader.h"

#include "stringrt/OpSchema.h"

#include <cctype>
#include <set>

namespace stringrt::detail {

namespace {

// The manifest's programs, read through the manifest's reader.
class ProgramParser : public ManifestReader {
public:
  ProgramParser(const ManifestReader &reader, const ParamIndex &paramIndex)
      : ManifestReader(reader), paramIndex_(paramIndex) {}

  // --- Programs ----------------------------------------------------------

  Program parseProgram(const JsonValue &value, const std::string &name,
                       const Manifest &manifest) const {
    const std::string where = "manifest.programs." + name;
    checkKeys(value, where, {"values", "inputs", "ops", "outputs", "arena"},
              {"values", "inputs", "ops", "outputs"});
    Program program;

    const JsonValue &values = *member(value, "values");
    expectKind(values, JsonValue::Kind::Array, where + ".values");
    for (size_t i = 0; i < values.elements.size(); ++i) {
      auto at = [&] { return fmt::format("{}.values[{}]", where, i); };
      const JsonValue &entry = values.elements[i];
      checkKeys(entry, at, {"dtype", "shape"}, {"dtype", "shape"});
      ProgramValue v;
      v.dtype = getDType(*member(entry, "dtype"), [&] { return at() + ".dtype"; });
      v.shape = getShape(*member(entry, "shape"), [&] { return at() + ".shape"; }, true);
      program.values.push_back(std::move(v));
    }
    const size_t count = program.values.size();
    std::vector<bool> defined(count, false);
    auto define = [&](ValueId id, const Where &at) {
      if (defined[id])
        fail(at, fmt::format("value {} is defined twice", id));
      defined[id] = true;
    };

    const JsonValue &inputs = *member(value, "inputs");
    expectKind(inputs, JsonValue::Kind::Array, where + ".inputs");
    if (inputs.elements.size() != manifest.inputs.size())
      fail(where + ".inputs",
           fmt::format("{} inputs, but the manifest declares {}",
                       inputs.elements.size(), manifest.inputs.size()));
    for (size_t i = 0; i < inputs.elements.size(); ++i) {
      std::string at = fmt::format("{}.inputs[{}]", where, i);
      ValueId id = getId(inputs.elements[i], count, at);
      define(id, at);
      const ManifestInput &input = manifest.inputs[i];
      const ProgramValue &v = program.values[id];
      if (v.dtype != input.dtype || v.shape != input.shape)
        fail(at, fmt::format("value {} is {} {} but input {} is {} {}", id,
                             dtypeKeyword(v.dtype), shapeText(v.shape),
                             quoteForMessage(input.name),
                             dtypeKeyword(input.dtype),
                             shapeText(input.shape)));
      program.inputs.push_back(id);
    }

    const JsonValue &ops = *member(value, "ops");
    expectKind(ops, JsonValue::Kind::Array, where + ".ops");
    for (size_t i = 0; i < ops.elements.size(); ++i) {
      auto at = [&] { return fmt::format("{}.ops[{}]", where, i); };
      program.ops.push_back(
          parseOp(ops.elements[i], at, program, defined, manifest));
      for (ValueId id : program.ops.back().results)
        define(id, at);
    }
    for (size_t id = 0; id < count; ++id)
      if (!defined[id])
        fail(where + ".values",
             fmt::format("value {} is never defined", id));

    const JsonValue &outputs = *member(value, "outputs");
    expectKind(outputs, JsonValue::Kind::Array, where + ".outputs");
    std::set<std::string> keys;
    for (size_t i = 0; i < outputs.elements.size(); ++i) {
      auto at = [&] { return fmt::format("{}.outputs[{}]", where, i); };
      const JsonValue &entry = outputs.elements[i];
      expectKind(entry, JsonValue::Kind::Object, at);
      ProgramOutput output;
      if (member(entry, "grad")) {
        auto atGrad = [&] { return at() + ".grad"; };
        checkKeys(entry, at, {"grad", "value"}, {"grad", "value"});
        output.grad = getString(*member(entry, "grad"), atGrad);
        if (output.grad.empty())
          fail(atGrad, "empty parameter name");
      } else {
        auto atName = [&] { return at() + ".name"; };
        checkKeys(entry, at, {"name", "value"}, {"name", "value"});
        output.name = getString(*member(entry, "name"), atName);
        if (output.name.empty())
          fail(atName, "empty name");
      }
      output.value = getId(*member(entry, "value"), count, [&] { return at() + ".value"; });
      if (!keys.insert(output.key()).second)
        fail(at, fmt::format("duplicate output {}",
                             quoteForMessage(output.key())));
      program.outputs.push_back(std::move(output));
    }
    if (program.outputs.empty() || program.outputs[0].name != "loss")
      fail(where + ".outputs", "the first output must be \"loss\"");
    const ProgramValue &loss = program.values[program.outputs[0].value];
    if (loss.dtype != DType::F32 || !loss.shape.empty())
      fail(where + ".outputs[0]",
           fmt::format("the loss must be an f32 scalar, got {} {}",
                       dtypeKeyword(loss.dtype), shapeText(loss.shape)));
    if (const JsonValue *arena = member(value, "arena"))
      program.arena = parseArena(*arena, where + ".arena", count);
    return program;
  }

  // A program's "arena" (structure only; the executor checks liveness), its
  // slots in bytes (Package::load converts a version 1 or 2 package's).
  ProgramArena parseArena(const JsonValue &value, const std::string &where,
                          size_t valueCount) const {
    checkKeys(value, where, {"slots", "value_slot", "report"},
              {"slots", "value_slot", "report"});
    ProgramArena arena;
    const JsonValue &slots = *member(value, "slots");
    expectKind(slots, JsonValue::Kind::Array, where + ".slots");
    for (size_t i = 0; i < slots.elements.size(); ++i) {
      std::string at = fmt::format("{}.slots[{}]", where, i);
      const JsonValue &slot = slots.elements[i];
      expectKind(slot, JsonValue::Kind::Array, at);
      if (slot.elements.size() != 2)
        fail(at, "a slot is [per_batch, fixed]");
      int64_t perBatch = getInt(slot.elements[0], at + "[0]");
      int64_t fixed = getInt(slot.elements[1], at + "[1]");
      // Bytes: a slot holds values of at most kMaxExampleElements 4-byte
      // elements (besides the batch).
      if (perBatch < 0 || fixed < 0 || perBatch > 4 * kMaxExampleElements ||
          fixed > 4 * kMaxExampleElements)
        fail(at, fmt::format("slot size [{}, {}] out of range", perBatch,
                             fixed));
      arena.slots.push_back({perBatch, fixed});
    }
    const JsonValue &valueSlot = *member(value, "value_slot");
    expectKind(valueSlot, JsonValue::Kind::Array, where + ".value_slot");
    if (valueSlot.elements.size() != valueCount)
      fail(where + ".value_slot",
           fmt::format("{} entries, the program has {} values",
                       valueSlot.elements.size(), valueCount));
    for (size_t v = 0; v < valueCount; ++v) {
      std::string at = fmt::format("{}.value_slot[{}]", where, v);
      int64_t s = getInt(valueSlot.elements[v], at);
      if (s < -1 || s >= int64_t(arena.slots.size()))
        fail(at, fmt::format("slot {} out of range (the plan has {} slots)",
                             s, arena.slots.size()));
      arena.valueSlot.push_back(s);
    }
    const JsonValue &report = *member(value, "report");
    checkKeys(report, where + ".report",
              {"batch", "arena_bytes", "no_reuse_bytes"},
              {"batch", "arena_bytes", "no_reuse_bytes"});
    arena.reportBatch = getInt(*member(report, "batch"), where + ".report.batch");
    arena.arenaBytes =
        getInt(*member(report, "arena_bytes"), where + ".report.arena_bytes");
    arena.noReuseBytes = getInt(*member(report, "no_reuse_bytes"),
                                where + ".report.no_reuse_bytes");
    if (arena.reportBatch < 1 || arena.reportBatch > (int64_t(1) << 20))
      fail(where + ".report.batch",
           fmt::format("batch {} out of range", arena.reportBatch));
    return arena;
  }

  // An op's "kernels" (target cpu): [{"symbol", "range", "grain"}, ...].
  std::vector<ProgramKernel> parseKernels(const JsonValue &value,
                                          const std::string &where,
                                          const Program &program,
                                          const ProgramOp &op) const {
    expectKind(value, JsonValue::Kind::Array, where);
    if (value.elements.empty())
      fail(where, "empty (leave \"kernels\" out instead)");
    bool batched = false; // whether the op's values have the batch dimension
    for (const auto *ids : {&op.operands, &op.results})
      for (ValueId id : *ids)
        for (int64_t d : program.values[id].shape)
          batched = batched || d == kBatchDim;
    std::vector<ProgramKernel> kernels;
    for (size_t i = 0; i < value.elements.size(); ++i) {
      std::string at = fmt::format("{}[{}]", where, i);
      const JsonValue &entry = value.elements[i];
      checkKeys(entry, at, {"symbol", "range", "grain"},
                {"symbol", "range", "grain"});
      ProgramKernel k;
      k.symbol = getString(*member(entry, "symbol"), at + ".symbol");
      bool identifier = !k.symbol.empty() && !std::isdigit(
                                                 static_cast<unsigned char>(k.symbol[0]));
      for (char c : k.symbol)
        identifier = identifier &&
                     (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
      if (!identifier)
        fail(at + ".symbol", fmt::format("{} is not a C identifier",
                                         quoteForMessage(k.symbol)));
      k.range = getInt(*member(entry, "range"), at + ".range");
      if (k.range != kBatchDim && (k.range < 1 || k.range > kMaxDim))
        fail(at + ".range",
             fmt::format("must be -1 (the batch) or in [1, {}]", kMaxDim));
      if (k.range == kBatchDim && !batched)
        fail(at + ".range", "is the batch (-1), but no value of the op has "
                            "a batch dimension");
      k.grain = getInt(*member(entry, "grain"), at + ".grain");
      if (k.grain < 1 || k.grain > kMaxDim)
        fail(at + ".grain", fmt::format("must be in [1, {}]", kMaxDim));
      kernels.push_back(std::move(k));
    }
    return kernels;
  }

  ProgramOp parseOp(const JsonValue &entry, const Where &at,
                    const Program &program, const std::vector<bool> &defined,
                    const Manifest &manifest) const {
    checkKeys(entry, at, {"op", "results", "operands", "attrs", "kernels"},
              {"op", "results", "operands", "attrs"});
    ProgramOp op;
    auto atOp = [&] { return at.str() + ".op"; };
    op.op = getString(*member(entry, "op"), atOp);
    std::optional<OpCode> code = findOpCode(op.op);
    if (!code)
      fail(atOp, fmt::format("unknown op {} for target cpu-reference",
                             quoteForMessage(op.op)));
    const OpSchema *schema = &opSchema(*code);
    auto where = [&] { return at.str() + " (" + op.op + ")"; };
    const size_t count = program.values.size();

    const JsonValue &operands = *member(entry, "operands");
    expectKind(operands, JsonValue::Kind::Array, [&] { return where() + ".operands"; });
    for (size_t i = 0; i < operands.elements.size(); ++i) {
      auto atOperand = [&] { return fmt::format("{}.operands[{}]", where(), i); };
      ValueId id = getId(operands.elements[i], count, atOperand);
      if (!defined[id])
        fail(atOperand, fmt::format("value {} is used before it is defined",
                                    id));
      op.operands.push_back(id);
    }
    const int numOperands = int(op.operands.size());
    if (numOperands < schema->minOperands || numOperands > schema->maxOperands)
      fail(where, schema->minOperands == schema->maxOperands
                      ? fmt::format("expected {} operands, got {}",
                                    schema->minOperands, numOperands)
                      : fmt::format("expected {} to {} operands, got {}",
                                    schema->minOperands, schema->maxOperands,
                                    numOperands));
    for (int i = 0; i < numOperands; ++i) {
      DType want = schema->operandTypes[i] == 'i' ? DType::I32 : DType::F32;
      const ProgramValue &v = program.values[op.operands[i]];
      if (v.dtype != want)
        fail(where, fmt::format("operand {} (value {}) must be {}, got {}", i,
                                op.operands[i], dtypeKeyword(want),
                                dtypeKeyword(v.dtype)));
    }

    const JsonValue &results = *member(entry, "results");
    expectKind(results, JsonValue::Kind::Array, [&] { return where() + ".results"; });
    for (size_t i = 0; i < results.elements.size(); ++i) {
      auto atResult = [&] { return fmt::format("{}.results[{}]", where(), i); };
      ValueId id = getId(results.elements[i], count, atResult);
      if (defined[id])
        fail(atResult, fmt::format("value {} is defined twice", id));
      for (ValueId earlier : op.results)
        if (earlier == id)
          fail(atResult, fmt::format("value {} is defined twice", id));
      if (program.values[id].dtype != DType::F32)
        fail(atResult, fmt::format("result value {} must be f32", id));
      op.results.push_back(id);
    }
    const int wantResults = schema->resultCount(numOperands);
    if (!schema->acceptsResults(numOperands, int(op.results.size())))
      fail(where, fmt::format("expected {}{} results, got {}",
                              schema->savedResult ? fmt::format("{} or ", wantResults - 1) : "",
                              wantResults, op.results.size()));

    parseAttrs(*member(entry, "attrs"), where, *schema, op);
    if (const JsonValue *kernels = member(entry, "kernels"))
      op.kernels = parseKernels(*kernels, where() + ".kernels", program, op);

    // Ops whose result shape the manifest's own tables fix.
    if (op.is(OpCode::GetParam)) {
      const std::string &name = op.getString("param");
      auto found = paramIndex_.find(name);
      if (found == paramIndex_.end())
        fail(where, fmt::format("unknown parameter {}",
                                quoteForMessage(name)));
      const ManifestParam *param = &manifest.params[found->second];
      const ProgramValue &v = program.values[op.results[0]];
      if (v.shape != param->shape)
        fail(where, fmt::format("result value {} has shape {} but parameter "
                                "{} has shape {}",
                                op.results[0], shapeText(v.shape),
                                quoteForMessage(name),
                                shapeText(param->shape)));
    }
    if (op.is(OpCode::CrossEntropy) || op.is(OpCode::CommutatorNorm)) {
      const ProgramValue &v = program.values[op.results[0]];
      if (!v.shape.empty())
        fail(where, fmt::format("result value {} must be a scalar, got {}",
                                op.results[0], shapeText(v.shape)));
    }
    return op;
  }

  void parseAttrs(const JsonValue &attrs, const Where &where,
                  const OpSchema &schema, ProgramOp &op) const {
    expectKind(attrs, JsonValue::Kind::Object, [&] { return where.str() + ".attrs"; });
    uint64_t seen = 0; // a bit per attribute of the schema
    for (const JsonMember &m : attrs.members) {
      const AttrSchema *spec = nullptr;
      size_t index = 0;
      for (size_t a = 0; a < schema.attrs.size(); ++a)
        if (m.key == schema.attrs[a].name) {
          spec = &schema.attrs[a];
          index = a;
        }
      if (!spec)
        fail(where, fmt::format("unknown attribute {}",
                                quoteForMessage(m.key)));
      if (seen & (uint64_t(1) << index))
        fail(where, fmt::format("duplicate attribute {}",
                                quoteForMessage(m.key)));
      seen |= uint64_t(1) << index;
      auto at = [&] { return where.str() + ".attrs." + m.key; };
      const JsonValue &v = m.value;
      switch (spec->kind) {
      case AttrKind::Int:
        op.attrs[m.key] = getAttrInt(v, m.key, at);
        break;
      case AttrKind::Float:
        op.attrs[m.key] = getDouble(v, at);
        break;
      case AttrKind::Bool:
        op.attrs[m.key] = getBool(v, at);
        break;
      case AttrKind::String:
        op.attrs[m.key] = getString(v, at);
        break;
      case AttrKind::Ints: {
        expectKind(v, JsonValue::Kind::Array, at);
        std::vector<int64_t> ints;
        for (size_t i = 0; i < v.elements.size(); ++i)
          ints.push_back(getAttrInt(v.elements[i], m.key,
                                    [&] { return fmt::format("{}[{}]", at(), i); }));
        op.attrs[m.key] = std::move(ints);
        break;
      }
      case AttrKind::Enum: {
        std::string word = getString(v, at);
        bool known = false;
        for (const char *keyword : spec->keywords)
          known = known || word == keyword;
        if (!known)
          fail(at, fmt::format("unknown keyword {} (expected {})",
                               quoteForMessage(word),
                               fmt::join(spec->keywords, ", ")));
        op.attrs[m.key] = std::move(word);
        break;
      }
      }
    }
    for (size_t a = 0; a < schema.attrs.size(); ++a) {
      const AttrSchema &attr = schema.attrs[a];
      if (seen & (uint64_t(1) << a))
        continue;
      if (attr.required)
        fail(where, fmt::format("missing attribute \"{}\"", attr.name));
      // An absent DefaultValuedAttr has its default, as in the compiler's IR.
      if (attr.defaultValue) {
        if (attr.kind == AttrKind::Int)
          op.attrs[attr.name] = static_cast<int64_t>(*attr.defaultValue);
        else if (attr.kind == AttrKind::Bool)
          op.attrs[attr.name] = *attr.defaultValue != 0.0;
        else
          op.attrs[attr.name] = *attr.defaultValue;
      }
    }
  }

  // --- Outputs across programs --------------------------------------------

  void checkForwardOutputs(const Manifest &manifest) const {
    for (size_t i = 0; i < manifest.forward.outputs.size(); ++i)
      if (manifest.forward.outputs[i].isGrad())
        fail(fmt::format("manifest.programs.forward.outputs[{}]", i),
             "the forward program has no gradient outputs");
  }

  void checkGradientOutputs(const Manifest &manifest) const {
    const std::string where = "manifest.programs.gradients.outputs";
    const Program &program = manifest.gradients;
    std::vector<const ManifestParam *> trainable;
    for (const ManifestParam &param : manifest.params)
      if (!param.frozen)
        trainable.push_back(&param);
    if (program.outputs.size() != trainable.size() + 1)
      fail(where, fmt::format("expected the loss and {} gradients (one per "
                              "trainable parameter), got {} outputs",
                              trainable.size(), program.outputs.size()));
    for (size_t i = 0; i < trainable.size(); ++i) {
      const ProgramOutput &output = program.outputs[i + 1];
      std::string at = fmt::format("{}[{}]", where, i + 1);
      if (output.grad != trainable[i]->name)
        fail(at, fmt::format("expected the gradient of trainable parameter "
                             "{}, got {}",
                             quoteForMessage(trainable[i]->name),
                             output.isGrad()
                                 ? "the gradient of " +
                                       quoteForMessage(output.grad)
                                 : "output " + quoteForMessage(output.name)));
      const ProgramValue &v = program.values[output.value];
      if (v.dtype != DType::F32 || v.shape != trainable[i]->shape)
        fail(at, fmt::format("gradient value {} is {} {} but parameter {} has "
                             "shape {}",
                             output.value, dtypeKeyword(v.dtype),
                             shapeText(v.shape),
                             quoteForMessage(trainable[i]->name),
                             shapeText(trainable[i]->shape)));
    }
  }

private:
  const ParamIndex &paramIndex_;
};

} // namespace

Program parseProgram(const ManifestReader &reader, const JsonValue &value,
                     const std::string &name, const Manifest &manifest,
                     const ParamIndex &paramIndex) {
  return ProgramParser(reader, paramIndex).parseProgram(value, name, manifest);
}

void checkProgramOutputs(const ManifestReader &reader, const Manifest &manifest) {
  static const ParamIndex kNoParams; // the outputs need no parameter by name
  ProgramParser parser(reader, kNoParams);
  parser.checkForwardOutputs(manifest);
  parser.checkGradientOutputs(manifest);
}

} // namespace stringrt::detail
