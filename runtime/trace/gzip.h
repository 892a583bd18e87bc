#pragma once
// gzip in memory (zlib), for trace files.
#include <string>
#include <string_view>

#include "core/status.h"

namespace hypertrain::trace {

// RFC 1952 gzip of `data`.
StatusOr<std::string> GzipCompress(std::string_view data);
// Inflates gzip data; DataLoss for corrupt or truncated input.
StatusOr<std::string> GzipDecompress(std::string_view data, const std::string& name_for_errors);
// Whether `data` starts with the gzip magic bytes.
bool IsGzip(std::string_view data);

}  // namespace hypertrain::trace
