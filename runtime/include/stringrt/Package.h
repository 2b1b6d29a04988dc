// A compiled model package (docs/package.md): a safetensors container whose
// `__metadata__` holds format `stringc-package`, version `1`, the target and
// the manifest. Loading validates all of it.
#pragma once

#include "stringrt/Manifest.h"

#include <string>

namespace stringrt {

// Package format version this runtime reads.
constexpr int kPackageVersion = 1;
// The only target this runtime runs.
constexpr const char *kReferenceTarget = "cpu-reference";

class Package {
public:
  // Reads and validates the package at `path`; throws stringrt::Error
  // "<path>: <what is wrong>" for anything malformed.
  static Package load(const std::string &path);

  const std::string &path() const { return path_; }
  const std::string &target() const { return target_; }
  const Manifest &manifest() const { return manifest_; }

private:
  Package() = default;
  std::string path_;
  std::string target_;
  Manifest manifest_;
};

} // namespace stringrt
