#pragma once
// The instance-type table lives in the contract (contract/instance_types.h):
// the runtime's `hypertrain estimate` reads the same GPU facts. These names
// keep the operator's spelling.

#include "contract/instance_types.h"

namespace hypertrain::api {

using contract::InstanceType;
using contract::KnownInstanceTypes;
using contract::LookupInstanceType;

}  // namespace hypertrain::api
