#include "stringrt/OpSchema.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <string_view>

namespace stringrt {
namespace {

const std::vector<OpSchema> &schemas() {
  static const std::vector<OpSchema> table = {
#include "OpSchemaTable.inc"
  };
  return table;
}

} // namespace

int OpSchema::resultCount(int numOperands) const {
  if (resultsFollowOperands && numOperands < maxOperands)
    return minResults;
  return maxResults;
}

bool OpSchema::acceptsResults(int numOperands, int numResults) const {
  const int want = resultCount(numOperands);
  return numResults == want || (savedResult && numResults == want - 1);
}

const AttrSchema *OpSchema::findAttr(std::string_view attr) const {
  for (const AttrSchema &a : attrs)
    if (attr == a.name)
      return &a;
  return nullptr;
}

const OpSchema &opSchema(OpCode code) { return schemas()[static_cast<size_t>(code)]; }

std::optional<OpCode> findOpCode(std::string_view name) {
  // The rows are in name order (the generator sorts them).
  const std::vector<OpSchema> &table = schemas();
  auto it = std::lower_bound(table.begin(), table.end(), name,
                             [](const OpSchema &s, std::string_view n) { return s.name < n; });
  if (it == table.end() || it->name != name)
    return std::nullopt;
  return it->code;
}

} // namespace stringrt
