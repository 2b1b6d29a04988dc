// Package::load: the safetensors container, its metadata and the manifest
// (docs/package.md).
#include "stringrt/Package.h"

#include "Json.h"
#include "stringrt/Error.h"
#include "stringrt/Safetensors.h"

#include <fmt/format.h>

namespace stringrt {

using detail::quoteForMessage;

Package Package::load(const std::string &path) {
  SafetensorsFile file = SafetensorsFile::open(path);
  const std::map<std::string, std::string> &metadata = file.metadata();
  auto require = [&](const char *key) -> const std::string & {
    auto it = metadata.find(key);
    if (it == metadata.end())
      throw Error(path, fmt::format("not a stringc package: no \"{}\" in the "
                                    "metadata",
                                    key));
    return it->second;
  };
  const std::string &format = require("format");
  if (format != "stringc-package")
    throw Error(path, fmt::format("not a stringc package: format is {} "
                                  "(expected \"stringc-package\")",
                                  quoteForMessage(format)));
  const std::string &version = require("version");
  if (version != std::to_string(kPackageVersion))
    throw Error(path, fmt::format("unsupported package version {} (this "
                                  "runtime reads version {})",
                                  quoteForMessage(version), kPackageVersion));
  const std::string &target = require("target");
  if (target != kReferenceTarget)
    throw Error(path, fmt::format("unsupported target {} (this runtime runs "
                                  "\"{}\")",
                                  quoteForMessage(target), kReferenceTarget));
  const std::string &manifest = require("manifest");
  for (const auto &[key, value] : metadata)
    if (key != "format" && key != "version" && key != "target" &&
        key != "manifest")
      throw Error(path, fmt::format("unknown metadata key {}",
                                    quoteForMessage(key)));
  if (!file.tensors().empty())
    throw Error(path, fmt::format("target {} has no binary sections, but the "
                                  "package holds tensor {}",
                                  kReferenceTarget,
                                  quoteForMessage(file.tensors()[0].name)));

  Package package;
  package.path_ = path;
  package.target_ = target;
  package.manifest_ = parseManifest(manifest, path);
  return package;
}

} // namespace stringrt
