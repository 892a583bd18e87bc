#pragma once
// Element types of compute tensors on the device. Master weights, gradients
// and optimizer state are always fp32; activations and compute copies of the
// weights are one of these.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>

namespace hypertrain::kernels::cuda {

enum class DType { kF32, kBF16, kF16 };

inline size_t DTypeSize(DType t) { return t == DType::kF32 ? 4 : 2; }

inline const char* DTypeName(DType t) {
  switch (t) {
    case DType::kF32: return "fp32";
    case DType::kBF16: return "bf16";
    case DType::kF16: return "fp16";
  }
  return "?";
}

template <typename T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::kF32;
};
template <>
struct DTypeOf<__nv_bfloat16> {
  static constexpr DType value = DType::kBF16;
};
template <>
struct DTypeOf<__half> {
  static constexpr DType value = DType::kF16;
};

}  // namespace hypertrain::kernels::cuda
