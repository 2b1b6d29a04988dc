// A model: the parameters and the programs of one package (docs/package.md,
// "Runtime API"). The parameters live in one flat f32 buffer, in manifest
// order; programs run on the fast CPU kernels where an op has one and on the
// reference kernels otherwise, or on the reference kernels alone (KernelSet,
// chosen at construction).
#pragma once

#include "stringrt/DropoutMask.h"
#include "stringrt/HostTensor.h"
#include "stringrt/KernelSet.h"
#include "stringrt/Manifest.h"
#include "stringrt/OpProfile.h"
#include "stringrt/Package.h"
#include "stringrt/reference/Tensor.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace stringrt {

// Where one parameter lives in the flat buffer.
struct ParamSlot {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0; // first element in the flat buffer
  int64_t size = 0;   // number of elements
  bool frozen = false;
};

class Model {
public:
  // The package's compiled kernels (KernelSet::Compiled) when it has them
  // and this machine can run them (the library is then loaded: trust the
  // package as a shared library), the fast kernels otherwise.
  explicit Model(Package package);
  // Throws Error for KernelSet::Compiled when the package has no compiled
  // kernels or this CPU lacks a feature they were compiled for.
  Model(Package package, KernelSet kernels);
  // A model of a manifest (built by hand or by parseManifest). `path` names
  // the source in messages (may be empty). Throws Error when a program does
  // not fit the manifest (unknown op or parameter, bad value ids, ...).
  // KernelSet::Compiled needs the `library` the manifest's kernels are in.
  explicit Model(Manifest manifest, std::string path = "",
                 KernelSet kernels = KernelSet::Fast,
                 std::shared_ptr<const KernelLibrary> library = nullptr);
  ~Model();
  Model(Model &&) noexcept;
  Model &operator=(Model &&) noexcept;

  const Manifest &manifest() const;
  // The kernels the programs run on (fixed at construction).
  KernelSet kernels() const;
  // The compiled kernels' library (shared with the package) for
  // KernelSet::Compiled; null for the other kernel sets, which never load
  // a package's code.
  const std::shared_ptr<const KernelLibrary> &kernelLibrary() const;
  // Whether the programs place their intermediate values in the package's
  // arena plan (docs/package.md, "The arena plan"; the default when both
  // programs have one) or in buffers recycled at run time. Enabling it
  // without a plan throws Error.
  bool arenaPlan() const;
  void setArenaPlan(bool enabled);
  // Later runs of both programs add each op's wall time to `profile`
  // (OpProfile.h; it must outlive them); null stops timing.
  void setProfile(OpProfile *profile);

  // The training step whose dropout masks later runs draw (DropoutMask.h:
  // the run's seed, the step, the index of the inputs' first row in the
  // step's whole batch); {0, 0, 0} until set. Only the gradients program
  // holds dropout (pe-autodiff removes it from forward, the evaluation).
  void setStepKey(const StepKey &key);
  const StepKey &stepKey() const;

  // Every parameter from its initialiser (normal, uniform, zeros, ones,
  // constant, load). `initSeed` != 0 reseeds the random ones (normal,
  // uniform) for another draw of the same model (docs/package.md,
  // "Parameter initialisation"); 0 keeps the package's seeds. Throws Error if
  // a `load` fails; the buffer is then partly written.
  void initParameters(uint64_t initSeed = 0);

  // One flat buffer, parameters in manifest order (sized at construction to
  // parameterCount(), zero-filled). Callers may write it freely but must not
  // resize it.
  std::vector<float> &parameters();
  const std::vector<float> &parameters() const;
  const std::vector<ParamSlot> &slots() const;
  // nullptr when there is no parameter of that name.
  const ParamSlot *findSlot(const std::string &name) const;
  int64_t parameterCount() const;
  // The most bytes of intermediate values a run of `program` at `batch`
  // holds at once: its arena at that batch with the package's plan, the
  // peak of its live results without (saturating at INT64_MAX). What a run
  // allocates beyond the parameters and the inputs.
  int64_t programBytes(const std::string &program, int64_t batch) const;

  // Runs a program ("forward" or "gradients") with the given inputs, named
  // as in the manifest (every one, no other). The batch size is dim 0 of the
  // inputs with a batch dimension; they must agree. Returns the program's
  // outputs by name: "loss", "logits", ..., "grad:<param>".
  std::map<std::string, ref::Tensor<float>> run(const std::string &program,
                                                const std::map<std::string, HostTensor> &inputs);

  // Runs the gradients program: `loss` gets the loss; `flatGrads` is resized
  // to parameterCount() and holds each trainable parameter's gradient in its
  // slot (frozen slots: 0).
  void gradients(const std::map<std::string, HostTensor> &inputs, float &loss,
                 std::vector<float> &flatGrads);

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace stringrt
