#include "runtime/data/arrow/arrow_stream.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace hypertrain::data::arrow {
namespace {

// Arrow Type union ids (Schema.fbs).
enum TypeId {
  kNull = 1, kInt = 2, kFloatingPoint = 3, kBinary = 4, kUtf8 = 5, kBool = 6, kDecimal = 7, kDate = 8,
  kTime = 9, kTimestamp = 10, kInterval = 11, kList = 12, kStruct = 13, kUnion = 14, kFixedSizeBinary = 15,
  kFixedSizeList = 16, kMap = 17, kDuration = 18, kLargeBinary = 19, kLargeUtf8 = 20, kLargeList = 21,
};
// MessageHeader union ids (Message.fbs).
enum HeaderId { kSchemaHeader = 1, kDictionaryBatch = 2, kRecordBatch = 3 };

const char* TypeName(int id) {
  static const char* kNames[] = {"none", "null", "int", "float", "binary", "utf8", "bool", "decimal", "date",
                                 "time", "timestamp", "interval", "list", "struct", "union",
                                 "fixed_size_binary", "fixed_size_list", "map", "duration", "large_binary",
                                 "large_utf8", "large_list", "run_end_encoded", "binary_view", "utf8_view",
                                 "list_view", "large_list_view"};
  return id >= 0 && id < static_cast<int>(sizeof(kNames) / sizeof(kNames[0])) ? kNames[id] : "unknown";
}

// Bounds-checked flatbuffer access over the mapped file: every read outside
// [0, size) sets bad instead of touching memory.
struct Flat {
  const uint8_t* d;
  size_t n;
  mutable bool bad = false;

  template <typename T>
  T Read(size_t at) const {
    T v{};
    if (at > n || n - at < sizeof(T)) {
      bad = true;
      return v;
    }
    std::memcpy(&v, d + at, sizeof(T));
    return v;
  }
  // Position of field `slot` of the table at `table`, or 0 when absent.
  size_t Field(size_t table, int slot) const {
    const int32_t soff = Read<int32_t>(table);
    const size_t vt = table - static_cast<int64_t>(soff);
    if (bad || vt >= n) return bad = true, 0;
    const uint16_t vt_size = Read<uint16_t>(vt);
    const size_t entry = 4 + 2 * static_cast<size_t>(slot);
    if (entry + 2 > vt_size) return 0;
    const uint16_t off = Read<uint16_t>(vt + entry);
    return off == 0 ? 0 : table + off;
  }
  size_t Deref(size_t at) const {  // uoffset -> target
    const uint32_t o = Read<uint32_t>(at);
    return at + o;
  }
  size_t Table(size_t table, int slot) const {
    const size_t f = Field(table, slot);
    return f == 0 ? 0 : Deref(f);
  }
  template <typename T>
  T Scalar(size_t table, int slot, T def) const {
    const size_t f = Field(table, slot);
    return f == 0 ? def : Read<T>(f);
  }
  // Vector at field: position of its first element and its length.
  size_t Vector(size_t table, int slot, uint32_t* len) const {
    *len = 0;
    const size_t f = Field(table, slot);
    if (f == 0) return 0;
    const size_t v = Deref(f);
    *len = Read<uint32_t>(v);
    if (v + 4 + static_cast<size_t>(*len) > n) bad = true;
    return v + 4;
  }
  std::string String(size_t table, int slot) const {
    uint32_t len = 0;
    const size_t p = Vector(table, slot, &len);
    if (p == 0 || bad || p + len > n) return "";
    return std::string(reinterpret_cast<const char*>(d + p), len);
  }
};

// Buffers and nodes a field of this type uses in a record batch.
bool Layout(const ArrowType& t, int* nodes, int* buffers) {
  ++*nodes;
  switch (t.id) {
    case kNull: break;
    case kInt: case kFloatingPoint: case kBool: case kDecimal: case kDate: case kTime: case kTimestamp:
    case kInterval: case kDuration: case kFixedSizeBinary:
      *buffers += 2;
      break;
    case kBinary: case kUtf8: case kLargeBinary: case kLargeUtf8:
      *buffers += 3;
      break;
    case kList: case kLargeList: case kMap:
      *buffers += 2;
      break;
    case kFixedSizeList: case kStruct:
      *buffers += 1;
      break;
    default:
      return false;
  }
  for (const ArrowType& c : t.children) {
    if (!Layout(c, nodes, buffers)) return false;
  }
  return true;
}

bool ParseType(const Flat& f, size_t field_table, ArrowType* out, int depth) {
  if (depth > 32) return false;
  out->id = f.Scalar<uint8_t>(field_table, 2, 0);
  const size_t type_table = f.Table(field_table, 3);
  if (out->id == kInt && type_table != 0) {
    out->bit_width = f.Scalar<int32_t>(type_table, 0, 0);
    out->is_signed = f.Scalar<uint8_t>(type_table, 1, 0) != 0;
  }
  uint32_t n = 0;
  const size_t kids = f.Vector(field_table, 5, &n);
  for (uint32_t i = 0; i < n && !f.bad; ++i) {
    ArrowType c;
    if (!ParseType(f, f.Deref(kids + 4 * i), &c, depth + 1)) return false;
    out->children.push_back(std::move(c));
  }
  return !f.bad;
}

}  // namespace

std::string ArrowType::ToString() const {
  std::string s = TypeName(id);
  if (id == kInt) s = fmt::format("{}int{}", is_signed ? "" : "u", bit_width);
  if (!children.empty()) {
    s += "<";
    for (size_t i = 0; i < children.size(); ++i) s += (i ? ", " : "") + children[i].ToString();
    s += ">";
  }
  return s;
}

std::optional<std::string_view> StringColumn::Get(int64_t i) const {
  if (validity != nullptr && !(validity[i >> 3] & (1u << (i & 7)))) return std::nullopt;
  int64_t b, e;
  if (large) {
    std::memcpy(&b, static_cast<const int64_t*>(offsets) + i, 8);
    std::memcpy(&e, static_cast<const int64_t*>(offsets) + i + 1, 8);
  } else {
    int32_t b32, e32;
    std::memcpy(&b32, static_cast<const int32_t*>(offsets) + i, 4);
    std::memcpy(&e32, static_cast<const int32_t*>(offsets) + i + 1, 4);
    b = b32, e = e32;
  }
  return std::string_view(data + b, static_cast<size_t>(e - b));
}

bool IntListColumn::IsNull(int64_t i) const {
  return validity != nullptr && !(validity[i >> 3] & (1u << (i & 7)));
}

void IntListColumn::Range(int64_t i, int64_t* begin, int64_t* end) const {
  if (large) {
    std::memcpy(begin, static_cast<const int64_t*>(offsets) + i, 8);
    std::memcpy(end, static_cast<const int64_t*>(offsets) + i + 1, 8);
  } else {
    int32_t b, e;
    std::memcpy(&b, static_cast<const int32_t*>(offsets) + i, 4);
    std::memcpy(&e, static_cast<const int32_t*>(offsets) + i + 1, 4);
    *begin = b, *end = e;
  }
}

int64_t IntListColumn::Value(int64_t k) const {
  const uint8_t* p = values + k * value_bytes;
  switch (value_bytes) {
    case 1: return value_signed ? static_cast<int8_t>(*p) : *p;
    case 2: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return value_signed ? static_cast<int16_t>(v) : v;
    }
    case 4: {
      uint32_t v;
      std::memcpy(&v, p, 4);
      return value_signed ? static_cast<int32_t>(v) : v;
    }
    default: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return v;
    }
  }
}

StatusOr<std::unique_ptr<ArrowStreamReader>> ArrowStreamReader::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return NotFound(fmt::format("{}: no such file", path));
    return NotFound(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  }
  struct stat st;
  ::fstat(fd, &st);
  std::unique_ptr<ArrowStreamReader> r(new ArrowStreamReader());
  r->path_ = path;
  r->size_ = static_cast<size_t>(st.st_size);
  if (r->size_ > 0) {
    void* m = ::mmap(nullptr, r->size_, PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      return NotFound(fmt::format("{}: mmap failed: {}", path, std::strerror(e)));
    }
    r->data_ = static_cast<const uint8_t*>(m);
  }
  ::close(fd);
  if (r->size_ >= 8 && std::memcmp(r->data_, "ARROW1\0\0", 8) == 0) r->pos_ = 8;  // IPC file format
  int header = 0;
  size_t meta = 0, body = 0;
  int64_t body_length = 0;
  HT_ASSIGN_OR_RETURN(bool got, r->ReadMessage(&header, &meta, &body, &body_length));
  if (!got || header != kSchemaHeader) return r->Fail("does not start with an Arrow schema message");
  HT_RETURN_IF_ERROR(r->ParseSchema(meta));
  return r;
}

ArrowStreamReader::~ArrowStreamReader() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

Status ArrowStreamReader::Fail(const std::string& why) const {
  return DataLoss(fmt::format("{}: not a readable Arrow IPC stream: {} (at byte {})", path_, why, pos_));
}

int ArrowStreamReader::FieldIndex(std::string_view name) const {
  for (size_t i = 0; i < fields_.size(); ++i) {
    if (fields_[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

StatusOr<bool> ArrowStreamReader::ReadMessage(int* header_type, size_t* meta, size_t* body, int64_t* body_length) {
  const Flat f{data_, size_};
  if (done_ || pos_ + 4 > size_) return false;
  int32_t len = f.Read<int32_t>(pos_);
  pos_ += 4;
  if (len == -1) {  // continuation marker, then the length
    if (pos_ + 4 > size_) return Fail("truncated message length");
    len = f.Read<int32_t>(pos_);
    pos_ += 4;
  }
  if (len == 0) {  // end of stream
    done_ = true;
    return false;
  }
  if (len < 0 || pos_ + static_cast<size_t>(len) > size_) return Fail(fmt::format("message of {} bytes runs past the end", len));
  const size_t msg = pos_;
  const size_t root = f.Deref(msg);
  *header_type = f.Scalar<uint8_t>(root, 1, 0);
  *meta = f.Table(root, 2);
  *body_length = f.Scalar<int64_t>(root, 3, 0);
  pos_ += static_cast<size_t>(len);
  *body = pos_;
  if (f.bad || *meta == 0) return Fail("malformed message header");
  if (*body_length < 0 || pos_ + static_cast<size_t>(*body_length) > size_) {
    return Fail(fmt::format("message body of {} bytes runs past the end (truncated file?)", *body_length));
  }
  pos_ += static_cast<size_t>(*body_length);
  return true;
}

Status ArrowStreamReader::ParseSchema(size_t schema) {
  const Flat f{data_, size_};
  if (f.Scalar<int16_t>(schema, 0, 0) != 0) return Fail("big-endian Arrow data is not supported");
  uint32_t n = 0;
  const size_t vec = f.Vector(schema, 1, &n);
  for (uint32_t i = 0; i < n && !f.bad; ++i) {
    const size_t field = f.Deref(vec + 4 * i);
    ArrowField af;
    af.name = f.String(field, 0);
    if (f.Field(field, 4) != 0) {
      return Fail(fmt::format("column '{}' is dictionary-encoded (not supported; save it as plain values)", af.name));
    }
    if (!ParseType(f, field, &af.type, 0)) return Fail(fmt::format("malformed type of column '{}'", af.name));
    fields_.push_back(std::move(af));
  }
  if (f.bad) return Fail("malformed schema");
  LayoutIndex();
  return Status::Ok();
}

void ArrowStreamReader::LayoutIndex() {
  int nodes = 0, buffers = 0;
  first_node_.clear();
  first_buffer_.clear();
  for (const ArrowField& fld : fields_) {
    first_node_.push_back(nodes);
    first_buffer_.push_back(buffers);
    if (!Layout(fld.type, &nodes, &buffers)) {
      // Columns after one we cannot lay out are unreachable; mark them.
      first_node_.back() = first_buffer_.back() = -1;
      nodes = buffers = -1000000;
    }
  }
}

StatusOr<bool> ArrowStreamReader::NextBatch() {
  while (true) {
    int header = 0;
    size_t meta = 0, body = 0;
    int64_t body_length = 0;
    HT_ASSIGN_OR_RETURN(bool got, ReadMessage(&header, &meta, &body, &body_length));
    if (!got) return false;
    if (header == kRecordBatch) {
      HT_RETURN_IF_ERROR(ParseBatch(meta, body, body_length));
      return true;
    }
    if (header == kDictionaryBatch) return Fail("dictionary batches are not supported");
    // Other messages (a repeated schema, tensors) carry no rows.
  }
}

Status ArrowStreamReader::ParseBatch(size_t batch, size_t body, int64_t body_length) {
  const Flat f{data_, size_};
  batch_rows_ = f.Scalar<int64_t>(batch, 0, 0);
  if (f.Field(batch, 3) != 0) {
    return Fail("the record batch body is compressed (LZ4/ZSTD), which this reader does not support; "
                "save the dataset without compression");
  }
  uint32_t n = 0;
  size_t v = f.Vector(batch, 1, &n);
  nodes_.resize(n);
  for (uint32_t i = 0; i < n; ++i) nodes_[i] = {f.Read<int64_t>(v + 16 * i), f.Read<int64_t>(v + 16 * i + 8)};
  v = f.Vector(batch, 2, &n);
  buffers_.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    buffers_[i] = {f.Read<int64_t>(v + 16 * i), f.Read<int64_t>(v + 16 * i + 8)};
    if (buffers_[i].offset < 0 || buffers_[i].length < 0 || buffers_[i].offset + buffers_[i].length > body_length) {
      return Fail(fmt::format("buffer {} lies outside its record batch body", i));
    }
  }
  if (f.bad || batch_rows_ < 0) return Fail("malformed record batch");
  body_ = data_ + body;
  body_length_ = body_length;
  return Status::Ok();
}

StatusOr<StringColumn> ArrowStreamReader::Strings(int field) const {
  const ArrowType& t = fields_.at(field).type;
  const std::string& name = fields_[field].name;
  if (t.id != kUtf8 && t.id != kLargeUtf8) {
    return InvalidArgument(fmt::format("{}: column '{}' is {}, not a string column", path_, name, t.ToString()));
  }
  const int node = first_node_[field], buf = first_buffer_[field];
  if (node < 0 || node >= static_cast<int>(nodes_.size()) || buf + 3 > static_cast<int>(buffers_.size())) {
    return Fail(fmt::format("record batch has no data for column '{}'", name));
  }
  StringColumn c;
  c.rows = nodes_[node].length;
  c.large = t.id == kLargeUtf8;
  const int64_t ow = c.large ? 8 : 4;
  const Buf& valid = buffers_[buf];
  const Buf& offs = buffers_[buf + 1];
  const Buf& data = buffers_[buf + 2];
  if (nodes_[node].null_count > 0) {
    if (valid.length * 8 < c.rows) return Fail(fmt::format("column '{}': validity bitmap too short", name));
    c.validity = body_ + valid.offset;
  }
  if (c.rows > 0 && offs.length < (c.rows + 1) * ow) return Fail(fmt::format("column '{}': offsets too short", name));
  c.offsets = body_ + offs.offset;
  c.data = reinterpret_cast<const char*>(body_ + data.offset);
  // Every offset must lie inside the data buffer and never decrease.
  int64_t prev = 0;
  for (int64_t i = 0; c.rows > 0 && i <= c.rows; ++i) {
    int64_t o;
    if (c.large) std::memcpy(&o, static_cast<const int64_t*>(c.offsets) + i, 8);
    else {
      int32_t o32;
      std::memcpy(&o32, static_cast<const int32_t*>(c.offsets) + i, 4);
      o = o32;
    }
    if (o < (i == 0 ? 0 : prev) || o > data.length) return Fail(fmt::format("column '{}': bad string offset at row {}", name, i));
    prev = o;
  }
  return c;
}

StatusOr<IntListColumn> ArrowStreamReader::IntLists(int field) const {
  const ArrowType& t = fields_.at(field).type;
  const std::string& name = fields_[field].name;
  const bool list = (t.id == kList || t.id == kLargeList) && t.children.size() == 1 && t.children[0].id == kInt;
  if (!list || (t.children[0].bit_width % 8) != 0 || t.children[0].bit_width > 64 || t.children[0].bit_width < 8) {
    return InvalidArgument(fmt::format("{}: column '{}' is {}, not a list of integers", path_, name, t.ToString()));
  }
  const int node = first_node_[field], buf = first_buffer_[field];
  if (node < 0 || node + 1 >= static_cast<int>(nodes_.size()) || buf + 4 > static_cast<int>(buffers_.size())) {
    return Fail(fmt::format("record batch has no data for column '{}'", name));
  }
  IntListColumn c;
  c.rows = nodes_[node].length;
  c.large = t.id == kLargeList;
  c.value_bytes = t.children[0].bit_width / 8;
  c.value_signed = t.children[0].is_signed;
  c.values_length = nodes_[node + 1].length;
  const int64_t ow = c.large ? 8 : 4;
  const Buf& valid = buffers_[buf];
  const Buf& offs = buffers_[buf + 1];
  const Buf& values = buffers_[buf + 3];  // buf + 2 is the values' validity
  if (nodes_[node + 1].null_count > 0) return Fail(fmt::format("column '{}' has null token ids", name));
  if (nodes_[node].null_count > 0) {
    if (valid.length * 8 < c.rows) return Fail(fmt::format("column '{}': validity bitmap too short", name));
    c.validity = body_ + valid.offset;
  }
  if (c.rows > 0 && offs.length < (c.rows + 1) * ow) return Fail(fmt::format("column '{}': offsets too short", name));
  if (values.length < c.values_length * c.value_bytes) return Fail(fmt::format("column '{}': values too short", name));
  c.offsets = body_ + offs.offset;
  c.values = body_ + values.offset;
  int64_t prev = 0;
  for (int64_t i = 0; c.rows > 0 && i < c.rows; ++i) {
    int64_t b, e;
    c.Range(i, &b, &e);
    if (b < prev || e < b || e > c.values_length) return Fail(fmt::format("column '{}': bad list offset at row {}", name, i));
    prev = b;
  }
  return c;
}

}  // namespace hypertrain::data::arrow
