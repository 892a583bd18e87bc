#include "runtime/data/input_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace hypertrain::data {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

InputFile::~InputFile() {
  if (gz_ != nullptr) gzclose(gz_);
}

StatusOr<std::unique_ptr<InputFile>> InputFile::Open(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return InvalidArgument(fmt::format("{} is a directory, not a Hugging Face dataset (no state.json or "
                                       "dataset_dict.json) and not a file",
                                       path));
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NotFound(fmt::format("{}: cannot read: {}", path, std::strerror(errno)));
  std::unique_ptr<InputFile> f(new InputFile());
  f->path_ = path;
  f->total_ = static_cast<int64_t>(::lseek(fd, 0, SEEK_END));
  ::lseek(fd, 0, SEEK_SET);
  if (f->total_ == 0) {
    ::close(fd);
    return InvalidArgument(fmt::format("{} is empty", path));
  }
  // zlib owns fd from here (gzclose closes it); it reads plain files as they are.
  f->gz_ = gzdopen(fd, "rb");
  if (f->gz_ == nullptr) {
    ::close(fd);
    return NotFound(fmt::format("{}: cannot open", path));
  }
  gzbuffer(f->gz_, 1 << 20);
  // gzdirect reads the header: zlib decides plain or gzip by content.
  f->gzip_ = gzdirect(f->gz_) == 0;
  if (!f->gzip_ && EndsWith(path, ".gz")) {
    return DataLoss(fmt::format("{}: named .gz but not gzip data (no gzip header); decompress it or rename it",
                                path));
  }
  return f;
}

StatusOr<size_t> InputFile::Read(char* dst, size_t n) {
  const int got = gzread(gz_, dst, static_cast<unsigned>(n));
  int err = Z_OK;
  std::string msg = gzerror(gz_, &err);
  // zlib prefixes its messages with "<fd:N>: ".
  if (const size_t p = msg.find(">: "); msg.rfind("<fd:", 0) == 0 && p != std::string::npos) msg.erase(0, p + 3);
  if (got < 0) {
    return DataLoss(fmt::format("{}: {}{}", path_, err == Z_DATA_ERROR ? "corrupt gzip data: " : "read failed: ",
                                msg));
  }
  if (got > 0) return static_cast<size_t>(got);
  // zlib reports a stream that stops before its trailer as Z_BUF_ERROR at the
  // end of the file, after returning all it could inflate.
  if (err == Z_BUF_ERROR) {
    return DataLoss(fmt::format("{}: truncated gzip: the stream ends before its CRC/length trailer ({} bytes; an "
                                "incomplete copy or download?)",
                                path_, total_));
  }
  if (!gzeof(gz_)) return DataLoss(fmt::format("{}: read failed: {}", path_, msg));
  return size_t{0};
}

StatusOr<bool> InputFile::ReadLine(std::string* line, int64_t max_bytes) {
  line->clear();
  while (true) {
    const size_t nl = buf_.find('\n', pos_);
    if (nl != std::string::npos) {
      line->append(buf_, pos_, nl - pos_);
      pos_ = nl + 1;
      ++lines_;
      return true;
    }
    line->append(buf_, pos_, std::string::npos);
    if (static_cast<int64_t>(line->size()) > max_bytes) {
      return InvalidArgument(fmt::format("{}:{}: line longer than {} bytes", path_, lines_ + 1, max_bytes));
    }
    buf_.resize(1 << 20);
    HT_ASSIGN_OR_RETURN(size_t n, Read(buf_.data(), buf_.size()));
    buf_.resize(n);
    pos_ = 0;
    if (n == 0) {
      if (line->empty()) return false;
      ++lines_;
      return true;
    }
  }
}

int64_t InputFile::consumed() const { return gz_ ? static_cast<int64_t>(gzoffset(gz_)) : 0; }

}  // namespace hypertrain::data
