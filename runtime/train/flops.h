#pragma once
// Peak dense FLOP/s per device for MFU, by precision. Sources: NVIDIA
// datasheets (dense, no sparsity): H100 SXM / H200 989 TF bf16/fp16, 495 TF
// tf32, 67 TF fp32; A100 312 / 156 / 19.5; A10 125 / 62.5 / 31.2 (A10G runs
// lower clocks than A10, so MFU on A10G is understated by this figure);
// L4 121 / 60 / 30. Unknown devices: 0 (MFU not reported; set
// trainer.peak_tflops).
#include <string>

#include "runtime/model/backend.h"

namespace hypertrain::train {

inline double PeakFlopsForDevice(const std::string& name, model::Precision p) {
  struct Row {
    const char* match;
    double half, tf32, fp32;
  };
  static const Row kRows[] = {
      {"H200", 989e12, 494.5e12, 67e12}, {"H100", 989e12, 494.5e12, 67e12},
      {"A100", 312e12, 156e12, 19.5e12}, {"A10G", 125e12, 62.5e12, 31.2e12},
      {"A10", 125e12, 62.5e12, 31.2e12}, {"L4", 121e12, 60e12, 30e12},
  };
  for (const Row& r : kRows) {
    if (name.find(r.match) != std::string::npos) {
      switch (p) {
        case model::Precision::kBF16:
        case model::Precision::kFP16: return r.half;
        case model::Precision::kTF32: return r.tf32;
        case model::Precision::kFP32: return r.fp32;
      }
    }
  }
  return 0.0;
}

}  // namespace hypertrain::train
