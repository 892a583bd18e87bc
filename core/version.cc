#include "core/version.h"

#include "core/version_stamp.h"  // kStampedVersion, generated from stable-status.txt

namespace hypertrain {

const std::string& Version() {
  static const std::string v = kStampedVersion[0] ? kStampedVersion : "unknown";
  return v;
}

}  // namespace hypertrain
