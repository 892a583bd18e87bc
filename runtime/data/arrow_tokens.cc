// TokenFile over a pre-tokenized Arrow column (shard.h).
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "runtime/data/arrow/arrow_stream.h"
#include "runtime/data/shard.h"

namespace hypertrain::data {

StatusOr<std::unique_ptr<TokenFile>> TokenFile::OpenArrow(const std::string& path, const std::string& column) {
  HT_ASSIGN_OR_RETURN(std::unique_ptr<arrow::ArrowStreamReader> reader, arrow::ArrowStreamReader::Open(path));
  const int field = reader->FieldIndex(column);
  if (field < 0) {
    std::vector<std::string> names;
    for (const auto& f : reader->fields()) names.push_back(f.name + ": " + f.type.ToString());
    return InvalidArgument(fmt::format("{}: no '{}' column to train on (columns: {}); tokenize text columns "
                                       "with `hypertrain prepare`",
                                       path, column, fmt::join(names, ", ")));
  }
  std::unique_ptr<TokenFile> f(new TokenFile());
  f->path_ = path;
  int64_t total = 0;
  while (true) {
    HT_ASSIGN_OR_RETURN(bool more, reader->NextBatch());
    if (!more) break;
    HT_ASSIGN_OR_RETURN(arrow::IntListColumn c, reader->IntLists(field));
    if (c.rows == 0) continue;
    // Rows are contiguous in the values: [offset of row 0, end of the last row).
    int64_t b0, e0, bn, en;
    c.Range(0, &b0, &e0);
    c.Range(c.rows - 1, &bn, &en);
    if (en > b0) {
      f->segments_.push_back({c.values + b0 * c.value_bytes, total, en - b0, c.value_bytes, c.value_signed});
      total += en - b0;
    }
  }
  f->num_tokens_ = total;
  f->bytes_per_token_ = 4;
  f->owner_ = std::shared_ptr<arrow::ArrowStreamReader>(std::move(reader));
  return f;
}

void TokenFile::ReadSegments(int64_t begin, int64_t n, int32_t* out) const {
  auto it = std::upper_bound(segments_.begin(), segments_.end(), begin,
                             [](int64_t pos, const Segment& s) { return pos < s.start; }) - 1;
  while (n > 0) {
    const int64_t local = begin - it->start;
    const int64_t take = std::min(n, it->n - local);
    const uint8_t* p = it->values + local * it->width;
    for (int64_t i = 0; i < take; ++i, p += it->width) {
      int64_t v = 0;
      switch (it->width) {
        case 1: v = it->is_signed ? static_cast<int8_t>(*p) : *p; break;
        case 2: { uint16_t x; std::memcpy(&x, p, 2); v = it->is_signed ? static_cast<int16_t>(x) : x; break; }
        case 4: { uint32_t x; std::memcpy(&x, p, 4); v = it->is_signed ? static_cast<int32_t>(x) : x; break; }
        default: std::memcpy(&v, p, 8);
      }
      out[i] = v < 0 || v > INT32_MAX ? -1 : static_cast<int32_t>(v);
    }
    out += take;
    begin += take;
    n -= take;
    ++it;
  }
}

}  // namespace hypertrain::data
