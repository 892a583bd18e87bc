#pragma once
// Base64 (RFC 4648) through OpenSSL. Standard, with padding: Kubernetes
// Secret/ConfigMap binary data, kubeconfig certificate data, protobuf bytes.
// URL-safe without padding: opaque tokens that travel in URLs (list continue
// tokens).
#include <string>
#include <string_view>

#include "core/status.h"

namespace hypertrain {

std::string Base64Encode(std::string_view data);
// InvalidArgument on characters outside the alphabet or a bad length;
// whitespace (line breaks in PEM-style data) is skipped.
StatusOr<std::string> Base64Decode(std::string_view text);

// '-' and '_' for '+' and '/', no '=' padding (RFC 4648 section 5).
std::string Base64UrlEncode(std::string_view data);
// The URL-safe alphabet, padded or not; InvalidArgument on anything else
// (whitespace included).
StatusOr<std::string> Base64UrlDecode(std::string_view text);

}  // namespace hypertrain
