#pragma once
// safetensors (https://huggingface.co/docs/safetensors) reader and writer.
//
// File: u64 little-endian N, then N bytes of JSON header, then the byte
// buffer. Header: {"<name>": {"dtype": "F32", "shape": [..], "data_offsets":
// [begin, end]}, ..., "__metadata__": {"k": "v"}}; offsets are relative to
// the buffer. The reader checks what the reference implementation checks:
// N fits the file, the header is a JSON object, every tensor's dtype is known,
// end - begin == prod(shape) * dtype size, offsets are in order, the tensors
// tile the whole buffer with no gap or overlap, and the buffer ends at the end
// of the file. The writer pads the header with spaces to a multiple of 8
// bytes (so every tensor starts 8-byte aligned) and writes atomically.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "core/status.h"

namespace hypertrain::ckpt {

enum class StDType { kF32, kBF16, kF16 };
const char* StDTypeName(StDType d);  // "F32", "BF16", "F16"
int StDTypeSize(StDType d);
StatusOr<StDType> ParseStDType(const std::string& s);  // also rejects types this trainer cannot load

// fp32 -> bf16 with round-to-nearest-even (NaN stays NaN); bf16/f16 -> fp32.
uint16_t FloatToBf16(float f);
float Bf16ToFloat(uint16_t b);
float F16ToFloat(uint16_t h);

struct StTensorInfo {
  std::string name;
  StDType dtype = StDType::kF32;
  std::vector<int64_t> shape;
  int64_t begin = 0;  // byte offsets in the buffer
  int64_t end = 0;
  int64_t numel() const;
};

class SafetensorsReader {
 public:
  // DataLoss with the file name and the broken rule on a malformed file.
  static StatusOr<SafetensorsReader> Open(const std::string& path);
  SafetensorsReader(SafetensorsReader&&) noexcept = default;

  const std::vector<StTensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const StTensorInfo* Find(const std::string& name) const;  // nullptr if absent
  const std::string& path() const { return path_; }
  // Elements [elem_begin, elem_begin + count) of a tensor, widened to fp32.
  Status ReadF32(const StTensorInfo& t, int64_t elem_begin, int64_t count, float* dst) const;

 private:
  SafetensorsReader() = default;
  std::string path_;
  Fd fd_;
  int64_t buffer_start_ = 0;
  std::vector<StTensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

// One tensor to write: its fp32 values come from `fill` (called once, in
// order, with a buffer of numel floats) so a large model never needs two
// copies in memory.
struct StTensorOut {
  std::string name;
  std::vector<int64_t> shape;
  std::function<Status(float* dst)> fill;
};

// Writes `tensors` (in the given order) as `dtype` with `metadata`.
Status WriteSafetensors(const std::string& path, StDType dtype, const std::vector<StTensorOut>& tensors,
                        const std::map<std::string, std::string>& metadata);

}  // namespace hypertrain::ckpt
