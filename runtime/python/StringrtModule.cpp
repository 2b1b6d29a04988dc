// The Python module `stringrt` (docs/python.md): Package, Model and Error
// over the runtime's C++ API (PythonModel.h). NumPy in, NumPy out; the GIL is
// released while a program or an optimizer step runs.
#include "PythonModel.h"

#include "stringrt/Error.h"
#include "stringrt/Package.h"
#include "stringrt/cpu/ThreadPool.h"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace py = pybind11;
using stringrt::Error;
using stringrt::HostTensor;
using stringrt::python::PythonModel;

namespace {

using FloatArray = py::array_t<float, py::array::c_style | py::array::forcecast>;
using IntArray = py::array_t<int32_t, py::array::c_style | py::array::forcecast>;

// Inputs converted for one call: the arrays (C-contiguous float32 / int32,
// copies where the caller's were not) stay referenced while the call runs
// without the GIL.
struct Inputs {
  std::vector<py::array> keep;
  std::map<std::string, HostTensor> tensors;
};

std::vector<int64_t> shapeOf(const py::array &a) {
  return std::vector<int64_t>(a.shape(), a.shape() + a.ndim());
}

Inputs convertInputs(const stringrt::Manifest &manifest, const py::dict &kwargs) {
  Inputs result;
  std::string names;
  for (const stringrt::ManifestInput &in : manifest.inputs)
    names += (names.empty() ? "" : ", ") + in.name;
  for (auto item : kwargs) {
    const std::string name = py::cast<std::string>(item.first);
    const stringrt::ManifestInput *input = nullptr;
    for (const stringrt::ManifestInput &in : manifest.inputs)
      if (in.name == name)
        input = &in;
    if (!input)
      throw Error("unknown input '" + name + "' (the model's inputs: " + names + ")");
    py::array given = py::array::ensure(item.second);
    if (!given)
      throw Error("input '" + name + "' is not an array");
    if (input->dtype == stringrt::DType::I32) {
      // Labels and tokens: integers only (a float array would be truncated).
      const char kind = given.dtype().kind();
      if (kind != 'i' && kind != 'u')
        throw Error("input '" + name + "' must hold integers (i32), got dtype " +
                    py::str(given.dtype()).cast<std::string>());
      IntArray a = IntArray::ensure(given);
      result.tensors[name] = HostTensor(a.data(), shapeOf(a));
      result.keep.push_back(a);
    } else {
      FloatArray a = FloatArray::ensure(given);
      if (!a)
        throw Error("input '" + name + "' cannot be converted to float32");
      result.tensors[name] = HostTensor(a.data(), shapeOf(a));
      result.keep.push_back(a);
    }
  }
  return result;
}

// A NumPy array owning `values` (moved, no copy).
py::array_t<float> owningArray(std::vector<float> &&values, const std::vector<int64_t> &shape) {
  auto *owned = new std::vector<float>(std::move(values));
  py::capsule free(owned, [](void *p) { delete static_cast<std::vector<float> *>(p); });
  std::vector<py::ssize_t> dims(shape.begin(), shape.end());
  return py::array_t<float>(dims, owned->data(), free);
}

// Views of the slots of one flat buffer owned by `base`, by parameter name.
py::dict slotViews(const std::vector<stringrt::ParamSlot> &slots, float *flat, py::handle base,
                   bool trainableOnly) {
  py::dict result;
  for (const stringrt::ParamSlot &slot : slots) {
    if (trainableOnly && slot.frozen)
      continue;
    std::vector<py::ssize_t> dims(slot.shape.begin(), slot.shape.end());
    result[py::str(slot.name)] = py::array_t<float>(dims, flat + slot.offset, base);
  }
  return result;
}

std::vector<float> &liveParameters(PythonModel &m) {
  m.syncFromDevice();
  return m.hostParameters();
}

py::dict parameters(py::object self) {
  PythonModel &m = self.cast<PythonModel &>();
  std::vector<float> &flat = liveParameters(m);
  if (m.device() == "cpu") // views into the live buffer, keeping the Model alive
    return slotViews(m.slots(), flat.data(), self, false);
  // Copies: the live parameters are on the device.
  std::vector<int64_t> shape{static_cast<int64_t>(flat.size())};
  py::array_t<float> copy = owningArray(std::vector<float>(flat), shape);
  return slotViews(m.slots(), copy.mutable_data(), copy, false);
}

void setParameters(PythonModel &m, const py::dict &arrays) {
  std::vector<float> &flat = liveParameters(m);
  // Every array checked before anything is written.
  std::vector<std::pair<const stringrt::ParamSlot *, FloatArray>> updates;
  for (auto item : arrays) {
    const std::string name = py::cast<std::string>(item.first);
    const stringrt::ParamSlot *slot = nullptr;
    for (const stringrt::ParamSlot &s : m.slots())
      if (s.name == name)
        slot = &s;
    if (!slot)
      throw Error("unknown parameter '" + name + "'");
    FloatArray a = FloatArray::ensure(item.second);
    if (!a || shapeOf(a) != slot->shape)
      throw Error("parameter '" + name + "' must have shape " +
                  stringrt::ref::shapeToString(slot->shape) + ", got " +
                  (a ? stringrt::ref::shapeToString(shapeOf(a)) : std::string("no array")));
    updates.emplace_back(slot, a);
  }
  for (auto &[slot, a] : updates)
    std::copy(a.data(), a.data() + slot->size, flat.begin() + slot->offset);
  m.syncToDevice();
}

py::dict stepInfo(const stringrt::OptimizerStepInfo &info, float loss) {
  py::dict d;
  d["step"] = info.step;
  d["loss"] = loss;
  d["lr"] = info.lr;
  d["grad_norm"] = info.gradNorm;
  d["clip_scale"] = info.clipScale;
  return d;
}

py::dict describeInputs(const stringrt::Manifest &manifest) {
  py::dict d;
  for (const stringrt::ManifestInput &in : manifest.inputs)
    d[py::str(in.name)] = py::make_tuple(in.dtype == stringrt::DType::I32 ? "int32" : "float32",
                                         py::tuple(py::cast(in.shape)));
  return d;
}

} // namespace

PYBIND11_MODULE(stringrt, m) {
  m.doc() = "The stringc runtime: load, run and train compiled model packages (docs/python.md)";
  py::register_exception<Error>(m, "Error", PyExc_RuntimeError);
  m.attr("have_cuda") = stringrt::python::haveCuda();
  m.def("set_num_threads", &stringrt::cpu::setNumThreads, py::arg("n"),
        "The CPU kernels' thread pool size (results do not depend on it)");

  py::class_<stringrt::Package>(m, "Package")
      .def_static("load", &stringrt::Package::load, py::arg("path"),
                  "Reads and validates a package written by `stringc --target=...`")
      .def_property_readonly("path", &stringrt::Package::path)
      .def_property_readonly("target", &stringrt::Package::target)
      .def_property_readonly("model_name",
                             [](const stringrt::Package &p) { return p.manifest().model; })
      .def_property_readonly("inputs",
                             [](const stringrt::Package &p) { return describeInputs(p.manifest()); },
                             "{name: (dtype, shape)}; -1 is the batch")
      .def("__repr__", [](const stringrt::Package &p) {
        return "<stringrt.Package '" + p.manifest().model + "' (" + p.target() + ") " + p.path() +
               ">";
      });

  py::class_<PythonModel>(m, "Model")
      .def(py::init<const stringrt::Package &, const std::string &, const std::string &,
                    uint64_t>(),
           py::arg("package"), py::arg("kernels") = "", py::arg("device") = "cpu",
           py::arg("seed") = 0,
           "kernels: '' (the package's default), 'compiled', 'fast' or 'reference'; "
           "device: 'cpu' or 'cuda'; seed: the data seed of the dropout masks")
      .def_property_readonly("device", &PythonModel::device)
      .def_property_readonly("kernels", &PythonModel::kernels)
      .def_property_readonly("step", &PythonModel::stepCount, "optimizer steps taken")
      .def_property_readonly("inputs", [](PythonModel &self) {
        return describeInputs(self.manifest());
      })
      .def_property_readonly("parameters", &parameters,
                             "{name: ndarray}: writable views of the live parameters on the "
                             "CPU, copies with device 'cuda'")
      .def("set_parameters",
           [](PythonModel &self, const py::kwargs &arrays) { setParameters(self, arrays); })
      .def("init_parameters",
           [](PythonModel &self, uint64_t initSeed) {
             py::gil_scoped_release release;
             self.initParameters(initSeed);
           },
           py::arg("init_seed") = 0)
      .def("load_parameters",
           [](PythonModel &self, const std::string &path, bool ema) {
             py::gil_scoped_release release;
             self.loadParameters(path, ema);
           },
           py::arg("path"), py::arg("ema") = false)
      .def("load_checkpoint",
           [](PythonModel &self, const std::string &path) {
             py::gil_scoped_release release;
             self.loadCheckpoint(path);
           },
           py::arg("path"))
      .def("save_checkpoint",
           [](PythonModel &self, const std::string &path, int64_t totalSteps) {
             py::gil_scoped_release release;
             self.saveCheckpoint(path, totalSteps);
           },
           py::arg("path"), py::arg("total_steps") = 0)
      .def("forward",
           [](PythonModel &self, const py::kwargs &kwargs) {
             Inputs in = convertInputs(self.manifest(), kwargs);
             std::map<std::string, std::vector<float>> outputs;
             std::map<std::string, std::vector<int64_t>> shapes;
             {
               py::gil_scoped_release release;
               outputs = self.forward(in.tensors, shapes);
             }
             py::dict result;
             for (auto &[name, values] : outputs)
               result[py::str(name)] = owningArray(std::move(values), shapes.at(name));
             return result;
           })
      .def("gradients",
           [](PythonModel &self, const py::kwargs &kwargs) {
             Inputs in = convertInputs(self.manifest(), kwargs);
             std::vector<float> flat;
             float loss = 0;
             {
               py::gil_scoped_release release;
               loss = self.gradients(in.tensors, flat);
             }
             std::vector<int64_t> shape{static_cast<int64_t>(flat.size())};
             py::array_t<float> owner = owningArray(std::move(flat), shape);
             return py::make_tuple(loss, slotViews(self.slots(), owner.mutable_data(), owner, true));
           },
           "(loss, {name: gradient}) of the trainable parameters on one batch")
      .def("train_step",
           [](PythonModel &self, int64_t totalSteps, const py::kwargs &kwargs) {
             Inputs in = convertInputs(self.manifest(), kwargs);
             stringrt::OptimizerStepInfo info;
             float loss = 0;
             {
               py::gil_scoped_release release;
               info = self.trainStep(in.tensors, totalSteps, loss);
             }
             return stepInfo(info, loss);
           },
           py::arg("total_steps"),
           "One optimizer step of a run of total_steps steps (the learning-rate schedule's "
           "length); returns {step, loss, lr, grad_norm, clip_scale}");
}
