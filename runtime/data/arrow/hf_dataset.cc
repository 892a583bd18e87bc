#include "runtime/data/arrow/hf_dataset.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"

namespace hypertrain::data::arrow {

namespace fs = std::filesystem;
using nlohmann::json;

bool IsHfDatasetDir(const std::string& dir) {
  std::error_code ec;
  return fs::exists(fs::path(dir) / "state.json", ec) || fs::exists(fs::path(dir) / "dataset_dict.json", ec);
}

StatusOr<std::vector<std::string>> HfDatasetArrowFiles(const std::string& dir, const std::string& split) {
  std::error_code ec;
  const fs::path root(dir);
  if (fs::exists(root / "dataset_dict.json", ec)) {
    HT_ASSIGN_OR_RETURN(std::string text, ReadFileToString((root / "dataset_dict.json").string()));
    std::vector<std::string> splits;
    try {
      splits = json::parse(text).at("splits").get<std::vector<std::string>>();
    } catch (const std::exception& e) {
      return DataLoss(fmt::format("{}/dataset_dict.json: malformed: {}", dir, e.what()));
    }
    if (std::find(splits.begin(), splits.end(), split) == splits.end()) {
      return NotFound(fmt::format("{} is a DatasetDict without a '{}' split (splits: {})", dir, split,
                                  fmt::join(splits, ", ")));
    }
    return HfDatasetArrowFiles((root / split).string(), split);
  }
  if (!fs::exists(root / "state.json", ec)) {
    return NotFound(fmt::format("{} is not a Hugging Face dataset directory (no state.json or "
                                "dataset_dict.json; write it with Dataset.save_to_disk)", dir));
  }
  HT_ASSIGN_OR_RETURN(std::string text, ReadFileToString((root / "state.json").string()));
  std::vector<std::string> files;
  try {
    const json state = json::parse(text);
    for (const json& f : state.at("_data_files")) files.push_back((root / f.at("filename").get<std::string>()).string());
  } catch (const std::exception& e) {
    return DataLoss(fmt::format("{}/state.json: malformed: {}", dir, e.what()));
  }
  if (files.empty()) return NotFound(fmt::format("{}/state.json lists no data files", dir));
  for (const std::string& f : files) {
    if (!fs::is_regular_file(f, ec)) return NotFound(fmt::format("{}: listed in {}/state.json but missing", f, dir));
  }
  return files;
}

}  // namespace hypertrain::data::arrow
