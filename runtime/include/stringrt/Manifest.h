// The manifest of a model package (docs/package.md): the model's inputs,
// parameters and their initialisers, optimizer, dataset and the straight-line
// programs (`forward`, `gradients`) over the pe ops. Plain data; parseManifest
// builds it and validates everything the executor relies on, so a Manifest
// that exists is well formed: value ids in range and defined before use, op
// names known, operand/result counts and attribute types right, shapes
// consistent, gradient outputs matching the trainable parameters.
#pragma once

#include "stringrt/Augment.h"
#include "stringrt/DType.h"
#include "stringrt/OdsDefaults.h"
#include "stringrt/OpCodes.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace stringrt {

// The batch dimension in shapes.
constexpr int64_t kBatchDim = -1;

// Index into Program::values.
using ValueId = std::size_t;

struct ManifestInput {
  std::string name;
  DType dtype = DType::F32; // F32 or I32.
  std::vector<int64_t> shape; // -1 for the batch dimension.
};

enum class ParamInit { Normal, Uniform, Zeros, Ones, Constant, Load };

// "normal", "uniform", "zeros", "ones", "constant", "load".
const char *paramInitName(ParamInit init);

struct ManifestParam {
  std::string name;
  std::vector<int64_t> shape; // Static, every dimension >= 1 (scalar: empty).
  bool frozen = false;
  ParamInit init = ParamInit::Zeros;
  // Companions: only those of `init` are meaningful (the rest are 0 / empty).
  double mean = 0.0, std = 0.0;   // normal (std > 0)
  double low = 0.0, high = 0.0;   // uniform (low < high)
  double value = 0.0;             // constant
  uint64_t seed = 0;              // normal, uniform
  std::string file, tensor;       // load

  int64_t numel() const; // Product of the shape.
};

enum class OptimizerKind { AdamW, Sgd };
enum class LrSchedule { Constant, WarmupCosine };

// The format's words for them: "adamw", "sgd"; "constant", "warmup_cosine".
const char *optimizerKindName(OptimizerKind kind);
const char *lrScheduleName(LrSchedule schedule);

// The schedule a word names, at compile time (pe.optimizer's ODS default is
// a word); a word that names none does not compile where it is a constant.
constexpr LrSchedule lrScheduleOfWord(std::string_view word) {
  return word == "constant"        ? LrSchedule::Constant
         : word == "warmup_cosine" ? LrSchedule::WarmupCosine
                                   : throw "not a learning-rate schedule";
}

// The defaults are pe.optimizer's ODS defaults (PEModuleOps.td), generated
// into OdsDefaults.h.
struct ManifestOptimizer {
  OptimizerKind kind = OptimizerKind::AdamW;
  double lr = ods::kOptimizerLr;
  double beta1 = ods::kOptimizerBeta1;
  double beta2 = ods::kOptimizerBeta2;
  double eps = ods::kOptimizerEps;
  double weightDecay = ods::kOptimizerWeightDecay;
  double momentum = ods::kOptimizerMomentum;
  double clipNorm = ods::kOptimizerClipNorm; // 0: no clipping.
  LrSchedule schedule = lrScheduleOfWord(ods::kOptimizerSchedule);
  int64_t warmupSteps = ods::kOptimizerWarmupSteps;
  double minLr = ods::kOptimizerMinLr;
  // > 0: keep an EMA of the weights (Optimizer.h); 0: none.
  double emaDecay = ods::kOptimizerEmaDecay;
};

// The defaults of an optimizer: what a `.pe` file's optimizer and schedule
// leave out (the frontend takes them from here), pe.optimizer's ODS defaults
// (the test PackageBuilder.WritesDefaultValuedAttributes checks that packages
// carry them).
inline constexpr ManifestOptimizer kOptimizerDefaults{};

enum class DatasetKind { Idx, Text };

// "idx", "text".
const char *datasetKindName(DatasetKind kind);

struct ManifestDataset {
  DatasetKind kind = DatasetKind::Idx;
  std::string path;
  int64_t contextLength = 0; // > 0 for text, 0 for idx.
  AugmentPolicy augment;     // of the training images (idx only); off by default
};

struct ProgramValue {
  DType dtype = DType::F32; // F32 or I32.
  std::vector<int64_t> shape; // -1 for the batch dimension; empty: scalar.
};

// An op attribute. The loader stores each attribute the reference target
// knows with the type its op needs (float attributes always as double, even
// when the JSON wrote an integer such as `1`).
using AttrValue =
    std::variant<int64_t, double, bool, std::string, std::vector<int64_t>>;

// A compiled kernel an op runs on (target "cpu", KernelLibrary.h): its
// exported symbol, the iterations of its parallel loop (-1: the batch size)
// and the fewest iterations worth a thread.
struct ProgramKernel {
  std::string symbol;
  int64_t range = 1;
  int64_t grain = 1;
};

struct ProgramOp {
  std::string op; // "pe.attention", "arith.constant", ...
  std::vector<ValueId> operands;
  std::vector<ValueId> results;
  std::map<std::string, AttrValue> attrs;
  // The op's optional "kernels": run in order, they compute its results
  // (KernelSet::Compiled). Empty: the runtime's kernel library runs it.
  std::vector<ProgramKernel> kernels;

  bool has(std::string_view name) const;
  // Whether this is the op `code` names (a misspelt op is a compile error,
  // where comparing `op` with a string literal would not be).
  bool is(OpCode code) const;
  // Typed accessors; throw stringrt::Error when absent or of another type
  // (never after validation for the attributes the op's schema lists).
  int64_t getInt(std::string_view name) const;
  double getFloat(std::string_view name) const;
  bool getBool(std::string_view name) const;
  const std::string &getString(std::string_view name) const;
  const std::vector<int64_t> &getInts(std::string_view name) const;
  // An optional integer attribute (`axis`, `skip_base`): nullopt when absent.
  std::optional<int64_t> getOptionalInt(std::string_view name) const;
};

struct ProgramOutput {
  std::string name; // "loss", "logits", ...; empty for a gradient.
  std::string grad; // The parameter of a gradient output; empty otherwise.
  ValueId value = 0;

  bool isGrad() const { return !grad.empty(); }
  // `name`, or "grad:<param>" for a gradient.
  std::string key() const { return isGrad() ? "grad:" + grad : name; }
};

// Every arena slot starts at a multiple of this many bytes at every batch:
// the runtime lays the slots out back to back, each rounded up to it (the
// device rounds to its own, larger, kDeviceAlignment), so that the
// vectorised kernels' 16-byte loads and cp.async reach every value.
constexpr int64_t kArenaSlotAlignment = 16;

// A program's arena plan (docs/package.md, "The arena plan"): slot k holds
// slots[k].first * batch + slots[k].second BYTES (package version 3; the
// loader converts the 4-byte elements of versions 1 and 2); valueSlot[v] is
// value v's slot, -1 for values outside the arena (inputs, parameter views).
// The loader checks its structure; the executor checks the liveness rule,
// the sizes and the figures (runtime/src/core/execution/ArenaPlan.h).
struct ProgramArena {
  std::vector<std::pair<int64_t, int64_t>> slots;
  std::vector<int64_t> valueSlot;
  int64_t reportBatch = 0, arenaBytes = 0, noReuseBytes = 0;
  // The bytes of one element of each value as the plan stores it: 2 for the
  // values a `cuda` package stores in bf16 (its cuda.value_dtypes), 4 for
  // the others; empty: 4 for every value. Not written in the package:
  // Package::load derives it from the cuda section (and stringc from its
  // kernel plan).
  std::vector<int64_t> elementBytes;

  int64_t elementBytesOf(size_t value) const {
    return value < elementBytes.size() ? elementBytes[value] : 4;
  }
};

// The bytes at `batch` of `slots` ([per batch, fixed] bytes each) laid out
// back to back, each rounded up to `alignment`; nullopt past 2^63.
std::optional<int64_t> arenaSlotsBytes(const std::vector<std::pair<int64_t, int64_t>> &slots,
                                       int64_t batch, int64_t alignment = kArenaSlotAlignment);

struct Program {
  std::optional<ProgramArena> arena; // absent in packages without a plan
  std::vector<ProgramValue> values;
  std::vector<ValueId> inputs; // One per manifest input, in that order.
  std::vector<ProgramOp> ops;  // Execution order.
  std::vector<ProgramOutput> outputs; // outputs[0] is the loss.
};

struct Manifest {
  std::string model;
  std::vector<ManifestInput> inputs;
  std::vector<ManifestParam> params;
  ManifestOptimizer optimizer;
  std::optional<ManifestDataset> dataset;
  Program forward;   // programs.forward
  Program gradients; // programs.gradients: loss, then grad per trainable param

  // nullptr when there is none. A linear search: index the parameters by
  // name for a lookup per op.
  const ManifestParam *findParam(std::string_view name) const;
  // "forward" or "gradients"; throws stringrt::Error for any other name.
  const Program &program(std::string_view name) const;
};

// Parses and validates a manifest (the JSON text of the package's `manifest`
// metadata). Every problem throws stringrt::Error(path, what).
Manifest parseManifest(std::string_view json, const std::string &path);

// The inverse (ManifestWriter.cpp): the JSON text of `manifest`, which
// parseManifest reads back as the same Manifest; for any text it wrote,
// writeManifestJson(parseManifest(text)) == text. The compiler writes its
// packages' manifests with it. It does not validate (parseManifest does);
// throws stringrt::Error for what JSON cannot hold (a non-finite number, a
// string that is not UTF-8).
std::string writeManifestJson(const Manifest &manifest);

// Whether the reference target runs `op` (every pe forward and backward
// compute op, pe.get_param and arith.constant).
bool isKnownOp(std::string_view op);

} // namespace stringrt
