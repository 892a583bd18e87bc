#pragma once
// A reader of Apache Arrow IPC streams (and IPC files) as Hugging Face
// `datasets` writes them with save_to_disk: data-00000-of-0000N.arrow. It
// memory-maps the file and walks its record batches, exposing the columns a
// training data pipeline reads:
//   - strings: utf8 / large_utf8 (a `text` column);
//   - lists of integers: list / large_list of int8..int64, uint8..uint64 (a
//     pre-tokenized `input_ids` column).
// Other columns are skipped by their layout. Compressed bodies (LZ4/ZSTD),
// dictionary-encoded columns and big-endian data are DataLoss errors naming
// the file and what to do. Every offset read from the file is bounds-checked.
//
// Format: https://arrow.apache.org/docs/format/Columnar.html (Message,
// Schema and RecordBatch flatbuffers; buffers in depth-first field order).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace hypertrain::data::arrow {

// A column type as the schema gives it (Type union id and details).
struct ArrowType {
  int id = 0;            // Arrow Type union: 2 Int, 5 Utf8, 12 List, 20 LargeUtf8, 21 LargeList, ...
  int bit_width = 0;     // Int
  bool is_signed = false;
  std::vector<ArrowType> children;
  std::string ToString() const;
};

struct ArrowField {
  std::string name;
  ArrowType type;
};

// A string column of one record batch.
struct StringColumn {
  int64_t rows = 0;
  const uint8_t* validity = nullptr;  // null when no nulls
  const void* offsets = nullptr;      // int32 or int64 (large)
  bool large = false;
  const char* data = nullptr;
  std::optional<std::string_view> Get(int64_t i) const;
};

// A list-of-integers column of one record batch.
struct IntListColumn {
  int64_t rows = 0;
  const uint8_t* validity = nullptr;
  const void* offsets = nullptr;  // int32 or int64 (large)
  bool large = false;
  const uint8_t* values = nullptr;
  int value_bytes = 4;
  bool value_signed = true;
  int64_t values_length = 0;
  bool IsNull(int64_t i) const;
  // Range [begin, end) of row i in the values.
  void Range(int64_t i, int64_t* begin, int64_t* end) const;
  int64_t Value(int64_t k) const;
};

class ArrowStreamReader {
 public:
  static StatusOr<std::unique_ptr<ArrowStreamReader>> Open(const std::string& path);
  ~ArrowStreamReader();
  ArrowStreamReader(const ArrowStreamReader&) = delete;
  ArrowStreamReader& operator=(const ArrowStreamReader&) = delete;

  const std::string& path() const { return path_; }
  const std::vector<ArrowField>& fields() const { return fields_; }
  int64_t file_bytes() const { return static_cast<int64_t>(size_); }
  // Byte offset of the next message (progress).
  int64_t position() const { return static_cast<int64_t>(pos_); }
  // Index of a top-level column, or -1.
  int FieldIndex(std::string_view name) const;

  // Advances to the next record batch; false at the end of the stream.
  StatusOr<bool> NextBatch();
  int64_t batch_rows() const { return batch_rows_; }
  // Column `field` of the current batch, when it has that type.
  StatusOr<StringColumn> Strings(int field) const;
  StatusOr<IntListColumn> IntLists(int field) const;

 private:
  ArrowStreamReader() = default;
  struct Node {
    int64_t length, null_count;
  };
  struct Buf {
    int64_t offset, length;
  };
  StatusOr<bool> ReadMessage(int* header_type, size_t* meta, size_t* body, int64_t* body_length);
  Status ParseSchema(size_t header_table);
  Status ParseBatch(size_t header_table, size_t body, int64_t body_length);
  Status Fail(const std::string& why) const;
  // First node / buffer index of each top-level field.
  void LayoutIndex();

  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t pos_ = 0;
  bool done_ = false;
  std::vector<ArrowField> fields_;
  std::vector<int> first_node_, first_buffer_;
  int64_t batch_rows_ = 0;
  const uint8_t* body_ = nullptr;
  int64_t body_length_ = 0;
  std::vector<Node> nodes_;
  std::vector<Buf> buffers_;
};

}  // namespace hypertrain::data::arrow
