#pragma once
// The trainer's ParamLayout as checkpointing sees it (names, shapes, offsets
// of every tensor in every unit, padded unit sizes).
#include "runtime/ckpt/format.h"
#include "runtime/model/layout.h"

namespace hypertrain::ckpt {

ModelLayoutDesc DescribeLayout(const model::ParamLayout& layout);

}  // namespace hypertrain::ckpt
