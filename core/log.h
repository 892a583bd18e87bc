#pragma once
// The one logger of every hypertrain binary: spdlog's default logger, on
// stderr, as text or as one JSON object per line.
//
//   text: [2026-11-25 18:01:02.123] [info] [rank 3] resumed at step 40
//   json: {"time":"2026-11-25T18:01:02.123Z","level":"info","rank":"3","msg":"resumed at step 40"}
//
// Context fields (e.g. rank, component) are fixed at Init and appear on every
// line. Binaries call Init once from main, from their --log-format and
// --log-level flags; libraries only call spdlog::info/warn/... .
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <spdlog/common.h>

#include "core/status.h"

namespace hypertrain::log {

enum class Format { kText, kJson };

// "text" or "json".
StatusOr<Format> ParseFormat(std::string_view s);
// "trace", "debug", "info", "warn", "error", "critical" or "off".
StatusOr<spdlog::level::level_enum> ParseLevel(std::string_view s);

using Fields = std::vector<std::pair<std::string, std::string>>;

// Replaces the default logger's sink and format; InvalidArgument names the
// flag value that is wrong.
Status Init(std::string_view format, std::string_view level, Fields context = {});
void Init(Format format, spdlog::level::level_enum level, Fields context = {});

// True after an Init with Format::kJson: code that would write its own line to
// stderr (a progress line, a usage error) logs it instead, so that a JSON log
// holds only JSON lines.
bool IsJson();

// --log-format json given on a command line (either spelling, anywhere), for
// the usage errors reported before the flags are parsed.
bool JsonRequested(int argc, const char* const* argv);

}  // namespace hypertrain::log
