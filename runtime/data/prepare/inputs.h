#pragma once
// Documents from the inputs of `hypertrain prepare`, one at a time (constant
// memory whatever the input size):
//   FILE.jsonl / .json / .ndjson   one document per line: the string field
//                                  --text-field (default "text"); blank lines skipped
//   FILE (any other name)          plain text: the whole file is one document
//   DIR (save_to_disk dataset)     one document per row of the `text` column,
//                                  or pre-tokenized rows of `input_ids`
//   FILE.arrow                     the same, one Arrow IPC stream file
// Each may be gzip-compressed (.gz, read as a stream). Errors name the file,
// the line or row, and what is wrong; a directory that is not a dataset, an
// empty file and an unreadable file are errors.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace hypertrain::data::prepare {

struct InputOptions {
  std::string text_field = "text";
  std::string ids_field = "input_ids";  // pre-tokenized Arrow column
  std::string split = "train";          // of a DatasetDict
  int64_t max_document_bytes = int64_t{1} << 30;
};

struct Document {
  std::string text;
  std::vector<int32_t> ids;   // pre-tokenized rows (then text is empty)
  bool pretokenized = false;
  // JSONL: text holds the raw line (number json_line, 1-based) until
  // ExtractJsonText replaces it by the field, so that parsing runs on the
  // tokenizer threads rather than on the one reader thread.
  int64_t json_line = 0;
};

// Replaces a JSONL document's raw line by its text field; errors name
// path:line and the fields present.
Status ExtractJsonText(const std::string& path, const std::string& field, Document* doc);

class DocumentReader {
 public:
  virtual ~DocumentReader() = default;
  // The next document; false at the end.
  virtual StatusOr<bool> Next(Document* doc) = 0;
  // Input bytes consumed so far (compressed bytes for .gz) and in total.
  virtual int64_t bytes_read() const = 0;
  virtual int64_t bytes_total() const = 0;
  // "jsonl", "text", "arrow" (+ ".gz").
  virtual std::string format() const = 0;
  // Rows skipped because their text was null.
  virtual int64_t skipped() const { return 0; }
};

StatusOr<std::unique_ptr<DocumentReader>> OpenDocuments(const std::string& path, const InputOptions& options);

// Total size of an input (a dataset directory: its Arrow files).
StatusOr<int64_t> InputBytes(const std::string& path, const InputOptions& options);

}  // namespace hypertrain::data::prepare
