//===- Graph.h - the checked model graph -----------------------*- C++ -*-===//
//
// What the frontend hands to MLIRGen: a model with every name resolved, every
// loop unrolled, every block instantiated and every shape known. Plain C++
// (no MLIR) so that the frontend and its tests stay light.
//
// Values are numbered: each model input and each op result has an id, and
// `ModelGraph::values[id]` tells which and what type. Ops are in topological
// order (an op's operands are inputs or results of earlier ops). Parameters
// are read by `pe.get_param` ops, one per parameter, emitted where the
// parameter is declared, with the attribute `param` = its full name.
//
// Op names, operand orders and attribute names are exactly those of
// docs/dialect.md. Attribute values: integers are int64_t, floats double,
// keyword-valued attributes (`mask`, `mode`, rope_freqs `kind`) EnumValue.
//
//===----------------------------------------------------------------------===//
#ifndef STRINGC_FRONTEND_GRAPH_H
#define STRINGC_FRONTEND_GRAPH_H

#include "stringc/Frontend/SourceManager.h"
#include "stringrt/Manifest.h"
#include "stringrt/OpCodes.h"

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace stringc {

enum class DType { F32, I32 };

/// The batch dimension B in TensorType::dims. It is only ever dimension 0.
constexpr int64_t kBatchDim = -1;

struct TensorType {
  DType dtype = DType::F32;
  std::vector<int64_t> dims; // kBatchDim stands for the batch B

  size_t rank() const { return dims.size(); }
  bool hasBatch() const { return !dims.empty() && dims[0] == kBatchDim; }
  bool operator==(const TensorType &other) const {
    return dtype == other.dtype && dims == other.dims;
  }
  bool operator!=(const TensorType &other) const { return !(*this == other); }
};

/// "f32" / "i32".
const char *dtypeName(DType dtype);
/// "[B, 16, 64]", "[]".
std::string formatShape(const std::vector<int64_t> &dims);
/// "f32[B, 16, 64]".
std::string formatType(const TensorType &type);

/// A keyword-valued attribute, e.g. mask = causal.
struct EnumValue {
  std::string name;
  bool operator==(const EnumValue &other) const { return name == other.name; }
};

using AttrValue = std::variant<int64_t, double, bool, std::string, std::vector<int64_t>, EnumValue>;
using NamedAttr = std::pair<std::string, AttrValue>;

/// The attribute `name` in `attrs`, or nullptr.
const AttrValue *findAttr(const std::vector<NamedAttr> &attrs, std::string_view name);
/// How the graph dump prints an attribute value: 64, 0.02, 1e-08, true,
/// "text", [1, 2], causal. Floats always show a '.' or an exponent.
std::string formatAttr(const AttrValue &value);

struct GraphOp {
  stringrt::OpCode code{};   // the op (stringrt/OpCodes.h, generated from the ODS)
  std::string name;          // its name, "pe.rope"
  std::vector<int> operands; // value ids
  std::vector<NamedAttr> attrs;
  TensorType result;
  int resultId = -1;
  SourceLoc loc; // the expression that produced it
  /// For ops made inside a block: the instance path ("encoder.1",
  /// "layer.0.mlp.1") and where each enclosing block was instantiated,
  /// innermost first. Empty at the top level.
  std::string scope;
  std::vector<SourceLoc> callSites;

  const AttrValue *attr(std::string_view attrName) const { return findAttr(attrs, attrName); }
};

struct GraphInput {
  std::string name;
  TensorType type; // dims[0] is always kBatchDim
  int valueId = -1;
  SourceLoc loc;
};

struct GraphParam {
  std::string name; // full name: "cls", "encoder.0.wq"
  TensorType type;  // always f32, static
  /// normal | uniform | zeros | ones | constant | load
  std::string init;
  /// Exactly the initializer's companions, all present: normal: mean, std,
  /// seed; uniform: low, high, seed; constant: value; load: file (resolved
  /// absolute path), tensor. Floats are double, seeds int64_t.
  std::vector<NamedAttr> initAttrs;
  bool frozen = false;
  SourceLoc loc;
};

struct GraphOutput {
  std::string name;
  int valueId = -1;
  SourceLoc loc;
};

/// An optimizer and its schedule; what the `.pe` file leaves out has the
/// runtime's defaults (stringrt::kOptimizerDefaults).
struct GraphOptimizer {
  std::string kind = stringrt::optimizerKindName(stringrt::kOptimizerDefaults.kind); // adamw | sgd
  double lr = stringrt::kOptimizerDefaults.lr;
  double beta1 = stringrt::kOptimizerDefaults.beta1;
  double beta2 = stringrt::kOptimizerDefaults.beta2;
  double eps = stringrt::kOptimizerDefaults.eps;
  double weightDecay = stringrt::kOptimizerDefaults.weightDecay;
  double momentum = stringrt::kOptimizerDefaults.momentum;
  double clipNorm = stringrt::kOptimizerDefaults.clipNorm; // 0 = no clipping
  std::string schedule = stringrt::lrScheduleName(stringrt::kOptimizerDefaults.schedule); // constant | warmup_cosine
  int64_t warmupSteps = stringrt::kOptimizerDefaults.warmupSteps;
  double minLr = stringrt::kOptimizerDefaults.minLr;
  double emaDecay = stringrt::kOptimizerDefaults.emaDecay; // 0 = no EMA of the weights
  SourceLoc loc;

  /// As the attributes of pe.optimizer: kind, lr, beta1, beta2, eps,
  /// weight_decay, momentum, clip_norm, schedule, warmup_steps, min_lr, and
  /// ema_decay when there is an EMA.
  std::vector<NamedAttr> attributes() const;
};

struct GraphDataset {
  std::string kind; // idx | text
  std::string path; // resolved against the .pe file's directory, absolute
  int64_t contextLength = 0; // text only (> 0); 0 for idx
  // Augmentation of the training images (idx only; 0: off): random crop
  // with this zero padding, horizontal flip and random erasing probabilities.
  int64_t cropPadding = 0;
  double flipProbability = 0.0, eraseProbability = 0.0;
  SourceLoc loc;

  /// As the attributes of pe.dataset: kind, path, (text) context_length and
  /// the augmentation that is on (crop_padding, flip, erase).
  std::vector<NamedAttr> attributes() const;
};

struct GraphConstant {
  std::string name;
  std::variant<int64_t, double> value;
};

/// What a value id stands for: a model input or the result of an op.
struct GraphValue {
  TensorType type;
  int inputIndex = -1; // into ModelGraph::inputs, or -1
  int opIndex = -1;    // into ModelGraph::ops, or -1
};

struct ModelGraph {
  std::string modelName;
  std::string sourcePath;               // the .pe file as given to the compiler
  std::vector<GraphConstant> constants; // top-level `const`s, in order
  std::vector<GraphInput> inputs;       // in declaration order
  std::vector<GraphParam> params;       // in declaration (instantiation) order
  std::vector<GraphOp> ops;             // topological order
  std::vector<GraphValue> values;       // indexed by value id
  std::vector<GraphOutput> outputs;     // in declaration order
  int lossId = -1;                      // a tensor<f32> ([]) value
  SourceLoc lossLoc;
  GraphOptimizer optimizer;
  std::optional<GraphDataset> dataset;

  const TensorType &typeOf(int valueId) const { return values.at(valueId).type; }
  /// The op whose result is `valueId`, or nullptr for an input.
  const GraphOp *definingOp(int valueId) const;
  const GraphParam *findParam(std::string_view name) const;
};

/// The readable dump printed by `stringc --emit=graph` (format in
/// docs/language.md).
void printGraph(const ModelGraph &graph, std::ostream &os);

} // namespace stringc

#endif // STRINGC_FRONTEND_GRAPH_H
