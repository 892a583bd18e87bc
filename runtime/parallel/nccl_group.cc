#include "runtime/parallel/nccl_group.h"

#include "runtime/trace/recorder.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <nccl.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string_view>
#include <vector>
#include <thread>

#include "contract/exit_codes.h"
#include "runtime/parallel/dist_context.h"
#include "runtime/kernels/cuda/cast.h"
#include "runtime/trace/recorder.h"

namespace hypertrain::parallel {

namespace {

Status CudaError(const std::string& what, cudaError_t e) {
  return Internal(what + ": " + cudaGetErrorString(e));
}
Status NcclError(const std::string& what, ncclResult_t r) {
  // Remote/system errors are a lost peer or network: retryable.
  const std::string msg = what + ": " + ncclGetErrorString(r);
  if (r == ncclSystemError || r == ncclRemoteError) return Unavailable(msg);
  return Internal(msg);
}

#define NCCL_OK(what, expr)                                   \
  do {                                                        \
    ncclResult_t r_ = (expr);                                 \
    if (r_ != ncclSuccess) return NcclError((what), r_);      \
  } while (0)
#define CUDA_OK(what, expr)                                   \
  do {                                                        \
    cudaError_t e_ = (expr);                                  \
    if (e_ != cudaSuccess) return CudaError((what), e_);      \
  } while (0)

ncclDataType_t NcclType(DType d) {
  switch (d) {
    case DType::kF32: return ncclFloat32;
    case DType::kBF16: return ncclBfloat16;
    case DType::kU8: return ncclUint8;
  }
  return ncclUint8;
}
ncclRedOp_t NcclOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kAvg: return ncclAvg;
    case ReduceOp::kMax: return ncclMax;
  }
  return ncclSum;
}

// Owns a communicator.
class NcclComm {
 public:
  explicit NcclComm(ncclComm_t c) : comm_(c) {}
  ~NcclComm() {
    if (!comm_) return;
    if (aborted_) {
      ncclCommAbort(comm_);
    } else {
      ncclCommDestroy(comm_);
    }
  }
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;
  ncclComm_t get() const { return comm_; }
  void MarkFailed() { aborted_ = true; }

 private:
  ncclComm_t comm_;
  bool aborted_ = false;
};

class EventWork final : public Work {
 public:
  EventWork(cudaEvent_t ev, CollectiveWatchdog* w, uint64_t id, NcclComm* comm)
      : ev_(ev), watchdog_(w), id_(id), comm_(comm) {}
  ~EventWork() override {
    if (watchdog_) watchdog_->End(id_);
    cudaEventDestroy(ev_);
  }
  Status Wait() override {
    // Poll so that an asynchronous NCCL error (peer lost) surfaces here
    // instead of a blocking cudaEventSynchronize hanging forever.
    for (;;) {
      const cudaError_t q = cudaEventQuery(ev_);
      if (q == cudaSuccess) break;
      if (q != cudaErrorNotReady) return CudaError("waiting for a collective", q);
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm_->get(), &async);
      if (async != ncclSuccess && async != ncclInProgress) {
        comm_->MarkFailed();
        return NcclError("collective failed", async);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    if (watchdog_) watchdog_->End(id_);
    watchdog_ = nullptr;
    return Status::Ok();
  }
  Status WaitOnStream(void* stream) override {
    CUDA_OK("cudaStreamWaitEvent", cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), ev_, 0));
    return Status::Ok();
  }

 private:
  cudaEvent_t ev_;
  CollectiveWatchdog* watchdog_;
  uint64_t id_;
  NcclComm* comm_;
};

class NcclGroup final : public ProcessGroup {
 public:
  NcclGroup(std::string name, int rank, int size, int device, std::unique_ptr<NcclComm> comm,
            cudaStream_t stream, CollectiveWatchdog* watchdog)
      : name_(std::move(name)), rank_(rank), size_(size), device_(device), comm_(std::move(comm)),
        stream_(stream), watchdog_(watchdog) {}
  ~NcclGroup() override {
    cudaSetDevice(device_);
    cudaStreamSynchronize(stream_);
    for (PendingSpan& p : pending_) {
      cudaEventDestroy(p.begin);
      cudaEventDestroy(p.end);
    }
    if (scratch_) cudaFree(scratch_);
    comm_.reset();
    cudaStreamDestroy(stream_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }
  const char* backend() const override { return "nccl"; }
  void SetComputeStream(void* stream) override { compute_ = static_cast<cudaStream_t>(stream); }

  std::unique_ptr<Work> AllGather(const void* shard, void* full, size_t count, DType dtype) override {
    return Run("all_gather", count, dtype, dtype, [&]() -> Status {
      NCCL_OK("ncclAllGather", ncclAllGather(shard, full, count, NcclType(dtype), comm_->get(), stream_));
      return Status::Ok();
    });
  }

  std::unique_ptr<Work> ReduceScatter(const void* full, void* shard, size_t count, DType dtype,
                                      ReduceOp op, DType reduce_dtype) override {
    if (dtype == DType::kU8 || reduce_dtype == DType::kU8 || op == ReduceOp::kMax) {
      return std::make_unique<DoneWork>(
          InvalidArgument("reduce_scatter: u8 and max are not supported"));
    }
    return Run("reduce_scatter", count, dtype, reduce_dtype, [&]() -> Status {
      if (dtype == reduce_dtype) {
        NCCL_OK("ncclReduceScatter", ncclReduceScatter(full, shard, count, NcclType(dtype), NcclOp(op),
                                                       comm_->get(), stream_));
        return Status::Ok();
      }
      // Cast the full input to the reduce dtype, reduce, cast the shard back.
      const size_t total = count * size_;
      HT_ASSIGN_OR_RETURN(char* tmp, Scratch((total + count) * DTypeSize(reduce_dtype)));
      void* tin = tmp;
      void* tout = tmp + total * DTypeSize(reduce_dtype);
      HT_RETURN_IF_ERROR(CastOn(full, dtype, tin, reduce_dtype, total));
      NCCL_OK("ncclReduceScatter", ncclReduceScatter(tin, tout, count, NcclType(reduce_dtype),
                                                     NcclOp(op), comm_->get(), stream_));
      return CastOn(tout, reduce_dtype, shard, dtype, count);
    });
  }

  std::unique_ptr<Work> AllReduce(void* buf, size_t count, DType dtype, ReduceOp op,
                                  DType reduce_dtype) override {
    if (dtype == DType::kU8 || reduce_dtype == DType::kU8 ||
        (op == ReduceOp::kMax && (dtype != DType::kF32 || reduce_dtype != DType::kF32))) {
      return std::make_unique<DoneWork>(
          InvalidArgument("all_reduce: u8 cannot be reduced; max is supported for fp32 only"));
    }
    return Run("all_reduce", count, dtype, reduce_dtype, [&]() -> Status {
      if (dtype == reduce_dtype) {
        NCCL_OK("ncclAllReduce", ncclAllReduce(buf, buf, count, NcclType(dtype), NcclOp(op),
                                               comm_->get(), stream_));
        return Status::Ok();
      }
      HT_ASSIGN_OR_RETURN(char* tmp, Scratch(count * DTypeSize(reduce_dtype)));
      HT_RETURN_IF_ERROR(CastOn(buf, dtype, tmp, reduce_dtype, count));
      NCCL_OK("ncclAllReduce", ncclAllReduce(tmp, tmp, count, NcclType(reduce_dtype), NcclOp(op),
                                             comm_->get(), stream_));
      return CastOn(tmp, reduce_dtype, buf, dtype, count);
    });
  }

  std::unique_ptr<Work> Broadcast(void* buf, size_t count, DType dtype, int root) override {
    if (root < 0 || root >= size_) {
      return std::make_unique<DoneWork>(InvalidArgument("broadcast root " + std::to_string(root) +
                                                        " outside group '" + name_ + "'"));
    }
    return Run("broadcast", count, dtype, dtype, [&]() -> Status {
      NCCL_OK("ncclBroadcast",
              ncclBroadcast(buf, buf, count, NcclType(dtype), root, comm_->get(), stream_));
      return Status::Ok();
    });
  }

  Status AllReduceHost(float* data, size_t count, ReduceOp op) override {
    float* dev = nullptr;
    {
      std::lock_guard<std::mutex> l(mu_);
      cudaSetDevice(device_);
      HT_ASSIGN_OR_RETURN(char* tmp, Scratch(count * sizeof(float)));
      dev = reinterpret_cast<float*>(tmp);
      CUDA_OK("copy to device", cudaMemcpyAsync(dev, data, count * sizeof(float), cudaMemcpyHostToDevice, stream_));
    }
    HT_RETURN_IF_ERROR(AllReduce(dev, count, DType::kF32, op, DType::kF32)->Wait());
    std::lock_guard<std::mutex> l(mu_);
    CUDA_OK("copy to host", cudaMemcpyAsync(data, dev, count * sizeof(float), cudaMemcpyDeviceToHost, stream_));
    CUDA_OK("cudaStreamSynchronize", cudaStreamSynchronize(stream_));
    return Status::Ok();
  }

  Status Barrier() override {
    // NCCL has no barrier: a one-element all-reduce on the group's stream.
    HT_ASSIGN_OR_RETURN(char* tmp, Scratch(4));
    cudaMemsetAsync(tmp, 0, 4, stream_);
    return AllReduce(tmp, 1, DType::kF32, ReduceOp::kSum, DType::kF32)->Wait();
  }

 private:
  template <typename F>
  std::unique_ptr<Work> Run(const char* op, size_t count, DType dtype, DType reduce, F&& enqueue) {
    std::lock_guard<std::mutex> l(mu_);
    if (cudaError_t e = cudaSetDevice(device_); e != cudaSuccess) {
      return std::make_unique<DoneWork>(CudaError("cudaSetDevice", e));
    }
    const std::string what = std::string(op) + " on group '" + name_ + "' (nccl, rank " +
                             std::to_string(rank_) + " of " + std::to_string(size_) + ", " +
                             std::to_string(count) + " x " + DTypeName(dtype) + " reduce " +
                             DTypeName(reduce) + ")";
    if (compute_) {
      cudaEvent_t ready;
      cudaEventCreateWithFlags(&ready, cudaEventDisableTiming);
      cudaEventRecord(ready, compute_);
      cudaStreamWaitEvent(stream_, ready, 0);
      cudaEventDestroy(ready);  // released once the wait is satisfied
    }
    // Tracing: timing events around the collective on the group's stream
    // (the first fires when the stream reaches it, after the compute wait).
    const bool traced = trace_ != nullptr && trace_->active() && pending_.size() < kMaxPendingTrace;
    cudaEvent_t t0 = nullptr, t1 = nullptr;
    if (traced && cudaEventCreate(&t0) == cudaSuccess && cudaEventCreate(&t1) == cudaSuccess) {
      cudaEventRecord(t0, stream_);
    }
    Status s = enqueue();
    if (t1 != nullptr) {
      cudaEventRecord(t1, stream_);
      const size_t moved = std::string_view(op) == "reduce_scatter" || std::string_view(op) == "all_gather"
                               ? count * size_
                               : count;
      pending_.push_back({t0, t1, op,
                          {{"group", name_},
                           {"seq", seq_},
                           {"count", moved},
                           {"dtype", DTypeName(dtype)},
                           {"reduce_dtype", DTypeName(reduce)},
                           {"bytes", moved * DTypeSize(dtype)},
                           {"ranks", size_}}});
    } else if (t0 != nullptr) {
      cudaEventDestroy(t0);
    }
    ++seq_;
    if (!s.ok()) {
      comm_->MarkFailed();
      return std::make_unique<DoneWork>(Status(s.code(), what + ": " + s.message()));
    }
    cudaEvent_t done;
    cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
    cudaEventRecord(done, stream_);
    const uint64_t id =
        watchdog_ ? watchdog_->Begin(what, [done] { return cudaEventQuery(done) == cudaSuccess; }) : 0;
    return std::make_unique<EventWork>(done, watchdog_, id, comm_.get());
  }

  struct PendingSpan {
    cudaEvent_t begin, end;
    const char* op;
    nlohmann::json args;
  };
  static constexpr size_t kMaxPendingTrace = 100000;

 public:
  void SetTrace(trace::Recorder* recorder) override {
    std::lock_guard<std::mutex> l(mu_);
    trace_ = recorder;
    if (trace_ != nullptr) track_ = trace_->Track("nccl " + name_);
  }

  // Waits for the group's stream (an anchor event on it), then places every
  // traced collective on the recorder's clock.
  void FlushTrace() override {
    std::lock_guard<std::mutex> l(mu_);
    if (trace_ == nullptr || pending_.empty()) return;
    cudaSetDevice(device_);
    cudaEvent_t anchor = nullptr;
    if (cudaEventCreate(&anchor) == cudaSuccess && cudaEventRecord(anchor, stream_) == cudaSuccess &&
        cudaEventSynchronize(anchor) == cudaSuccess) {
      const double now = trace_->NowUs();
      for (PendingSpan& p : pending_) {
        float to_begin = 0, to_end = 0;
        if (cudaEventElapsedTime(&to_begin, p.begin, anchor) == cudaSuccess &&
            cudaEventElapsedTime(&to_end, p.end, anchor) == cudaSuccess) {
          trace_->Complete(track_, p.op, "collective", now - 1000.0 * to_begin, now - 1000.0 * to_end,
                           std::move(p.args));
        }
      }
    }
    cudaGetLastError();
    if (anchor != nullptr) cudaEventDestroy(anchor);
    for (PendingSpan& p : pending_) {
      cudaEventDestroy(p.begin);
      cudaEventDestroy(p.end);
    }
    pending_.clear();
  }

 private:
  StatusOr<char*> Scratch(size_t bytes) {
    if (bytes > scratch_bytes_) {
      // Earlier users of the scratch buffer are ordered before us on stream_.
      cudaStreamSynchronize(stream_);
      if (scratch_) cudaFree(scratch_);
      scratch_ = nullptr;
      scratch_bytes_ = 0;
      CUDA_OK("cudaMalloc(collective scratch)", cudaMalloc(&scratch_, bytes));
      scratch_bytes_ = bytes;
    }
    return static_cast<char*>(scratch_);
  }

  Status CastOn(const void* in, DType from, void* out, DType to, size_t n) {
    using kernels::cuda::Cast;
    cudaError_t e;
    if (from == DType::kF32 && to == DType::kBF16) {
      e = Cast<__nv_bfloat16, float>(static_cast<__nv_bfloat16*>(out), static_cast<const float*>(in), n, stream_);
    } else if (from == DType::kBF16 && to == DType::kF32) {
      e = Cast<float, __nv_bfloat16>(static_cast<float*>(out), static_cast<const __nv_bfloat16*>(in), n, stream_);
    } else {
      e = cudaMemcpyAsync(out, in, n * DTypeSize(from), cudaMemcpyDeviceToDevice, stream_);
    }
    CUDA_OK("cast for collective", e);
    return Status::Ok();
  }

  std::string name_;
  int rank_, size_, device_;
  std::unique_ptr<NcclComm> comm_;
  cudaStream_t stream_;
  cudaStream_t compute_ = nullptr;
  CollectiveWatchdog* watchdog_;
  std::mutex mu_;
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
  // Tracing (mu_).
  trace::Recorder* trace_ = nullptr;
  int track_ = 0;
  uint64_t seq_ = 0;  // collectives issued
  std::vector<PendingSpan> pending_;
};

}  // namespace

NcclTuning NcclTuningFor(const DistOptions& options, const std::string& group_name) {
  std::string kind;
  for (char c : group_name) {
    if (c >= 'a' && c <= 'z') kind += c;
  }
  if (kind == "shard") return options.nccl_shard;
  if (kind == "replica") return options.nccl_replica;
  if (kind == "world") return options.nccl_world;
  return {};
}

// ncclCommInitRank waits until every member of the group joined; a member
// that died after the rendezvous would hold this rank there forever. The
// start-up deadline bounds it (at least kMinInitWait): past it the process
// says which group and ends with the retryable code, as a rank stuck in a
// collective does (it cannot be unwound from NCCL's bootstrap either).
class InitDeadline {
 public:
  static constexpr std::chrono::milliseconds kMinInitWait{5000};
  InitDeadline(std::string what, std::chrono::milliseconds left)
      : thread_([this, what = std::move(what), left = std::max(left, kMinInitWait)] {
          std::unique_lock<std::mutex> l(mu_);
          if (cv_.wait_for(l, left, [this] { return done_; })) return;
          spdlog::critical("{} did not complete within the start-up deadline ({:.0f} s; HT_RENDEZVOUS_TIMEOUT_S): "
                           "a member of the group died after the rendezvous or cannot be reached; exiting {}",
                           what, left.count() / 1e3, contract::kExitRetryable);
          spdlog::default_logger()->flush();
          std::_Exit(contract::kExitRetryable);
        }) {}
  ~InitDeadline() {
    {
      std::lock_guard<std::mutex> l(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  InitDeadline(const InitDeadline&) = delete;
  InitDeadline& operator=(const InitDeadline&) = delete;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;  // last: starts after the members above exist
};

StatusOr<std::unique_ptr<ProcessGroup>> CreateNcclGroup(
    const std::string& name, const std::vector<int>& ranks, int world_rank, int cuda_device,
    launch::TcpStoreClient* store, std::chrono::milliseconds rendezvous_timeout,
    CollectiveWatchdog* watchdog, const NcclTuning& tuning) {
  int grank = -1;
  for (size_t i = 0; i < ranks.size(); ++i)
    if (ranks[i] == world_rank) grank = static_cast<int>(i);
  if (grank < 0) {
    return InvalidArgument("rank " + std::to_string(world_rank) + " is not a member of group '" + name + "'");
  }
  CUDA_OK("cudaSetDevice(" + std::to_string(cuda_device) + ")", cudaSetDevice(cuda_device));
  ncclUniqueId id;
  const std::string key = "nccl/" + name + "/id";
  if (grank == 0) {
    NCCL_OK("ncclGetUniqueId", ncclGetUniqueId(&id));
    HT_RETURN_IF_ERROR(store->Set(key, std::string(reinterpret_cast<const char*>(&id), sizeof(id))));
  } else {
    HT_ASSIGN_OR_RETURN(std::string v, store->Get(key, rendezvous_timeout));
    if (v.size() != sizeof(id)) return DataLoss("malformed NCCL unique id for group '" + name + "'");
    std::memcpy(&id, v.data(), sizeof(id));
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  if (tuning.max_ctas > 0) config.maxCTAs = tuning.max_ctas;
  ncclComm_t comm = nullptr;
  {
    InitDeadline deadline("NCCL group '" + name + "': ncclCommInitRankConfig (rank " + std::to_string(grank) +
                              " of " + std::to_string(ranks.size()) + ")",
                          rendezvous_timeout);
    NCCL_OK("ncclCommInitRankConfig for group '" + name + "'",
            ncclCommInitRankConfig(&comm, static_cast<int>(ranks.size()), id, grank, &config));
  }
  auto owned = std::make_unique<NcclComm>(comm);
  int lo = 0, hi = 0;
  cudaDeviceGetStreamPriorityRange(&lo, &hi);
  cudaStream_t stream;
  CUDA_OK("cudaStreamCreate", cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking,
                                                           tuning.low_priority ? lo : hi));
  return std::unique_ptr<ProcessGroup>(new NcclGroup(name, grank, static_cast<int>(ranks.size()),
                                                     cuda_device, std::move(owned), stream, watchdog));
}

StatusOr<std::unique_ptr<DistContext>> CreateNcclDistContext(const launch::RankEnv& env,
                                                             const DistOptions& options,
                                                             int cuda_device) {
  return DistContext::Create(env, options, [&](DistContext& d) -> StatusOr<GroupFactory> {
    DistContext* self = &d;
    // Every group's unique-id exchange ends by the start-up deadline.
    return GroupFactory([self, cuda_device, options](const std::string& name,
                                                              const std::vector<int>& ranks) {
      return CreateNcclGroup(name, ranks, self->rank(), cuda_device, &self->store(), self->StartupTimeLeft(),
                             &self->watchdog(), NcclTuningFor(options, name));
    });
  });
}

}  // namespace hypertrain::parallel
