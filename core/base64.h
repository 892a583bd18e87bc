#pragma once
// Standard base64 (RFC 4648, with padding) through OpenSSL: Kubernetes
// Secret/ConfigMap binary data, kubeconfig certificate data, protobuf bytes.
#include <string>
#include <string_view>

#include "core/status.h"

namespace hypertrain {

std::string Base64Encode(std::string_view data);
// InvalidArgument on characters outside the alphabet or a bad length;
// whitespace (line breaks in PEM-style data) is skipped.
StatusOr<std::string> Base64Decode(std::string_view text);

}  // namespace hypertrain
