#pragma once
// Thin RAII layer over cuDNN's backend descriptors and a builder for the
// attention operation graphs (attention_cudnn.cc). Internal to the cuDNN
// attention implementation.
#include <cudnn.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace hypertrain::kernels::cuda::cudnn_attention::internal {

// "cudnn attention: <what>: <status name> (<cuDNN's last error message>)".
std::string CudnnMessage(cudnnStatus_t st, const std::string& what);

// Owns one backend descriptor.
class Descriptor {
 public:
  Descriptor() = default;
  ~Descriptor();
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  Descriptor(Descriptor&& o) noexcept : desc_(o.desc_) { o.desc_ = nullptr; }
  Descriptor& operator=(Descriptor&& o) noexcept {
    std::swap(desc_, o.desc_);
    return *this;
  }

  Status Create(cudnnBackendDescriptorType_t type);
  Status Set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count,
             const void* values);
  // Sets a single backend-descriptor attribute (an operation's tensor or
  // op-parameter descriptor) to `value`.
  Status SetDescriptor(cudnnBackendAttributeName_t name, const Descriptor& value);
  Status Finalize(const char* what);
  cudnnBackendDescriptor_t get() const { return desc_; }

 private:
  cudnnBackendDescriptor_t desc_ = nullptr;
};

using Dims = std::array<int64_t, 4>;

// Builds one operation graph. Errors are sticky: the first failing call is
// remembered and returned by Build(), so graph code reads as a straight list
// of operations.
class GraphBuilder {
 public:
  // Non-virtual tensor (a variant-pack entry) with a caller-chosen uid.
  void Tensor(int64_t uid, Dims dims, Dims strides, cudnnDataType_t type);
  // By-value fp32 scalar ([1,1,1,1]); its value is passed at execute time.
  void Scalar(int64_t uid);
  // Virtual intermediate; returns its uid.
  int64_t Virtual(Dims dims, Dims strides, cudnnDataType_t type);

  void Matmul(int64_t a, int64_t b, int64_t c);
  // y = mode(x [, b [, t]]); math is the compute type; axis for GEN_INDEX.
  void Pointwise(cudnnPointwiseMode_t mode, int64_t x, int64_t y, int64_t b = -1, int64_t t = -1,
                 cudnnDataType_t math = CUDNN_DATA_FLOAT, int64_t axis = -1);
  void Reduce(cudnnReduceTensorOp_t op, int64_t x, int64_t y);
  void Reshape(int64_t x, int64_t y);

  // Finalizes the operation graph into *graph.
  Status Build(cudnnHandle_t handle, Descriptor* graph);

 private:
  Descriptor* Find(int64_t uid);
  void Note(const Status& st) {
    if (error_.ok() && !st.ok()) error_ = st;
  }
  Status AddTensor(int64_t uid, Dims dims, Dims strides, cudnnDataType_t type, bool is_virtual,
                   bool by_value);

  struct TensorEntry {
    int64_t uid;
    std::unique_ptr<Descriptor> desc;
  };
  std::vector<TensorEntry> tensors_;
  std::vector<std::unique_ptr<Descriptor>> ops_;
  std::vector<std::unique_ptr<Descriptor>> op_params_;  // matmul/pointwise/reduction descriptors
  int64_t next_virtual_uid_ = 1000;
  Status error_;
};

// Picks the first engine configuration (heuristics mode A, then fallback)
// that finalizes into an execution plan for `graph`. With
// skip_nondeterministic, engines noted NONDETERMINISTIC are passed over.
// Returns the plan, the engine configuration it was made from (keep it alive
// with the plan and the graph) and its workspace size; `tried` describes what
// was rejected.
Status MakePlan(cudnnHandle_t handle, const Descriptor& graph, bool skip_nondeterministic,
                Descriptor* plan, Descriptor* config, int64_t* workspace_bytes,
                std::string* tried);

}  // namespace hypertrain::kernels::cuda::cudnn_attention::internal
