#pragma once
// TensorBoard event files written without TensorFlow.
//
// A file `events.out.tfevents.<unix-seconds>.<host>` holds TFRecords:
//   uint64 length (LE) | uint32 masked_crc32c(length bytes) | data[length] |
//   uint32 masked_crc32c(data)
// where masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8 and crc32c is the
// Castagnoli CRC. Each record's data is a serialized tensorflow.Event proto:
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3;
//             Summary summary = 5; }
//   Summary { repeated Value value = 1; }
//   Value   { string tag = 1; float simple_value = 2; }
// The first record carries file_version "brain.Event:2". `tensorboard
// --logdir <dir>` shows the scalars.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace hypertrain::train {

// TFRecord framing: the CRC-32C (core/crc32c.h) rotated and offset.
uint32_t MaskedCrc32c(const void* data, size_t n);

class TfEventsWriter {
 public:
  // Creates dir if needed and opens a new event file in it.
  static StatusOr<std::unique_ptr<TfEventsWriter>> Create(const std::string& dir);
  ~TfEventsWriter();
  const std::string& path() const { return path_; }
  // One Event with one scalar per (tag, value).
  Status AddScalars(int64_t step, double wall_time,
                    const std::vector<std::pair<std::string, double>>& scalars);
  Status Flush();

 private:
  TfEventsWriter() = default;
  Status WriteRecord(const std::string& data);
  std::string path_;
  std::FILE* f_ = nullptr;
};

// What ReadTfEvents returns: one entry per scalar value.
struct TfScalar {
  int64_t step = 0;
  double wall_time = 0;
  std::string tag;
  float value = 0;
};
struct TfEventsFile {
  std::string file_version;
  std::vector<TfScalar> scalars;
};
// Parses an event file, verifying both CRCs of every record (DataLoss on a
// mismatch or truncation).
StatusOr<TfEventsFile> ReadTfEvents(const std::string& path);

}  // namespace hypertrain::train
