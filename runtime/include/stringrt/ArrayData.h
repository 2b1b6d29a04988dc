// Data sets from array files (docs/data.md): NumPy .npy and .npz files and
// safetensors files. Every file is untrusted: a malformed one, or one whose
// arrays do not make a data set, throws stringrt::Error naming the file and
// what is wrong.
//
// Images: an .npz (np.savez or np.savez_compressed) or safetensors file
// with the arrays train_images, train_labels, test_images and test_labels.
// Images are u8 (batched as pixel / 255, the same bits as IDX data) or f32
// (as they are), shaped [N, C, H, W] or [N, H, W] (one channel); labels are
// integers (i64, i32, i16, i8 or u8) shaped [N]. Other arrays are ignored.
//
// Tokens (the GPT examples): a .npy of token ids shaped [N], split as a text
// corpus is (the last kTextTestFraction is the test split), or an .npz or
// safetensors file with the arrays train_tokens and test_tokens.
#pragma once

#include "stringrt/Data.h"

#include <cstdint>
#include <string>

namespace stringrt {

// Limit on a .npy file's size and on any one array in an .npz or
// safetensors file (after decompression).
constexpr uint64_t kMaxDataArrayBytes = uint64_t(2) << 30;

// Whether `path` names an array file by its extension: .npy, .npz or
// .safetensors. Other paths are IDX directories or text files.
bool isArrayDataPath(const std::string &path);

// An image set as above; every label must be in [0, numClasses).
DataSet loadArrayImages(const std::string &path, int64_t numClasses);

// A token set as above, in windows of contextLength + 1 tokens; every token
// must be in [0, vocabSize).
DataSet loadArrayTokens(const std::string &path, int64_t contextLength,
                        int64_t vocabSize);

} // namespace stringrt
