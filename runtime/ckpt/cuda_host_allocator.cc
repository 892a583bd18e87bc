#include "runtime/ckpt/cuda_host_allocator.h"

#include <cuda_runtime.h>

#include <string>

namespace hypertrain::ckpt {
namespace {

class Pinned final : public HostAllocator {
 public:
  const char* name() const override { return "cuda-pinned"; }
  StatusOr<void*> Allocate(size_t bytes) override {
    void* p = nullptr;
    const cudaError_t err = cudaHostAlloc(&p, bytes == 0 ? 1 : bytes, cudaHostAllocDefault);
    if (err != cudaSuccess) {
      return IoError("cudaHostAlloc of " + std::to_string(bytes) + " bytes for a checkpoint snapshot: " +
                     cudaGetErrorString(err));
    }
    return p;
  }
  void Free(void* p) override { cudaFreeHost(p); }
  std::function<void()> BindThread() const override {
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess) return nullptr;
    return [device] { cudaSetDevice(device); };
  }
};

}  // namespace

HostAllocator* CudaPinnedHostAllocator() {
  static Pinned alloc;
  return &alloc;
}

}  // namespace hypertrain::ckpt
