#pragma once
// The one reader of raw input files in runtime/data (`prepare`'s text and
// JSONL inputs, SFT's JSONL): plain or gzip-compressed, streamed. gzip is
// recognised by its content (a plain file named .gz is an error, a gzip file
// under another name is decompressed). The end of a gzip input is reported
// only after its CRC-32 and length trailer checked out, so a file cut anywhere
// (mid-stream, at a line boundary, before or inside the trailer) or with a bad
// CRC is DataLoss naming the file (exit 3), never a short but "complete" read.
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"

namespace hypertrain::data {

class InputFile {
 public:
  // NotFound (missing / unreadable), InvalidArgument (a directory, an empty
  // file), DataLoss (named .gz but not gzip data).
  static StatusOr<std::unique_ptr<InputFile>> Open(const std::string& path);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  // Up to n decompressed bytes; 0 only at the verified end of the input.
  StatusOr<size_t> Read(char* dst, size_t n);
  // The next line without its '\n' (a last line without one included); false
  // at the end. InvalidArgument naming path:line when a line exceeds max_bytes.
  StatusOr<bool> ReadLine(std::string* line, int64_t max_bytes);

  // Input bytes consumed so far (compressed bytes for gzip) and in total.
  int64_t consumed() const;
  int64_t total() const { return total_; }
  bool gzip() const { return gzip_; }
  const std::string& path() const { return path_; }
  int64_t lines_read() const { return lines_; }

 private:
  InputFile() = default;
  std::string path_;
  gzFile gz_ = nullptr;
  int64_t total_ = 0;
  bool gzip_ = false;
  // ReadLine's buffer.
  std::string buf_;
  size_t pos_ = 0;
  int64_t lines_ = 0;
};

}  // namespace hypertrain::data
