// Fuzz target: image and token data sets from array files (ArrayData.h):
// .npy, .npz (stored and deflated zip members) and safetensors. The first
// byte picks the kind of file (the name's extension, as stringrun picks it)
// and whether it is read as images or tokens; the rest is the file. What
// loads is batched whole and checked against the limits it was loaded with.
#include "FuzzFile.h"

#include "stringrt/ArrayData.h"
#include "stringrt/Data.h"
#include "stringrt/Error.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <unistd.h>

namespace {

constexpr int64_t kClasses = 10;
constexpr int64_t kVocab = 256;

// The input under a name with the extension the loaders go by: a symbolic
// link to the in-memory file, in a directory removed at exit.
class NamedFuzzFile {
public:
  explicit NamedFuzzFile(const char *extension) : file_("arrays") {
    static std::string dir = makeDir();
    path_ = dir + "/data" + extension;
    if (::symlink(file_.path().c_str(), path_.c_str()) != 0) {
      std::perror("symlink");
      std::abort();
    }
  }
  ~NamedFuzzFile() { ::unlink(path_.c_str()); }
  void write(const uint8_t *data, size_t size) { file_.write(data, size); }
  const std::string &path() const { return path_; }

private:
  static std::string makeDir() {
    char pattern[] = "/tmp/stringc-fuzz-arrays-XXXXXX";
    if (!::mkdtemp(pattern)) {
      std::perror("mkdtemp");
      std::abort();
    }
    static std::string made = pattern;
    std::atexit([] { ::rmdir(made.c_str()); });
    return made;
  }

  stringc::fuzz::FuzzFile file_;
  std::string path_;
};

void batchEverything(const stringrt::DataSet &set, int64_t limit) {
  for (stringrt::Split split : {stringrt::Split::Train, stringrt::Split::Test}) {
    int64_t count = set.count(split);
    if (count <= 0)
      continue;
    stringrt::Batch batch = set.range(split, 0, count);
    for (const stringrt::BatchTensor &t : batch.tensors)
      for (int32_t value : t.i32)
        if (value < 0 || value >= limit)
          std::abort();
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static NamedFuzzFile npy(".npy"), npz(".npz"), safetensors(".safetensors");
  if (size < 1)
    return -1;
  NamedFuzzFile *files[] = {&npy, &npz, &safetensors};
  NamedFuzzFile &file = *files[data[0] % 3];
  const bool tokens = (data[0] / 3) % 2 == 1;
  const int64_t context = 1 + (data[0] / 6) % 8;
  file.write(data + 1, size - 1);
  try {
    if (tokens)
      batchEverything(stringrt::loadArrayTokens(file.path(), context, kVocab), kVocab);
    else
      batchEverything(stringrt::loadArrayImages(file.path(), kClasses), kClasses);
  } catch (const stringrt::Error &) {
    // Malformed input: a clear error is the right answer.
  }
  return 0;
}
