#include "runtime/kernels/attention_impl.h"

namespace hypertrain::kernels {
namespace {
constexpr AttentionImpl kAttentionImpls[] = {AttentionImpl::kAuto,      AttentionImpl::kCudnn,
                                             AttentionImpl::kCudnnFast, AttentionImpl::kCudnnForward,
                                             AttentionImpl::kTiled,     AttentionImpl::kSimple};
}  // namespace

const char* AttentionImplName(AttentionImpl impl) {
  switch (impl) {
    case AttentionImpl::kAuto: return "auto";
    case AttentionImpl::kCudnn: return "cudnn";
    case AttentionImpl::kCudnnFast: return "cudnn-fast";
    case AttentionImpl::kCudnnForward: return "cudnn-fwd";
    case AttentionImpl::kTiled: return "tiled";
    case AttentionImpl::kSimple: return "simple";
  }
  return "unknown";
}

const std::vector<std::string>& AttentionImplNames() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> names;
    for (AttentionImpl a : kAttentionImpls) names.push_back(AttentionImplName(a));
    return names;
  }();
  return kNames;
}

StatusOr<AttentionImpl> ParseAttentionImpl(const std::string& name) {
  for (AttentionImpl a : kAttentionImpls) {
    if (name == AttentionImplName(a)) return a;
  }
  std::string names;
  for (const std::string& n : AttentionImplNames()) names += (names.empty() ? "" : ", ") + n;
  return InvalidArgument("cuda.attention_impl: '" + name + "' is not one of " + names);
}

}  // namespace hypertrain::kernels
