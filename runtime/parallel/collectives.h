#pragma once
// One interface for a process group's collectives, implemented by Gloo (CPU,
// host buffers, runtime/parallel/gloo_group.h) and NCCL (GPU, device buffers,
// runtime/parallel/nccl_group.h).
//
// Rules every caller follows:
//  - All ranks of a group issue the same collectives in the same order (they
//    run in issue order on one queue/stream per group).
//  - Calls return at once with a Work handle; buffers stay valid and untouched
//    by the caller until Work::Wait() returns.
//  - Counts are elements of `dtype`. AllGather: `full` holds size()*count
//    elements, rank r's shard lands at full + r*count; `shard` may alias
//    full + rank()*count (in place). ReduceScatter: the inverse; rank r gets
//    the reduction of every rank's full[r*count, (r+1)*count).
//  - `reduce_dtype` is the type the sum is carried out in: with dtype fp32 and
//    reduce_dtype bf16 the inputs are rounded to bf16, summed in bf16 (each
//    addition rounded, as NCCL does) and widened back; kAvg divides after the
//    sum in the element type. kMax: AllReduce of fp32 only (FP8 amaxes).
//  - kU8 carries raw bytes (FP8 values and the like): AllGather and Broadcast
//    only; a reduction of kU8 fails with InvalidArgument.
//  - Failures (peer lost, transport error, the backend's own timeout) come
//    back from Wait() as a Status: kDeadlineExceeded for timeouts, kUnavailable
//    for lost peers. The collective watchdog (watchdog.h) bounds a hang even
//    where the backend itself would block forever.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"

namespace hypertrain::trace {
class Recorder;
}  // namespace hypertrain::trace

namespace hypertrain::parallel {

enum class DType { kF32, kBF16, kU8 };
enum class ReduceOp { kSum, kAvg, kMax };

size_t DTypeSize(DType d);
const char* DTypeName(DType d);

class Work {
 public:
  virtual ~Work() = default;
  // Blocks until the collective is complete (NCCL: complete on the device).
  virtual Status Wait() = 0;
  // NCCL: makes `stream` (a cudaStream_t) wait for the collective without
  // blocking the host. Default: Wait().
  virtual Status WaitOnStream(void* /*stream*/) { return Wait(); }
};

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "world", "shard1", "replica0": names the group in logs and watchdog reports.
  virtual const std::string& name() const = 0;
  virtual const char* backend() const = 0;  // "gloo", "nccl"
  // NCCL: the stream (cudaStream_t) that produces the inputs of later calls;
  // each collective first waits for the work queued on it so far. Gloo: unused.
  virtual void SetComputeStream(void* /*stream*/) {}

  virtual std::unique_ptr<Work> AllGather(const void* shard, void* full, size_t count,
                                          DType dtype) = 0;
  virtual std::unique_ptr<Work> ReduceScatter(const void* full, void* shard, size_t count,
                                              DType dtype, ReduceOp op, DType reduce_dtype) = 0;
  virtual std::unique_ptr<Work> AllReduce(void* buf, size_t count, DType dtype, ReduceOp op,
                                          DType reduce_dtype) = 0;
  virtual std::unique_ptr<Work> Broadcast(void* buf, size_t count, DType dtype, int root) = 0;
  // Blocks until every rank of the group arrived.
  virtual Status Barrier() = 0;
  // Tracing (runtime/trace): while `recorder` is active every collective of
  // the group becomes a span on its own track ("<backend> <group name>") with
  // op, bytes, count, dtype and seq (issue order, equal across the group's
  // ranks): Gloo when its worker runs it, NCCL from CUDA events on the
  // group's stream, resolved by FlushTrace(). nullptr turns it off.
  virtual void SetTrace(trace::Recorder* /*recorder*/) {}
  // Puts the device-timed collectives that have completed on the recorder.
  virtual void FlushTrace() {}
  // Blocking all-reduce of a few fp32 values in HOST memory (loss, grad
  // norm), whatever memory the backend's collectives use.
  virtual Status AllReduceHost(float* data, size_t count, ReduceOp op) {
    return AllReduce(data, count, DType::kF32, op, DType::kF32)->Wait();
  }
};

// A Work that is already complete (size-1 groups, empty buffers).
class DoneWork final : public Work {
 public:
  explicit DoneWork(Status s = Status::Ok()) : status_(std::move(s)) {}
  Status Wait() override { return status_; }

 private:
  Status status_;
};

}  // namespace hypertrain::parallel
