// Outputs against inputs (OutputPaths.h).
#include "OutputPaths.h"

#include <fmt/format.h>

#include <filesystem>

#include <sys/stat.h>

namespace stringrun {

namespace {

struct Identity {
  bool exists = false;
  dev_t device = 0;
  ino_t inode = 0;
  std::string path; // absolute, symlinks of existing parts resolved
};

Identity identify(const std::string &path) {
  Identity id;
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0) {
    id.exists = true;
    id.device = info.st_dev;
    id.inode = info.st_ino;
  }
  std::error_code error;
  std::filesystem::path absolute = std::filesystem::absolute(path, error);
  std::filesystem::path resolved = std::filesystem::weakly_canonical(absolute, error);
  id.path = (error ? absolute : resolved).lexically_normal().string();
  return id;
}

bool same(const Identity &a, const Identity &b) {
  if (a.exists && b.exists)
    return a.device == b.device && a.inode == b.inode;
  return a.path == b.path;
}

} // namespace

bool sameFile(const std::string &a, const std::string &b) {
  return same(identify(a), identify(b));
}

std::string outputConflict(const std::vector<RunFile> &inputs,
                           const std::vector<RunFile> &outputs) {
  for (size_t o = 0; o < outputs.size(); ++o) {
    const RunFile &out = outputs[o];
    const Identity id = identify(out.path);
    for (const RunFile &in : inputs)
      if (in.replaceableBy != out.role && same(id, identify(in.path)))
        return fmt::format("{} {} is the same file as {} {}: writing it would destroy the "
                           "input; give another path",
                           out.role, out.path, in.role, in.path);
    for (size_t p = 0; p < o; ++p)
      if (same(id, identify(outputs[p].path)))
        return fmt::format("{} {} is the same file as {} {}: one output would overwrite the "
                           "other; give another path",
                           out.role, out.path, outputs[p].role, outputs[p].path);
  }
  return "";
}

} // namespace stringrun
