#include "runtime/ckpt/layout_desc.h"

namespace hypertrain::ckpt {

ModelLayoutDesc DescribeLayout(const model::ParamLayout& layout) {
  ModelLayoutDesc d;
  for (const model::UnitLayout& u : layout.units()) {
    UnitEntry e;
    e.index = u.index;
    e.name = u.name;
    e.padded_numel = u.padded_numel;
    for (const model::TensorSlot& t : u.tensors) e.tensors.push_back({t.name, t.shape, t.offset, t.numel});
    d.units.push_back(std::move(e));
  }
  return d;
}

}  // namespace hypertrain::ckpt
