// Fuzz target: a byte-level text corpus (TextCorpus.h) read as the GPT
// examples' data set (Data.h): the first byte picks the context length
// (1..32), the rest is the file. When it loads, every train and test window
// is batched and each token checked against the vocabulary.
#include "FuzzFile.h"

#include "stringrt/Data.h"
#include "stringrt/Error.h"
#include "stringrt/TextCorpus.h"

#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static stringc::fuzz::FuzzFile file("corpus.txt");
  if (size < 1)
    return -1;
  const int64_t context = 1 + data[0] % 32;
  file.write(data + 1, size - 1);
  try {
    stringrt::DataSet set = stringrt::DataSet::text(file.path(), context);
    for (stringrt::Split split : {stringrt::Split::Train, stringrt::Split::Test}) {
      int64_t count = set.count(split);
      if (count <= 0)
        continue;
      stringrt::Batch batch = set.range(split, 0, count);
      for (const stringrt::BatchTensor &t : batch.tensors)
        for (int32_t token : t.i32)
          if (token < 0 || token >= stringrt::kByteVocabSize)
            std::abort();
    }
  } catch (const stringrt::Error &) {
    // Malformed input: a clear error is the right answer.
  }
  return 0;
}
