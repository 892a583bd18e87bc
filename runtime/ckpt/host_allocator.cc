#include "runtime/ckpt/host_allocator.h"

#include <cstdlib>
#include <string>

namespace hypertrain::ckpt {
namespace {

class Pageable final : public HostAllocator {
 public:
  const char* name() const override { return "pageable"; }
  StatusOr<void*> Allocate(size_t bytes) override {
    const size_t rounded = (bytes + 4095) / 4096 * 4096;
    void* p = std::aligned_alloc(4096, rounded == 0 ? 4096 : rounded);
    if (p == nullptr) return IoError("out of host memory allocating " + std::to_string(bytes) + " bytes for a checkpoint snapshot");
    return p;
  }
  void Free(void* p) override { std::free(p); }
};

}  // namespace

HostAllocator* PageableHostAllocator() {
  static Pageable alloc;
  return &alloc;
}

StatusOr<HostBuffer> HostBuffer::Make(HostAllocator* alloc, size_t bytes) {
  HostBuffer b;
  HT_ASSIGN_OR_RETURN(b.data_, alloc->Allocate(bytes));
  b.alloc_ = alloc;
  b.size_ = bytes;
  return b;
}

HostBuffer& HostBuffer::operator=(HostBuffer&& o) noexcept {
  if (this != &o) {
    Reset();
    alloc_ = o.alloc_;
    data_ = o.data_;
    size_ = o.size_;
    o.alloc_ = nullptr;
    o.data_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}

void HostBuffer::Reset() {
  if (data_ != nullptr) alloc_->Free(data_);
  data_ = nullptr;
  size_ = 0;
  alloc_ = nullptr;
}

}  // namespace hypertrain::ckpt
