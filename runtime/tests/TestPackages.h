// Hand-written packages shared by the runtime tests: the programs of a tiny
// linear classifier and a package file around a manifest (docs/package.md).
#pragma once

#include <map>
#include <string>

namespace stringrt::test {

// The forward program of a linear classifier, logits = x w + b with w of shape
// [features, classes], loss = cross_entropy(logits, label). Values: 0 x,
// 1 label, 2 w, 3 b, 4 logits, 5 loss; outputs "loss" and "logits".
std::string linearForwardProgram(int features, int classes);

// Its gradients program: the forward ops, then the gradient of w (value 8)
// and, when `biasGrad`, of b (value 9); without it b must be frozen.
std::string linearGradientsProgram(int features, int classes, bool biasGrad = true);

// The manifest of model "tiny", that classifier with 4 features and 3
// classes (inputs image f32 [-1, 4] and label i32 [-1], trainable w and b,
// optimizer kind `optimizer` with AdamW's settings), its programs
// `forwardProgram` and linearGradientsProgram(4, 3).
std::string tinyLinearManifest(const std::string &forwardProgram,
                               const std::string &optimizer = "adamw");

// Writes a package file at `path` holding `manifest`: format
// "stringc-package", version "1", target "cpu-reference". Each override sets
// a metadata key, or removes it when its value is empty.
void writePackageFile(const std::string &path, const std::string &manifest,
                      const std::map<std::string, std::string> &overrides = {});

} // namespace stringrt::test
