// The command line of stringrun (stringrun.cpp): the options and flags a
// command takes, parsed and checked (a UsageError: exit status 2), and the
// helpers that read them.
#pragma once

#include "stringrt/Augment.h"
#include "stringrt/KernelSet.h"
#include "stringrt/Manifest.h"

#include <fmt/format.h>

#include <charconv>
#include <map>
#include <optional>
#include <string>
#include <system_error>

namespace stringrun {

// A usage error: stringrun prints it and the pointer to --help, exit status 2.
struct UsageError {
  std::string message;
};

// The parsed command line: the command, the package, the options with values
// and the flags.
struct Args {
  std::string command;
  std::string package;
  std::map<std::string, std::string> values; // option -> value
  bool noEval = false;
  bool ema = false;     // --ema (eval --resume): the checkpoint's EMA of the weights
  bool noArena = false; // --no-arena: run on the buffer pool, not the arena plan
  bool profile = false; // --profile (bench): time every op by kind
  bool tf32 = false;    // --tf32 (--device cuda)
  bool noGraphs = false; // --no-graphs (--device cuda)
  bool noOverlap = false; // --no-overlap (--device cuda)
  bool noOverlapAllReduce = false; // --no-overlap-allreduce (--device cuda)
  bool hostAugment = false; // --host-augment (--device cuda)
  bool syncLaunches = false; // --sync-launches (--device cuda)
  bool resizePositions = false; // --resize-positions (eval)
};

// Parses and checks the command line (which options each command takes).
Args parseArgs(int argc, char **argv);

// The value of option `name`; nullopt when it was not given.
inline std::optional<std::string> value(const Args &args, const std::string &name) {
  auto it = args.values.find(name);
  if (it == args.values.end())
    return std::nullopt;
  return it->second;
}

// The integer value of option `name` (>= min); nullopt when it was not given.
template <typename Int>
std::optional<Int> number(const Args &args, const std::string &name, Int min) {
  auto text = value(args, name);
  if (!text)
    return std::nullopt;
  Int v{};
  const char *end = text->data() + text->size();
  auto [ptr, ec] = std::from_chars(text->data(), end, v);
  if (text->empty() || ec != std::errc() || ptr != end || v < min)
    throw UsageError{fmt::format("option '{}' needs an integer >= {}, got "
                                 "'{}'",
                                 name, min, *text)};
  return v;
}

// --kernels; nullopt: the package's default (Model(Package)).
std::optional<stringrt::KernelSet> kernelSet(const Args &args);

// --zero: the ZeRO stage of a data-parallel run (0: none; 1: the optimizer
// state sharded across the ranks, stringrt::DataParallelOptions). A usage
// error for anything but 0 and 1.
int zeroStage(const Args &args);

// --augment; nullopt: the package's augmentation.
std::optional<stringrt::AugmentPolicy> augmentOption(const Args &args);

// --threads (at most cpu::maxThreads(): a usage error beyond).
std::optional<int> threadsOption(const Args &args);

// --threads: with the fast kernels, the kernel pool's size (set here; the
// pool's default otherwise); with the reference kernels, the evaluation
// replicas. Returns the replicas.
int applyThreads(const Args &args, stringrt::KernelSet kernels);

// Refuses (a usage error) outputs that are the same file as an input or as
// another output: the package, the data, the checkpoint or parameters read,
// the manifest's `load` files (OutputPaths.h). The --resume checkpoint may
// be the --checkpoint: it is read whole before the first write.
void checkOutputs(const Args &args, const stringrt::Manifest &manifest);

} // namespace stringrun
