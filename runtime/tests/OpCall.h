// One op of the op library run by its OpCode, as the executor runs it: a
// test reaches an op's kernels through its registration (runtime/src/ops/
// OpLibrary.h) and its executor adapters, with its operands as tensors and
// its attributes by name (an absent one takes its ODS default, through the
// generated accessors the adapters read), so an op file needs no declared
// kernels for its tests (docs/architecture.md, "The op library"). Needs
// runtime/src/core on the include path (the executor's private headers).
//
// f32 operands and results only; the results are filled with NaN before the
// adapter runs, so a kernel that leaves an element unwritten shows.
#pragma once

#include "../src/ops/OpLibrary.h"

#include "stringrt/Error.h"
#include "stringrt/Manifest.h"
#include "stringrt/OpSchema.h"
#include "stringrt/reference/Tensor.h"

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace stringrt::test {

struct OpCall {
  using TF = ref::Tensor<float>;

  OpCode code;
  std::vector<TF> operands;
  std::vector<std::vector<int64_t>> results; // their shapes
  std::map<std::string, AttrValue> attrs;
  std::string name; // for messages

  // Runs `adapter` on the op; returns its results.
  std::vector<TF> run(detail::OpAdapter adapter) const {
    ProgramOp op;
    op.op = opName(code);
    op.attrs = attrs;
    std::vector<detail::ExecValue> values;
    for (const TF &t : operands) {
      op.operands.push_back(values.size());
      detail::ExecValue v;
      v.shape = t.shape;
      v.f32 = t.values;
      v.live = true;
      values.push_back(std::move(v));
    }
    for (const std::vector<int64_t> &shape : results) {
      op.results.push_back(values.size());
      detail::ExecValue v;
      v.shape = shape;
      v.f32.assign(static_cast<size_t>(ref::shapeNumel(shape)),
                   std::numeric_limits<float>::quiet_NaN());
      v.live = true;
      values.push_back(std::move(v));
    }
    adapter(detail::OpContext(op, values));
    std::vector<TF> out;
    for (size_t k = 0; k < results.size(); ++k) {
      const detail::ExecValue &v = values[operands.size() + k];
      out.push_back(TF(v.shape, v.f32));
    }
    return out;
  }

  // The op's registered adapters (KernelSet::Reference's; Fast's and the
  // compiled set's fallback: the fast kernel, or the reference one where the
  // op has none; the shape contract alone, which runs before a compiled
  // kernel).
  std::vector<TF> reference() const { return run(kernels().reference); }
  std::vector<TF> fast() const {
    const ops::OpKernels &k = kernels();
    return run(k.fast ? k.fast : k.reference);
  }
  void check() const {
    const detail::OpAdapter contract = kernels().check;
    if (!contract)
      throw Error(std::string(opName(code)) + ": registers no shape contract");
    run(contract);
  }

private:
  const ops::OpKernels &kernels() const {
    const ops::OpKernels *k = ops::opLibrary().find(code);
    if (!k)
      throw Error(std::string(opName(code)) + ": no op file registers it");
    return *k;
  }
};

} // namespace stringrt::test
