// Refusing a run whose outputs would overwrite its inputs: stringrun's
// --checkpoint, --log and --out against the package, the data, the
// checkpoint or parameters it reads, and against each other. Files are
// compared by identity (device and inode, symlinks resolved), so another
// name for the same file (a symlink, a hard link, "./x") is caught too.
#pragma once

#include <string>
#include <vector>

namespace stringrun {

struct RunFile {
  std::string role; // how the message names it: "--log", "the package", ...
  std::string path;
  // The output role that may replace this input ("--checkpoint" for the
  // --resume checkpoint: a resumed run keeps writing its checkpoint); "".
  std::string replaceableBy = "";
};

// Whether `a` and `b` name the same file: the same device and inode when
// both exist (following symlinks), else the same absolute path with the
// symlinks of its existing directories resolved.
bool sameFile(const std::string &a, const std::string &b);

// The first output that is the same file as an input or as another output,
// as a message ("--log a.ckpt is the same file as --checkpoint a.ckpt: ...");
// empty when there is none.
std::string outputConflict(const std::vector<RunFile> &inputs,
                           const std::vector<RunFile> &outputs);

} // namespace stringrun
