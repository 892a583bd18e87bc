// Checkpoint benchmark: the full training state (fp32 master weights + AdamW
// m + v) of a named model on one device, saved asynchronously N times and
// loaded back.
//   ckpt_bench --model 1b --device cuda --dir /path/on/fast/disk [--saves 3]
// Reports per save: the training stall (snapshot device -> pinned host), the
// background write time and throughput; then the load time (verify + read +
// host -> device). --device cpu runs anywhere (state in host memory).
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/log.h"
#include "runtime/ckpt/cuda_host_allocator.h"
#include "runtime/ckpt/hf_export.h"
#include "runtime/ckpt/layout_desc.h"
#include "runtime/ckpt/manager.h"
#include "runtime/model/config.h"
#include "runtime/model/layout.h"

namespace hypertrain::ckpt {
namespace {

using Clock = std::chrono::steady_clock;

class BenchState final : public StateAccess {
 public:
  BenchState(const ModelLayoutDesc& d, bool cuda) : cuda_(cuda) {
    for (const UnitEntry& u : d.units) {
      sizes_.push_back(u.padded_numel);
      for (int s = 0; s < kNumStates; ++s) {
        void* p = nullptr;
        const size_t bytes = static_cast<size_t>(u.padded_numel) * 4;
        if (cuda_) {
          if (cudaMalloc(&p, bytes) != cudaSuccess) std::abort();
          cudaMemset(p, 0x3c + s, bytes);
        } else {
          p = std::malloc(bytes);
          std::memset(p, 0x3c + s, bytes);
        }
        ptrs_.push_back(static_cast<float*>(p));
      }
    }
  }
  ElemRange Owned(int unit) const override { return {0, sizes_[unit]}; }
  Status Read(int unit, int state, float* host) override {
    return Copy(host, ptrs_[unit * kNumStates + state], sizes_[unit], cudaMemcpyDeviceToHost);
  }
  Status Write(int unit, int state, const float* host) override {
    return Copy(ptrs_[unit * kNumStates + state], host, sizes_[unit], cudaMemcpyHostToDevice);
  }

 private:
  Status Copy(void* dst, const void* src, int64_t n, cudaMemcpyKind kind) {
    if (!cuda_) {
      std::memcpy(dst, src, n * 4);
      return Status::Ok();
    }
    const cudaError_t e = cudaMemcpy(dst, src, n * 4, kind);
    return e == cudaSuccess ? Status::Ok() : Internal(cudaGetErrorString(e));
  }
  bool cuda_;
  std::vector<int64_t> sizes_;
  std::vector<float*> ptrs_;
};

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

int Main(int argc, char** argv) {
  std::string model = "1b", device = "cuda", dir;
  int saves = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--model") model = v;
    else if (k == "--device") device = v;
    else if (k == "--dir") dir = v;
    else if (k == "--saves") saves = std::stoi(v);
    else {
      std::fprintf(stderr, "unknown flag %s\n", k.c_str());
      return 2;
    }
  }
  if (dir.empty() || (device != "cuda" && device != "cpu") || saves < 1) {
    std::fprintf(stderr, "usage: ckpt_bench --dir DIR [--model 1b] [--device cuda|cpu] [--saves 3]\n");
    return 2;
  }
  auto cfg = model::NamedModelConfig(model);
  if (!cfg.ok()) return std::fprintf(stderr, "%s\n", cfg.status().ToString().c_str()), 2;
  auto layout = model::ParamLayout::Build(*cfg, {});
  const ModelLayoutDesc d = DescribeLayout(*layout);
  const bool cuda = device == "cuda";
  BenchState state(d, cuda);
  const double gb = 3.0 * layout->total_padded_numel() * 4 / 1e9;
  std::printf("model %s: %lld params, full state %.2f GB, device %s, dir %s\n", model.c_str(),
              static_cast<long long>(layout->total_param_numel()), gb, device.c_str(), dir.c_str());
  std::filesystem::remove_all(dir);
  CheckpointOptions o;
  o.dir = dir;
  o.save_top_k = 1;
  o.async_save = true;
  HostAllocator* alloc = cuda ? CudaPinnedHostAllocator() : PageableHostAllocator();
  {
    CheckpointManager mgr(o, {}, d, alloc);
    if (auto s = mgr.Start(); !s.ok()) return std::fprintf(stderr, "%s\n", s.status().ToString().c_str()), 1;
    auto t = Clock::now();
    if (Status s = mgr.PrepareSnapshot(state); !s.ok()) return std::fprintf(stderr, "%s\n", s.ToString().c_str()), 1;
    const double started = Since(t);
    if (Status s = mgr.AwaitPreparedSnapshot(); !s.ok()) return std::fprintf(stderr, "%s\n", s.ToString().c_str()), 1;
    std::printf("snapshot buffers (%s): allocated in %.2f s (once, in the background from the start; the start "
                "waited %.3f s)\n", alloc->name(), Since(t), started);
    for (int i = 1; i <= saves; ++i) {
      SaveRequest r;
      r.step = i;
      r.sampler = {{"position", i}};
      r.model_config = HfConfigJson(*cfg, StDType::kF32);
      if (Status s = mgr.Save(r, state); !s.ok()) return std::fprintf(stderr, "%s\n", s.ToString().c_str()), 1;
      const double stall = mgr.stats().last_stall_s;
      if (Status s = mgr.Finish(); !s.ok()) return std::fprintf(stderr, "%s\n", s.ToString().c_str()), 1;
      const SaveStats st = mgr.stats();
      std::printf("save %d: stall %.3f s | background write+commit %.2f s = %.2f GB/s\n", i, stall,
                  st.last_write_s, st.last_bytes / 1e9 / st.last_write_s);
    }
  }
  {
    CheckpointManager mgr(o, {}, d, alloc);
    auto t = Clock::now();
    auto found = mgr.Start();
    if (!found.ok() || !found->has_value()) return std::fprintf(stderr, "no checkpoint found\n"), 1;
    const double verify = Since(t);
    t = Clock::now();
    if (Status s = mgr.Load(**found, state); !s.ok()) return std::fprintf(stderr, "%s\n", s.ToString().c_str()), 1;
    const double load = Since(t);
    std::printf("load: verify (crc32c of every file) %.2f s + read into device %.2f s = %.2f s (%.2f GB/s)\n",
                verify, load, verify + load, gb / (verify + load));
  }
  return 0;
}

}  // namespace
}  // namespace hypertrain::ckpt

int main(int argc, char** argv) {
  hypertrain::log::Init(hypertrain::log::Format::kText, spdlog::level::info);
  return hypertrain::ckpt::Main(argc, argv);
}
