//===- Frontend.h - .pe file to ModelGraph in one call ----------*- C++ -*-===//
#ifndef STRINGC_FRONTEND_FRONTEND_H
#define STRINGC_FRONTEND_FRONTEND_H

#include "stringc/Frontend/ConstantOverrides.h"
#include "stringc/Frontend/Diagnostics.h"
#include "stringc/Frontend/Graph.h"

#include <optional>
#include <string>
#include <vector>

namespace stringc {

/// Lexes, parses and analyzes the model in `sources`, whose relative paths
/// (load, data) are resolved against `baseDir`. Returns the graph, or nullopt
/// when `diags` holds errors. The graph's sourcePath is `sources.name()`.
/// `overrides` replace top-level constants' values (stringc -D NAME=VALUE).
std::optional<ModelGraph> compileModel(const SourceManager &sources, DiagnosticEngine &diags,
                                       const std::string &baseDir,
                                       const std::vector<ConstantOverride> &overrides = {});

/// The directory that relative paths in the model file `path` refer to: the
/// file's own directory, made absolute.
std::string modelBaseDir(const std::string &path);

} // namespace stringc

#endif // STRINGC_FRONTEND_FRONTEND_H
