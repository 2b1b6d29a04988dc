#include "data/Npy.h"

#include "format/InputFile.h"
#include "format/Json.h"
#include "stringrt/Error.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>
#include <functional>
#include <limits>
#include <optional>

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              ".npy data is read as little-endian without byte swapping");

namespace stringrt::detail {

int64_t DataArray::numel() const {
  int64_t count = 1;
  for (int64_t dim : shape)
    count *= dim;
  return count;
}

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;

// The header dict: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// Parsed by hand, not evaluated: only these three keys, string, bool and
// tuple-of-integers values, and whitespace.
class HeaderParser {
public:
  HeaderParser(const std::string &text, const std::function<void(const std::string &)> &fail)
      : text_(text), fail_(fail) {}

  std::string descr;
  bool fortranOrder = false;
  std::vector<int64_t> shape;

  void parse() {
    skipSpace();
    expect('{');
    bool sawDescr = false, sawOrder = false, sawShape = false;
    skipSpace();
    while (peek() != '}') {
      std::string key = parseString();
      skipSpace();
      expect(':');
      skipSpace();
      if (key == "descr") {
        once(sawDescr, key);
        descr = parseString();
      } else if (key == "fortran_order") {
        once(sawOrder, key);
        fortranOrder = parseBool();
      } else if (key == "shape") {
        once(sawShape, key);
        shape = parseShape();
      } else {
        fail(fmt::format("unexpected key {} in the header (expected descr, "
                         "fortran_order, shape)",
                         quoteForMessage(key)));
      }
      skipSpace();
      if (peek() == ',') {
        ++pos_;
        skipSpace();
      } else if (peek() != '}') {
        fail(fmt::format("expected ',' or '}}' at byte {} of the header", pos_));
      }
    }
    ++pos_;
    skipSpace();
    if (pos_ != text_.size())
      fail(fmt::format("unexpected text after the header's dict at byte {}", pos_));
    for (auto [seen, key] :
         {std::pair{sawDescr, "descr"}, {sawOrder, "fortran_order"}, {sawShape, "shape"}})
      if (!seen)
        fail(fmt::format("the header has no '{}'", key));
  }

private:
  [[noreturn]] void fail(const std::string &what) const {
    fail_(what);
    throw Error(what); // fail_ always throws; this keeps [[noreturn]] honest.
  }
  char peek() const {
    if (pos_ >= text_.size())
      fail("the header ends inside its dict");
    return text_[pos_];
  }
  void skipSpace() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\t'))
      ++pos_;
  }
  void expect(char c) {
    if (peek() != c)
      fail(fmt::format("expected '{}' at byte {} of the header", c, pos_));
    ++pos_;
  }
  void once(bool &seen, const std::string &key) {
    if (seen)
      fail(fmt::format("key '{}' appears twice in the header", key));
    seen = true;
  }
  std::string parseString() {
    char quote = peek();
    if (quote != '\'' && quote != '"')
      fail(fmt::format("expected a quoted string at byte {} of the header", pos_));
    size_t end = text_.find(quote, pos_ + 1);
    if (end == std::string::npos)
      fail("a string in the header is not closed");
    std::string value = text_.substr(pos_ + 1, end - pos_ - 1);
    if (value.find('\\') != std::string::npos)
      fail(fmt::format("unsupported escape in the header string {}", quoteForMessage(value)));
    pos_ = end + 1;
    return value;
  }
  bool parseBool() {
    for (auto [word, value] : {std::pair{"True", true}, {"False", false}})
      if (text_.compare(pos_, std::strlen(word), word) == 0) {
        pos_ += std::strlen(word);
        return value;
      }
    fail(fmt::format("fortran_order must be True or False (at byte {} of the "
                     "header)",
                     pos_));
  }
  std::vector<int64_t> parseShape() {
    expect('(');
    std::vector<int64_t> dims;
    skipSpace();
    while (peek() != ')') {
      dims.push_back(parseDim(dims.size()));
      skipSpace();
      if (peek() == ',') {
        ++pos_;
        skipSpace();
      } else if (peek() != ')') {
        fail(fmt::format("expected ',' or ')' in the shape at byte {} of the "
                         "header",
                         pos_));
      }
    }
    ++pos_;
    return dims;
  }
  int64_t parseDim(size_t index) {
    size_t start = pos_;
    int64_t value = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      int digit = text_[pos_] - '0';
      if (value > (std::numeric_limits<int64_t>::max() - digit) / 10)
        fail(fmt::format("shape dimension {} does not fit in 64 bits", index));
      value = value * 10 + digit;
      ++pos_;
    }
    if (pos_ == start)
      fail(fmt::format("shape dimension {} is not a non-negative integer (at "
                       "byte {} of the header)",
                       index, start));
    return value;
  }

  const std::string &text_;
  std::function<void(const std::string &)> fail_;
  size_t pos_ = 0;
};

// The DType of a descr such as '<f4'; one-byte types may use '|' or '<'.
std::optional<DType> descrType(const std::string &descr) {
  static const std::pair<const char *, DType> kTypes[] = {
      {"f8", DType::F64}, {"f4", DType::F32}, {"f2", DType::F16},
      {"i8", DType::I64}, {"i4", DType::I32}, {"i2", DType::I16},
      {"i1", DType::I8},  {"u1", DType::U8},  {"b1", DType::Bool}};
  if (descr.size() != 3)
    return std::nullopt;
  for (auto [code, dtype] : kTypes)
    if (descr.compare(1, 2, code) == 0) {
      bool oneByte = dtypeSize(dtype) == 1;
      if (descr[0] == '<' || (oneByte && descr[0] == '|'))
        return dtype;
    }
  return std::nullopt;
}

} // namespace

DataArray parseNpy(const std::string &path, const std::string &entry, std::vector<uint8_t> bytes) {
  const std::string prefix =
      entry.empty() ? std::string() : fmt::format("array {}: ", quoteForMessage(entry));
  auto fail = [&](const std::string &what) { throw Error(path, prefix + what); };

  if (bytes.size() < kMagicSize || std::memcmp(bytes.data(), kMagic, kMagicSize) != 0)
    fail("not a .npy array (it does not start with the magic \"\\x93NUMPY\")");
  if (bytes.size() < kMagicSize + 2)
    fail(fmt::format("is {} bytes, too short for the .npy version", bytes.size()));
  const int major = bytes[6], minor = bytes[7];
  if (major < 1 || major > 3 || minor != 0)
    fail(fmt::format(".npy format version {}.{} is not supported (1.0, 2.0 or 3.0)", major, minor));
  const size_t lengthBytes = major == 1 ? 2 : 4;
  const size_t lengthEnd = kMagicSize + 2 + lengthBytes;
  if (bytes.size() < lengthEnd)
    fail(fmt::format("is {} bytes, too short for the .npy header length", bytes.size()));
  uint64_t headerLength = 0;
  for (size_t i = lengthBytes; i-- > 0;)
    headerLength = headerLength << 8 | bytes[kMagicSize + 2 + i];
  if (headerLength > bytes.size() - lengthEnd)
    fail(fmt::format("the header of {} bytes runs past the end of the data ({} "
                     "bytes): truncated",
                     headerLength, bytes.size()));
  const std::string header(bytes.begin() + lengthEnd, bytes.begin() + lengthEnd + headerLength);

  HeaderParser parser(header, fail);
  parser.parse();
  if (parser.fortranOrder)
    fail("fortran_order is True: only C-order arrays are supported (save "
         "np.ascontiguousarray(a))");
  std::optional<DType> dtype = descrType(parser.descr);
  if (!dtype)
    fail(fmt::format("dtype {} is not supported (expected little-endian '<f4', "
                     "'<f8', '<f2', '<i8', '<i4', '<i2', '|i1', '|u1' or '|b1')",
                     quoteForMessage(parser.descr)));

  DataArray array;
  array.dtype = *dtype;
  array.shape = parser.shape;
  const uint64_t dataSize = bytes.size() - lengthEnd - headerLength;
  const uint64_t elementSize = dtypeSize(*dtype);
  // Count the bytes the shape needs, noting when they pass 2^64.
  const uint64_t maxElements = std::numeric_limits<uint64_t>::max() / elementSize;
  uint64_t numel = 1;
  bool tooMany = false;
  for (int64_t dim : array.shape) {
    auto d = static_cast<uint64_t>(dim);
    if (d != 0 && numel > maxElements / d)
      tooMany = true;
    numel *= tooMany ? 1 : d;
  }
  for (int64_t dim : array.shape)
    tooMany = tooMany && dim != 0;
  if (tooMany || numel * elementSize != dataSize)
    fail(fmt::format("shape ({}) of {} needs {} bytes of data but {} follow the "
                     "header",
                     fmt::join(array.shape, ", "), parser.descr,
                     tooMany ? std::string("more than 2^64") : std::to_string(numel * elementSize),
                     dataSize));
  bytes.erase(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(lengthEnd + headerLength));
  array.bytes = std::move(bytes);
  return array;
}

DataArray readNpyFile(const std::string &path, uint64_t maxBytes) {
  return parseNpy(path, "", InputFile(path).readAll(maxBytes, ".npy files"));
}

} // namespace stringrt::detail
