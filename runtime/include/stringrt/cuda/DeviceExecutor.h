// The device executor (docs/cuda.md, "The device executor"): runs the
// programs of a "cuda" package on one GPU by walking the package's step
// program (CudaSection::steps), and trains with AdamW and global-norm
// clipping on the device.
//
// Memory: the parameters, their gradients and the AdamW moments are flat
// device buffers in manifest order (a pe.get_param result is a view into
// the parameters); each program has, per batch size, one arena laid out by
// the package's arena plan (the CPU executor's layout) and one buffer for
// the values outside it (inputs, i32 results, f32 results of programs
// without a plan); scratch buffers are one block sized for the largest op.
// Everything runs on one stream (with CUDA graphs, DeviceOptions); a
// training step uploads the batch, walks
// @gradients, copies the gradient outputs into the flat gradient buffer,
// computes the gradient norm's partial sums, and then makes its only
// synchronisation: the loss and the partials come back together, the host
// forms the clipping factor and launches AdamW (asynchronously: the next
// step's synchronisation covers it).
//
// A package whose programs have ops without steps is refused, naming them.
#pragma once

#include "stringrt/CudaSection.h"
#include "stringrt/HostTensor.h"
#include "stringrt/Manifest.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace stringrt::cuda {

struct DeviceOptions {
  int device = 0;
  // cuBLAS may use TF32 tensor cores for the GEMMs (faster, ~1e-3 relative
  // error in products): off for comparisons with the CPU executor.
  bool tf32 = false;
  // From the second training step at a batch size on, replay the step's
  // device work (the walk of @gradients, the gradient copies, the norm's
  // partials and the copies back) as a CUDA graph captured on that step:
  // one launch instead of hundreds. When capture fails the executor says so
  // on stderr once and runs the steps without graphs.
  bool graphs = true;
};

class DeviceModel {
public:
  // Opens the device, loads the kernels, uploads `parameters` (the flat
  // buffer of Model::parameters(), manifest order). Throws Error when no
  // device can be used (cuda::unavailableReason()), when a program has ops
  // without steps ("... has no GPU steps for: pe.rope x2, ..."), or when the
  // optimizer is not adamw.
  DeviceModel(const Manifest &manifest, const CudaSection &section,
              const std::vector<float> &parameters, DeviceOptions options = {});
  ~DeviceModel();
  DeviceModel(const DeviceModel &) = delete;
  DeviceModel &operator=(const DeviceModel &) = delete;

  const std::string &deviceName() const;

  // One training step t = stepCount() + 1 of a run of `totalSteps`:
  // gradients, global-norm clipping, AdamW (the formula of Optimizer.h).
  // Returns the loss (before the update).
  float trainStep(const std::map<std::string, HostTensor> &inputs, int64_t totalSteps);
  int64_t stepCount() const;

  // Runs @gradients alone: the loss and every trainable parameter's
  // gradient in its slot of the flat buffer (frozen slots 0), as
  // Model::gradients.
  void gradients(const std::map<std::string, HostTensor> &inputs, float &loss,
                 std::vector<float> &flatGrads);

  // Runs @forward; its f32 outputs by name, copied back.
  std::map<std::string, std::vector<float>> forward(const std::map<std::string, HostTensor> &inputs);

  // The parameters now (copied back).
  std::vector<float> parameters() const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace stringrt::cuda
