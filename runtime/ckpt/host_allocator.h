#pragma once
// Host memory for checkpoint snapshots. The default allocator returns
// page-aligned pageable memory; for a CUDA backend the assembly (runtime/cmd)
// passes the pinned allocator (cuda_host_allocator.h, cudaHostAlloc) so
// device-to-host snapshot copies run at full PCIe/NVLink-C2C speed. CPU
// builds never link CUDA.
#include <cstddef>
#include <functional>
#include <memory>

#include "core/status.h"

namespace hypertrain::ckpt {

class HostAllocator {
 public:
  virtual ~HostAllocator() = default;
  virtual const char* name() const = 0;
  // ResourceExhausted-like IoError naming the size on failure.
  virtual StatusOr<void*> Allocate(size_t bytes) = 0;
  virtual void Free(void* p) = 0;
  // Called on the thread that will allocate from another one: what that
  // thread runs first (the CUDA allocator binds it to the caller's device,
  // so no other GPU gets a context). Empty: nothing.
  virtual std::function<void()> BindThread() const { return nullptr; }
};

// Process-wide pageable allocator (aligned_alloc, 4 KiB).
HostAllocator* PageableHostAllocator();

// RAII buffer from an allocator.
class HostBuffer {
 public:
  HostBuffer() = default;
  static StatusOr<HostBuffer> Make(HostAllocator* alloc, size_t bytes);
  HostBuffer(HostBuffer&& o) noexcept { *this = std::move(o); }
  HostBuffer& operator=(HostBuffer&& o) noexcept;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  ~HostBuffer() { Reset(); }
  void Reset();
  void* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  HostAllocator* alloc_ = nullptr;
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace hypertrain::ckpt
