// Backend-descriptor plumbing for the cuDNN attention graphs.
#include "runtime/kernels/cuda/attention_cudnn_graph.h"

#include <algorithm>
#include <string>
#include <utility>

namespace hypertrain::kernels::cuda::cudnn_attention::internal {

std::string CudnnMessage(cudnnStatus_t st, const std::string& what) {
  char detail[1024] = {0};
  cudnnGetLastErrorString(detail, sizeof(detail));
  std::string m = "cudnn attention: " + what + ": " + cudnnGetErrorString(st);
  if (detail[0] != '\0') m += std::string(" (") + detail + ")";
  return m;
}

namespace {
Status Check(cudnnStatus_t st, const std::string& what) {
  if (st == CUDNN_STATUS_SUCCESS) return Status::Ok();
  return FailedPrecondition(CudnnMessage(st, what));
}
}  // namespace

Descriptor::~Descriptor() {
  if (desc_ != nullptr) cudnnBackendDestroyDescriptor(desc_);
}

Status Descriptor::Create(cudnnBackendDescriptorType_t type) {
  return Check(cudnnBackendCreateDescriptor(type, &desc_),
               "create descriptor " + std::to_string(int(type)));
}

Status Descriptor::Set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
                       int64_t count, const void* values) {
  return Check(cudnnBackendSetAttribute(desc_, name, type, count, values),
               "set attribute " + std::to_string(int(name)));
}

Status Descriptor::SetDescriptor(cudnnBackendAttributeName_t name, const Descriptor& value) {
  cudnnBackendDescriptor_t raw = value.get();
  return Set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw);
}

Status Descriptor::Finalize(const char* what) {
  return Check(cudnnBackendFinalize(desc_), std::string("finalize ") + what);
}

Status GraphBuilder::AddTensor(int64_t uid, Dims dims, Dims strides, cudnnDataType_t type,
                               bool is_virtual, bool by_value) {
  auto d = std::make_unique<Descriptor>();
  HT_RETURN_IF_ERROR(d->Create(CUDNN_BACKEND_TENSOR_DESCRIPTOR));
  const int64_t alignment = 16;
  HT_RETURN_IF_ERROR(d->Set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type));
  HT_RETURN_IF_ERROR(d->Set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data()));
  HT_RETURN_IF_ERROR(d->Set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data()));
  HT_RETURN_IF_ERROR(d->Set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid));
  HT_RETURN_IF_ERROR(d->Set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment));
  HT_RETURN_IF_ERROR(d->Set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual));
  if (by_value) {
    HT_RETURN_IF_ERROR(d->Set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value));
  }
  HT_RETURN_IF_ERROR(d->Finalize("tensor"));
  tensors_.push_back({uid, std::move(d)});
  return Status::Ok();
}

void GraphBuilder::Tensor(int64_t uid, Dims dims, Dims strides, cudnnDataType_t type) {
  if (error_.ok()) Note(AddTensor(uid, dims, strides, type, false, false));
}

void GraphBuilder::Scalar(int64_t uid) {
  if (error_.ok()) Note(AddTensor(uid, {1, 1, 1, 1}, {1, 1, 1, 1}, CUDNN_DATA_FLOAT, false, true));
}

int64_t GraphBuilder::Virtual(Dims dims, Dims strides, cudnnDataType_t type) {
  const int64_t uid = next_virtual_uid_++;
  if (error_.ok()) Note(AddTensor(uid, dims, strides, type, true, false));
  return uid;
}

Descriptor* GraphBuilder::Find(int64_t uid) {
  for (auto& t : tensors_) {
    if (t.uid == uid) return t.desc.get();
  }
  Note(Internal("cudnn attention: graph uses undeclared tensor " + std::to_string(uid)));
  return nullptr;
}

void GraphBuilder::Matmul(int64_t a, int64_t b, int64_t c) {
  if (!error_.ok()) return;
  Descriptor *ta = Find(a), *tb = Find(b), *tc = Find(c);
  if (!error_.ok()) return;
  auto mm = std::make_unique<Descriptor>();
  auto op = std::make_unique<Descriptor>();
  const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
  Note([&]() -> Status {
    HT_RETURN_IF_ERROR(mm->Create(CUDNN_BACKEND_MATMUL_DESCRIPTOR));
    HT_RETURN_IF_ERROR(mm->Set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp));
    HT_RETURN_IF_ERROR(mm->Finalize("matmul"));
    HT_RETURN_IF_ERROR(op->Create(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR));
    HT_RETURN_IF_ERROR(op->SetDescriptor(CUDNN_ATTR_OPERATION_MATMUL_ADESC, *ta));
    HT_RETURN_IF_ERROR(op->SetDescriptor(CUDNN_ATTR_OPERATION_MATMUL_BDESC, *tb));
    HT_RETURN_IF_ERROR(op->SetDescriptor(CUDNN_ATTR_OPERATION_MATMUL_CDESC, *tc));
    HT_RETURN_IF_ERROR(op->SetDescriptor(CUDNN_ATTR_OPERATION_MATMUL_DESC, *mm));
    return op->Finalize("matmul operation");
  }());
  op_params_.push_back(std::move(mm));
  ops_.push_back(std::move(op));
}

void GraphBuilder::Pointwise(cudnnPointwiseMode_t mode, int64_t x, int64_t y, int64_t b,
                             int64_t t, cudnnDataType_t math, int64_t axis) {
  if (!error_.ok()) return;
  Descriptor* tx = Find(x);
  Descriptor* ty = Find(y);
  Descriptor* tb = b >= 0 ? Find(b) : nullptr;
  Descriptor* tt = t >= 0 ? Find(t) : nullptr;
  if (!error_.ok()) return;
  auto pw = std::make_unique<Descriptor>();
  auto op = std::make_unique<Descriptor>();
  Note([&]() -> Status {
    HT_RETURN_IF_ERROR(pw->Create(CUDNN_BACKEND_POINTWISE_DESCRIPTOR));
    HT_RETURN_IF_ERROR(pw->Set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode));
    HT_RETURN_IF_ERROR(pw->Set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &math));
    if (axis >= 0) {
      HT_RETURN_IF_ERROR(pw->Set(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis));
    }
    HT_RETURN_IF_ERROR(pw->Finalize("pointwise"));
    HT_RETURN_IF_ERROR(op->Create(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR));
    HT_RETURN_IF_ERROR(op->SetDescriptor(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, *pw));
    HT_RETURN_IF_ERROR(op->SetDescriptor(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, *tx));
    if (tb != nullptr) {
      HT_RETURN_IF_ERROR(op->SetDescriptor(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *tb));
    }
    if (tt != nullptr) {
      HT_RETURN_IF_ERROR(op->SetDescriptor(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, *tt));
    }
    HT_RETURN_IF_ERROR(op->SetDescriptor(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, *ty));
    return op->Finalize("pointwise operation");
  }());
  op_params_.push_back(std::move(pw));
  ops_.push_back(std::move(op));
}

void GraphBuilder::Reduce(cudnnReduceTensorOp_t red, int64_t x, int64_t y) {
  if (!error_.ok()) return;
  Descriptor* tx = Find(x);
  Descriptor* ty = Find(y);
  if (!error_.ok()) return;
  auto rd = std::make_unique<Descriptor>();
  auto op = std::make_unique<Descriptor>();
  const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
  Note([&]() -> Status {
    HT_RETURN_IF_ERROR(rd->Create(CUDNN_BACKEND_REDUCTION_DESCRIPTOR));
    HT_RETURN_IF_ERROR(
        rd->Set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &red));
    HT_RETURN_IF_ERROR(rd->Set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp));
    HT_RETURN_IF_ERROR(rd->Finalize("reduction"));
    HT_RETURN_IF_ERROR(op->Create(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR));
    HT_RETURN_IF_ERROR(op->SetDescriptor(CUDNN_ATTR_OPERATION_REDUCTION_DESC, *rd));
    HT_RETURN_IF_ERROR(op->SetDescriptor(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, *tx));
    HT_RETURN_IF_ERROR(op->SetDescriptor(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, *ty));
    return op->Finalize("reduction operation");
  }());
  op_params_.push_back(std::move(rd));
  ops_.push_back(std::move(op));
}

void GraphBuilder::Reshape(int64_t x, int64_t y) {
  if (!error_.ok()) return;
  Descriptor* tx = Find(x);
  Descriptor* ty = Find(y);
  if (!error_.ok()) return;
  auto op = std::make_unique<Descriptor>();
  Note([&]() -> Status {
    HT_RETURN_IF_ERROR(op->Create(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR));
    HT_RETURN_IF_ERROR(op->SetDescriptor(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, *tx));
    HT_RETURN_IF_ERROR(op->SetDescriptor(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, *ty));
    return op->Finalize("reshape operation");
  }());
  ops_.push_back(std::move(op));
}

Status GraphBuilder::Build(cudnnHandle_t handle, Descriptor* graph) {
  HT_RETURN_IF_ERROR(error_);
  std::vector<cudnnBackendDescriptor_t> raw;
  for (const auto& op : ops_) raw.push_back(op->get());
  HT_RETURN_IF_ERROR(graph->Create(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR));
  HT_RETURN_IF_ERROR(graph->Set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                static_cast<int64_t>(raw.size()), raw.data()));
  HT_RETURN_IF_ERROR(graph->Set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle));
  return graph->Finalize("operation graph");
}

namespace {

// Engine configurations the heuristics propose for `graph` in `mode`.
Status HeuristicConfigs(cudnnHandle_t handle, const Descriptor& graph, cudnnBackendHeurMode_t mode,
                        std::vector<std::unique_ptr<Descriptor>>* configs) {
  (void)handle;
  Descriptor heur;
  HT_RETURN_IF_ERROR(heur.Create(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR));
  HT_RETURN_IF_ERROR(heur.SetDescriptor(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph));
  HT_RETURN_IF_ERROR(heur.Set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode));
  HT_RETURN_IF_ERROR(heur.Finalize("engine heuristics"));
  int64_t count = 0;
  HT_RETURN_IF_ERROR(Check(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                    CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                                                    nullptr),
                           "count heuristic results"));
  count = std::min<int64_t>(count, 16);
  if (count <= 0) return Status::Ok();
  std::vector<cudnnBackendDescriptor_t> raw(count);
  for (int64_t i = 0; i < count; ++i) {
    configs->push_back(std::make_unique<Descriptor>());
    HT_RETURN_IF_ERROR(configs->back()->Create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
    raw[i] = configs->back()->get();
  }
  int64_t got = 0;
  HT_RETURN_IF_ERROR(Check(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                    CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got,
                                                    raw.data()),
                           "get heuristic results"));
  configs->resize(std::min<int64_t>(got, count));
  return Status::Ok();
}

// Whether cuDNN notes this engine configuration as nondeterministic.
Status IsNondeterministic(const Descriptor& config, bool* nondeterministic) {
  Descriptor engine;
  HT_RETURN_IF_ERROR(engine.Create(CUDNN_BACKEND_ENGINE_DESCRIPTOR));
  cudnnBackendDescriptor_t raw = engine.get();
  int64_t n = 0;
  HT_RETURN_IF_ERROR(Check(cudnnBackendGetAttribute(config.get(), CUDNN_ATTR_ENGINECFG_ENGINE,
                                                    CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &raw),
                           "get engine of config"));
  cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  HT_RETURN_IF_ERROR(Check(
      cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                               CUDNN_TYPE_NUMERICAL_NOTE, CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n, notes),
      "get numerical notes"));
  *nondeterministic = false;
  for (int64_t i = 0; i < n && i < CUDNN_NUMERICAL_NOTE_TYPE_COUNT; ++i) {
    if (notes[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC) *nondeterministic = true;
  }
  return Status::Ok();
}

}  // namespace

Status MakePlan(cudnnHandle_t handle, const Descriptor& graph, bool skip_nondeterministic,
                Descriptor* plan, Descriptor* config, int64_t* workspace_bytes,
                std::string* tried) {
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    std::vector<std::unique_ptr<Descriptor>> configs;
    const Status st = HeuristicConfigs(handle, graph, mode, &configs);
    if (!st.ok()) {
      *tried += " [heuristics mode " + std::to_string(int(mode)) + ": " + st.message() + "]";
      continue;
    }
    if (configs.empty()) *tried += " [heuristics mode " + std::to_string(int(mode)) + ": none]";
    for (size_t i = 0; i < configs.size(); ++i) {
      if (skip_nondeterministic) {
        bool nondet = true;
        const Status nst = IsNondeterministic(*configs[i], &nondet);
        if (!nst.ok() || nondet) {
          *tried += " [config " + std::to_string(i) +
                    (nst.ok() ? ": nondeterministic]" : ": " + nst.message() + "]");
          continue;
        }
      }
      auto candidate = std::make_unique<Descriptor>();
      Status pst = candidate->Create(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      if (pst.ok()) {
        pst = candidate->Set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
      }
      if (pst.ok()) {
        pst = candidate->SetDescriptor(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, *configs[i]);
      }
      if (pst.ok()) pst = candidate->Finalize("execution plan");
      if (!pst.ok()) {
        *tried += " [config " + std::to_string(i) + ": " + pst.message() + "]";
        continue;
      }
      int64_t n = 0;
      HT_RETURN_IF_ERROR(Check(
          cudnnBackendGetAttribute(candidate->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                   CUDNN_TYPE_INT64, 1, &n, workspace_bytes),
          "get plan workspace size"));
      // Hand the finalized descriptor over to *plan.
      std::swap(*plan, *candidate);
      std::swap(*config, *configs[i]);
      return Status::Ok();
    }
  }
  return FailedPrecondition("cudnn attention: no engine configuration finalizes:" + *tried);
}

}  // namespace hypertrain::kernels::cuda::cudnn_attention::internal
