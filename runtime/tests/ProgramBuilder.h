// Builds package programs (docs/package.md) in memory, op by op, for the
// runtime tests that need a Program without going through the compiler.
#pragma once

#include "stringrt/Manifest.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace stringrt::test {

inline ProgramValue f32(std::vector<int64_t> shape) { return {DType::F32, std::move(shape)}; }
inline ProgramValue i32(std::vector<int64_t> shape) { return {DType::I32, std::move(shape)}; }

class ProgramBuilder {
public:
  ValueId value(ProgramValue type) {
    program.values.push_back(std::move(type));
    return program.values.size() - 1;
  }
  ValueId input(ProgramValue type) {
    ValueId id = value(std::move(type));
    program.inputs.push_back(id);
    return id;
  }
  std::vector<ValueId> op(const std::string &name, std::vector<ValueId> operands,
                          std::vector<ProgramValue> results,
                          std::map<std::string, AttrValue> attrs = {}) {
    ProgramOp op;
    op.op = name;
    op.operands = std::move(operands);
    for (ProgramValue &r : results)
      op.results.push_back(value(std::move(r)));
    op.attrs = std::move(attrs);
    program.ops.push_back(op);
    return op.results;
  }
  ValueId op1(const std::string &name, std::vector<ValueId> operands, ProgramValue result,
              std::map<std::string, AttrValue> attrs = {}) {
    return op(name, std::move(operands), {std::move(result)}, std::move(attrs))[0];
  }
  ValueId param(const std::string &name, std::vector<int64_t> shape) {
    return op1("pe.get_param", {}, f32(std::move(shape)), {{"param", std::string(name)}});
  }
  ValueId constant(double value, std::vector<int64_t> shape = {}) {
    return op1("arith.constant", {}, f32(std::move(shape)), {{"value", value}});
  }
  void output(const std::string &name, ValueId id) {
    ProgramOutput out;
    out.name = name;
    out.value = id;
    program.outputs.push_back(out);
  }
  void grad(const std::string &param, ValueId id) {
    ProgramOutput out;
    out.grad = param;
    out.value = id;
    program.outputs.push_back(out);
  }

  Program program;
};

} // namespace stringrt::test
