#include "runtime/data/prepare/inputs.h"

#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "runtime/data/arrow/arrow_stream.h"
#include "runtime/data/arrow/hf_dataset.h"
#include "runtime/data/input_file.h"

namespace hypertrain::data::prepare {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using data::InputFile;

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

class TextReader final : public DocumentReader {
 public:
  TextReader(std::unique_ptr<InputFile> in, bool gz, int64_t max_bytes)
      : in_(std::move(in)), gz_(gz), max_bytes_(max_bytes) {}
  StatusOr<bool> Next(Document* doc) override {
    if (done_) return false;
    done_ = true;
    doc->pretokenized = false;
    doc->ids.clear();
    doc->text.clear();
    char buf[1 << 16];
    while (true) {
      HT_ASSIGN_OR_RETURN(size_t n, in_->Read(buf, sizeof(buf)));
      if (n == 0) break;
      doc->text.append(buf, n);
      if (static_cast<int64_t>(doc->text.size()) > max_bytes_) {
        return InvalidArgument(fmt::format("{}: a plain-text file is one document and this one exceeds {} "
                                           "bytes; split it or write JSONL (one document per line)",
                                           in_->path(), max_bytes_));
      }
    }
    return true;
  }
  int64_t bytes_read() const override { return in_->consumed(); }
  int64_t bytes_total() const override { return in_->total(); }
  std::string format() const override { return gz_ ? "text.gz" : "text"; }

 private:
  std::unique_ptr<InputFile> in_;
  bool gz_;
  int64_t max_bytes_;
  bool done_ = false;
};

class JsonlReader final : public DocumentReader {
 public:
  JsonlReader(std::unique_ptr<InputFile> in, bool gz, const InputOptions& o)
      : in_(std::move(in)), gz_(gz), max_bytes_(o.max_document_bytes) {}
  StatusOr<bool> Next(Document* doc) override {
    std::string line;
    while (true) {
      HT_ASSIGN_OR_RETURN(bool got, in_->ReadLine(&line, max_bytes_));
      if (!got) return false;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      doc->pretokenized = false;
      doc->ids.clear();
      doc->text = std::move(line);
      doc->json_line = in_->lines_read();
      return true;
    }
  }
  int64_t bytes_read() const override { return in_->consumed(); }
  int64_t bytes_total() const override { return in_->total(); }
  std::string format() const override { return gz_ ? "jsonl.gz" : "jsonl"; }

 private:
  std::unique_ptr<InputFile> in_;
  bool gz_;
  int64_t max_bytes_;
};

// Rows of one or more Arrow files: the text column, else the ids column.
class ArrowReader final : public DocumentReader {
 public:
  ArrowReader(std::vector<std::string> files, const InputOptions& o, int64_t total)
      : files_(std::move(files)), options_(o), total_(total) {}
  StatusOr<bool> Next(Document* doc) override {
    while (true) {
      if (reader_ && row_ < rows_) {
        const int64_t i = row_++;
        if (text_col_ >= 0) {
          auto s = strings_.Get(i);
          if (!s) {
            ++skipped_;
            continue;
          }
          doc->pretokenized = false;
          doc->ids.clear();
          doc->text.assign(*s);
        } else {
          if (ids_.IsNull(i)) {
            ++skipped_;
            continue;
          }
          int64_t b, e;
          ids_.Range(i, &b, &e);
          doc->pretokenized = true;
          doc->text.clear();
          doc->ids.resize(static_cast<size_t>(e - b));
          for (int64_t k = b; k < e; ++k) {
            const int64_t v = ids_.Value(k);
            if (v < 0 || v > INT32_MAX) {
              return DataLoss(fmt::format("{}: row {} holds token id {} (not in [0, 2^31))", reader_->path(), i, v));
            }
            doc->ids[k - b] = static_cast<int32_t>(v);
          }
        }
        return true;
      }
      if (reader_) {
        HT_ASSIGN_OR_RETURN(bool more, reader_->NextBatch());
        if (more) {
          HT_RETURN_IF_ERROR(LoadBatch());
          continue;
        }
        done_bytes_ += reader_->file_bytes();
        reader_.reset();
      }
      if (next_file_ >= files_.size()) return false;
      HT_ASSIGN_OR_RETURN(reader_, arrow::ArrowStreamReader::Open(files_[next_file_++]));
      text_col_ = reader_->FieldIndex(options_.text_field);
      ids_col_ = reader_->FieldIndex(options_.ids_field);
      if (text_col_ < 0 && ids_col_ < 0) {
        std::vector<std::string> names;
        for (const auto& f : reader_->fields()) names.push_back(f.name + ": " + f.type.ToString());
        return InvalidArgument(fmt::format("{}: no '{}' or '{}' column (columns: {}); choose one with --text-field",
                                           reader_->path(), options_.text_field, options_.ids_field,
                                           fmt::join(names, ", ")));
      }
      rows_ = row_ = 0;
    }
  }
  int64_t bytes_read() const override { return done_bytes_ + (reader_ ? reader_->position() : 0); }
  int64_t bytes_total() const override { return total_; }
  std::string format() const override { return "arrow"; }
  int64_t skipped() const override { return skipped_; }

 private:
  Status LoadBatch() {
    rows_ = reader_->batch_rows();
    row_ = 0;
    if (text_col_ >= 0) {
      HT_ASSIGN_OR_RETURN(strings_, reader_->Strings(text_col_));
    } else {
      HT_ASSIGN_OR_RETURN(ids_, reader_->IntLists(ids_col_));
    }
    return Status::Ok();
  }
  std::vector<std::string> files_;
  InputOptions options_;
  int64_t total_;
  size_t next_file_ = 0;
  std::unique_ptr<arrow::ArrowStreamReader> reader_;
  int text_col_ = -1, ids_col_ = -1;
  arrow::StringColumn strings_;
  arrow::IntListColumn ids_;
  int64_t rows_ = 0, row_ = 0, skipped_ = 0, done_bytes_ = 0;
};

StatusOr<std::vector<std::string>> ArrowFiles(const std::string& path, const InputOptions& o) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return arrow::HfDatasetArrowFiles(path, o.split);
  return std::vector<std::string>{path};
}

bool IsArrowInput(const std::string& path) {
  std::error_code ec;
  return EndsWith(path, ".arrow") || (fs::is_directory(path, ec) && arrow::IsHfDatasetDir(path));
}

}  // namespace

Status ExtractJsonText(const std::string& path, const std::string& field, Document* doc) {
  if (doc->json_line == 0) return Status::Ok();
  json j;
  try {
    j = json::parse(doc->text);
  } catch (const std::exception& e) {
    return InvalidArgument(fmt::format("{}:{}: not a JSON object: {}", path, doc->json_line, e.what()));
  }
  if (!j.is_object() || !j.contains(field) || !j[field].is_string()) {
    std::vector<std::string> keys;
    if (j.is_object()) {
      for (const auto& [k, v] : j.items()) keys.push_back(k);
    }
    return InvalidArgument(fmt::format("{}:{}: no string field '{}' (fields: {}); choose one with --text-field",
                                       path, doc->json_line, field, fmt::join(keys, ", ")));
  }
  doc->text = j[field].get<std::string>();
  doc->json_line = 0;
  return Status::Ok();
}

StatusOr<int64_t> InputBytes(const std::string& path, const InputOptions& o) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return NotFound(fmt::format("{}: no such file or directory", path));
  if (!IsArrowInput(path)) {
    if (fs::is_directory(path, ec)) {
      return InvalidArgument(fmt::format("{} is a directory, not a Hugging Face dataset (no state.json or "
                                         "dataset_dict.json)", path));
    }
    return static_cast<int64_t>(fs::file_size(path, ec));
  }
  HT_ASSIGN_OR_RETURN(std::vector<std::string> files, ArrowFiles(path, o));
  int64_t total = 0;
  for (const auto& f : files) total += static_cast<int64_t>(fs::file_size(f, ec));
  return total;
}

StatusOr<std::unique_ptr<DocumentReader>> OpenDocuments(const std::string& path, const InputOptions& o) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return NotFound(fmt::format("{}: no such file or directory", path));
  if (IsArrowInput(path)) {
    HT_ASSIGN_OR_RETURN(std::vector<std::string> files, ArrowFiles(path, o));
    HT_ASSIGN_OR_RETURN(int64_t total, InputBytes(path, o));
    // Open the first file now so a bad schema fails before any work.
    HT_ASSIGN_OR_RETURN(auto first, arrow::ArrowStreamReader::Open(files[0]));
    (void)first;
    return std::unique_ptr<DocumentReader>(new ArrowReader(std::move(files), o, total));
  }
  HT_ASSIGN_OR_RETURN(std::unique_ptr<InputFile> in, InputFile::Open(path));
  const bool gz = in->gzip();
  const std::string base = EndsWith(path, ".gz") ? path.substr(0, path.size() - 3) : path;
  if (EndsWith(base, ".jsonl") || EndsWith(base, ".json") || EndsWith(base, ".ndjson")) {
    return std::unique_ptr<DocumentReader>(new JsonlReader(std::move(in), gz, o));
  }
  return std::unique_ptr<DocumentReader>(new TextReader(std::move(in), gz, o.max_document_bytes));
}

}  // namespace hypertrain::data::prepare
