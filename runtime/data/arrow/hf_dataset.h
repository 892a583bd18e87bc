#pragma once
// Hugging Face `datasets` directories written by save_to_disk:
//   Dataset:     DIR/state.json ("_data_files": [{"filename": ...}]),
//                DIR/dataset_info.json, DIR/data-00000-of-0000N.arrow, ...
//   DatasetDict: DIR/dataset_dict.json ({"splits": ["train", ...]}) and one
//                Dataset directory per split.
// The recipes' `dataset_type: hf` points model.data.train_dir at one.
#include <string>
#include <vector>

#include "core/status.h"

namespace hypertrain::data::arrow {

// True when dir looks like a save_to_disk Dataset or DatasetDict.
bool IsHfDatasetDir(const std::string& dir);

// The Arrow files of the dataset in order (a DatasetDict's `split`).
// Errors name the directory and what is missing (e.g. the available splits).
StatusOr<std::vector<std::string>> HfDatasetArrowFiles(const std::string& dir, const std::string& split = "train");

}  // namespace hypertrain::data::arrow
