#pragma once
// Hyper-parameters of one AdamW update over a flat range of fp32 state.

namespace hypertrain::kernels {

struct AdamWParams {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  // Decoupled weight decay; callers pass 0 for ranges that hold norm weights.
  float weight_decay = 0.0f;
  // 1-based step count, used for bias correction.
  int step = 1;
  // Multiplies every gradient before use: folds loss-scale removal, gradient
  // accumulation normalisation and global-norm clipping into one pass.
  float grad_scale = 1.0f;
};

}  // namespace hypertrain::kernels
