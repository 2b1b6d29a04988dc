// The fused ops' compositions, one row an op, and the generic reference
// kernel that runs them (Compositions.h). Each row is the math
// docs/dialect.md's "Hoisted and fused ops" states for the op.
#include "Compositions.h"

#include "stringrt/Error.h"
#include "stringrt/OpSchema.h"

#include <string>

namespace stringrt::ops {

namespace {

Slot in(int k) { return {Slot::Operand, k}; }
Slot out(int k) { return {Slot::Result, k}; }
Slot tmp(int k) { return {Slot::Temp, k}; }
// The fused op's attribute `name`.
StepAttr same(const char *name) { return {name, std::nullopt}; }
StepAttr fixed(const char *name, AttrValue value) { return {name, std::move(value)}; }

} // namespace

const std::vector<Composition> &compositions() {
  static const std::vector<Composition> table = {
      // linear_gelu(x, w, b?) -> (y, pre): pre = linear(x, w, b), y = gelu(pre).
      {OpCode::LinearGelu,
       {},
       {{OpCode::Linear, {in(0), in(1), in(2)}, {out(1)}, {}},
        {OpCode::Gelu, {out(1)}, {out(0)}, {same("approximate")}}}},
      // linear_residual(residual, x, w, b?) -> add(residual, linear(x, w, b)).
      // Its reference kernel sums the residual into the linear's double
      // accumulator and rounds once (ops/fused/LinearResidual.cpp).
      {OpCode::LinearResidual,
       {out(0)},
       {{OpCode::Linear, {in(1), in(2), in(3)}, {tmp(0)}, {}},
        {OpCode::Add, {in(0), tmp(0)}, {out(0)}, {}}},
       /*ownReferenceKernel=*/true},
      // linear_grad_input_acc(prior, dy, w) -> add(prior, linear_grad_input(dy, w)).
      {OpCode::LinearGradInputAcc,
       {out(0)},
       {{OpCode::LinearGradInput, {in(1), in(2)}, {tmp(0)}, {}},
        {OpCode::Add, {in(0), tmp(0)}, {out(0)}, {}}}},
      // layer_norm_grad_acc(prior, x, gamma, dy) -> (prior + dx, dgamma,
      // dbeta) of layer_norm_grad(x, gamma, dy).
      {OpCode::LayerNormGradAcc,
       {out(0)},
       {{OpCode::LayerNormGrad, {in(1), in(2), in(3)}, {tmp(0), out(1), out(2)},
         {same("epsilon")}},
        {OpCode::Add, {in(0), tmp(0)}, {out(0)}, {}}}},
      // rope_attention(q, k, v, table) -> (y, lse?):
      // attention(rope_apply(q, table), rope_apply(k, table), v).
      {OpCode::RopeAttention,
       {in(0), in(1)},
       {{OpCode::RopeApply, {in(0), in(3)}, {tmp(0)}, {}},
        {OpCode::RopeApply, {in(1), in(3)}, {tmp(1)}, {}},
        {OpCode::Attention, {tmp(0), tmp(1), in(2)}, {out(0), out(1)},
         {same("heads"), same("scale"), same("mask")}}}},
      // rope_attention_grad(q, k, v, table, y, lse, dy) -> (dq, dk, dv):
      // dqr, dkr, dv = attention_grad(rope_apply(q), rope_apply(k), v, y,
      // lse, dy); dq, dk = rope_apply(dqr, dkr, inverse).
      {OpCode::RopeAttentionGrad,
       {in(0), in(1), in(0), in(1)},
       {{OpCode::RopeApply, {in(0), in(3)}, {tmp(0)}, {}},
        {OpCode::RopeApply, {in(1), in(3)}, {tmp(1)}, {}},
        {OpCode::AttentionGrad, {tmp(0), tmp(1), in(2), in(4), in(5), in(6)},
         {tmp(2), tmp(3), out(2)}, {same("heads"), same("scale"), same("mask")}},
        {OpCode::RopeApply, {tmp(2), in(3)}, {out(0)}, {fixed("inverse", true)}},
        {OpCode::RopeApply, {tmp(3), in(3)}, {out(1)}, {fixed("inverse", true)}}}},
  };
  return table;
}

const Composition *findComposition(OpCode op) {
  for (const Composition &composition : compositions())
    if (composition.op == op)
      return &composition;
  return nullptr;
}

//===----------------------------------------------------------------------===//
// The rows' checks
//===----------------------------------------------------------------------===//

void checkComposition(const Composition &composition) {
  const OpSchema &fused = opSchema(composition.op);
  auto fail = [&](const std::string &message) {
    throw Error(std::string("composition of '") + fused.name + "': " + message);
  };
  auto checkSlot = [&](const Slot &slot, const char *what) {
    const int limit = slot.kind == Slot::Operand  ? fused.maxOperands
                      : slot.kind == Slot::Result ? fused.maxResults
                                                  : static_cast<int>(composition.temps.size());
    if (slot.index < 0 || slot.index >= limit)
      fail(std::string(what) + " #" + std::to_string(slot.index) + " does not exist");
  };
  for (const Slot &shape : composition.temps) {
    if (shape.kind == Slot::Temp)
      fail("a temporary's shape must be an operand's or a result's");
    checkSlot(shape, "the temporaries' shape: value");
  }
  std::vector<bool> tempWritten(composition.temps.size(), false);
  std::vector<int> resultWrites(static_cast<size_t>(fused.maxResults), 0);
  for (const Step &step : composition.steps) {
    const OpSchema &schema = opSchema(step.op);
    const std::string name = std::string("step '") + schema.name + "'";
    const int nOperands = static_cast<int>(step.operands.size());
    if (nOperands < schema.minOperands || nOperands > schema.maxOperands)
      fail(name + " has " + std::to_string(nOperands) + " operands");
    if (!schema.acceptsResults(nOperands, static_cast<int>(step.results.size())))
      fail(name + " has " + std::to_string(step.results.size()) + " results");
    for (const Slot &slot : step.operands) {
      checkSlot(slot, (name + ": value").c_str());
      if (slot.kind == Slot::Temp && !tempWritten[static_cast<size_t>(slot.index)])
        fail(name + " reads temporary #" + std::to_string(slot.index) + " before it is written");
      if (slot.kind == Slot::Result && resultWrites[static_cast<size_t>(slot.index)] == 0)
        fail(name + " reads result #" + std::to_string(slot.index) + " before it is written");
    }
    for (const Slot &slot : step.results) {
      checkSlot(slot, (name + ": value").c_str());
      if (slot.kind == Slot::Operand)
        fail(name + " writes operand #" + std::to_string(slot.index));
      if (slot.kind == Slot::Temp)
        tempWritten[static_cast<size_t>(slot.index)] = true;
      else if (++resultWrites[static_cast<size_t>(slot.index)] > 1)
        fail("result #" + std::to_string(slot.index) + " is written twice");
    }
    for (const StepAttr &attr : step.attrs) {
      if (!schema.findAttr(attr.name))
        fail(name + " has no attribute '" + attr.name + "'");
      if (!attr.value && !fused.findAttr(attr.name))
        fail(name + " takes the fused op's attribute '" + attr.name + "', which it has not");
    }
  }
  for (size_t k = 0; k < resultWrites.size(); ++k)
    if (resultWrites[k] == 0)
      fail("result #" + std::to_string(k) + " is never written");
}

//===----------------------------------------------------------------------===//
// The generic reference kernel
//===----------------------------------------------------------------------===//

namespace {

// The fused op's attribute `name` as the step takes it: its value, else its
// ODS default, else none.
std::optional<AttrValue> fusedAttr(const OpContext &c, OpCode fused, const char *name) {
  const auto found = c.op().attrs.find(name);
  if (found != c.op().attrs.end())
    return found->second;
  const AttrSchema *schema = opSchema(fused).findAttr(name);
  if (!schema || !schema->defaultValue)
    return std::nullopt;
  switch (schema->kind) {
  case AttrKind::Bool:
    return AttrValue(*schema->defaultValue != 0.0);
  case AttrKind::Int:
    return AttrValue(static_cast<int64_t>(*schema->defaultValue));
  case AttrKind::Float:
    return AttrValue(*schema->defaultValue);
  default:
    return std::nullopt; // no ODS default of another kind
  }
}

} // namespace

void runComposition(const OpContext &c) {
  const std::optional<OpCode> code = findOpCode(c.op().op);
  const Composition *composition = code ? findComposition(*code) : nullptr;
  if (!composition)
    c.fail("has no composition of library ops to run");
  if (const OpKernels *self = opLibrary().find(*code); self && self->check)
    self->check(c);

  // The values the steps see: the fused op's operands (views), its results
  // (its result buffers, written in place) and the temporaries.
  const size_t nIn = c.numOperands(), nOut = c.numResults();
  std::vector<detail::ExecValue> values(nIn + nOut + composition->temps.size());
  for (size_t k = 0; k < nIn; ++k) {
    detail::ExecValue &v = values[k];
    v.dtype = c.operandType(k);
    if (v.dtype == DType::F32) {
      const ref::TensorRef<const float> t = c.in(k);
      v.shape = t.shape;
      v.view = t.data;
    } else {
      const ref::TensorRef<const int32_t> t = c.inI32(k);
      v.shape = t.shape;
      v.view = t.data;
    }
    v.live = true;
  }
  for (size_t k = 0; k < nOut; ++k) {
    if (c.resultType(k) != DType::F32)
      c.fail("result #" + std::to_string(k) + " is not f32, which a composition needs");
    const ref::TensorRef<float> t = c.out(k);
    detail::ExecValue &v = values[nIn + k];
    v.shape = t.shape;
    v.arena = t.data;
    v.live = true;
  }
  for (size_t k = 0; k < composition->temps.size(); ++k) {
    const Slot &like = composition->temps[k];
    detail::ExecValue &v = values[nIn + nOut + k];
    v.shape = values[like.kind == Slot::Operand ? like.index : nIn + like.index].shape;
    v.f32.assign(static_cast<size_t>(v.numel()), 0.0f);
    v.live = true;
  }
  // A slot's value id; nullopt for an optional operand or result the
  // fused op was run without.
  auto idOf = [&](const Slot &slot) -> std::optional<ValueId> {
    const size_t k = static_cast<size_t>(slot.index);
    switch (slot.kind) {
    case Slot::Operand:
      return k < nIn ? std::optional<ValueId>(k) : std::nullopt;
    case Slot::Result:
      return k < nOut ? std::optional<ValueId>(nIn + k) : std::nullopt;
    case Slot::Temp:
      break;
    }
    return nIn + nOut + k;
  };
  // The ids of a step's slots up to the first absent one, which only
  // absent ones may follow.
  auto idsOf = [&](const std::vector<Slot> &slots, std::vector<ValueId> &ids) {
    bool absent = false;
    for (const Slot &slot : slots) {
      const std::optional<ValueId> id = idOf(slot);
      if (id && absent)
        c.fail("its composition leaves out an optional value before a present one");
      absent = absent || !id;
      if (id)
        ids.push_back(*id);
    }
  };

  for (const Step &step : composition->steps) {
    ProgramOp op;
    op.op = opName(step.op);
    idsOf(step.operands, op.operands);
    idsOf(step.results, op.results);
    for (const StepAttr &attr : step.attrs)
      if (std::optional<AttrValue> value = attr.value ? attr.value : fusedAttr(c, *code, attr.name))
        op.attrs.emplace(attr.name, std::move(*value));
    const OpKernels *kernels = opLibrary().find(step.op);
    if (!kernels)
      c.fail(std::string("its composition's op '") + op.op + "' is not in the op library");
    try {
      kernels->reference(OpContext(op, values, c.stepKey()));
    } catch (const Error &e) {
      c.fail(std::string("in its composition: ") + e.what());
    }
  }
}

} // namespace stringrt::ops
