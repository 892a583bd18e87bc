#include "runtime/data/sft/dataset.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#include "core/atomic_file.h"

namespace hypertrain::data::sft {
namespace {

constexpr char kMagic[8] = {'H', 'T', 'S', 'F', 'T', 'D', 'A', 'T'};
constexpr int64_t kHeader = 64;

template <typename T>
void Put(std::string& s, T v) {
  s.append(reinterpret_cast<const char*>(&v), sizeof(v));
}

}  // namespace

Status WriteDataset(const std::string& dir, const std::vector<Sample>& samples, uint32_t vocab,
                    nlohmann::json manifest) {
  HT_RETURN_IF_ERROR(MakeDirs(dir));
  int64_t m = 0, targets = 0;
  for (const Sample& s : samples) m += static_cast<int64_t>(s.ids.size());
  std::string head(kMagic, 8);
  Put<uint32_t>(head, 1);
  Put<uint32_t>(head, vocab);
  Put<uint64_t>(head, samples.size());
  Put<uint64_t>(head, static_cast<uint64_t>(m));
  head.resize(kHeader, '\0');
  HT_ASSIGN_OR_RETURN(AtomicFileWriter w, AtomicFileWriter::Open(dir + "/" + kSamplesFile));
  HT_RETURN_IF_ERROR(w.Append(head));
  std::string buf;
  uint64_t off = 0;
  Put<uint64_t>(buf, off);
  for (const Sample& s : samples) {
    off += s.ids.size();
    Put<uint64_t>(buf, off);
  }
  HT_RETURN_IF_ERROR(w.Append(buf));
  for (const Sample& s : samples) {
    buf.clear();
    for (size_t i = 0; i < s.ids.size(); ++i) {
      if (s.ids[i] < 0 || static_cast<uint32_t>(s.ids[i]) >= vocab) {
        return InvalidArgument(fmt::format("token id {} is outside the vocab of {}", s.ids[i], vocab));
      }
      targets += s.target[i];
      Put<uint32_t>(buf, static_cast<uint32_t>(s.ids[i]) | (s.target[i] ? kTargetBit : 0u));
    }
    HT_RETURN_IF_ERROR(w.Append(buf));
  }
  HT_RETURN_IF_ERROR(w.Commit());
  manifest["format"] = kSftFormat;
  manifest["version"] = 1;
  manifest["samples"] = samples.size();
  manifest["tokens"] = m;
  manifest["target_tokens"] = targets;
  return WriteFileAtomically(dir + "/manifest.json", manifest.dump(2) + "\n");
}

bool IsSftDataset(const std::string& dir) {
  StatusOr<std::string> text = ReadFileToString(dir + "/manifest.json");
  if (!text.ok()) return false;
  const nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
  return j.is_object() && j.value("format", std::string()) == kSftFormat;
}

StatusOr<std::unique_ptr<Dataset>> Dataset::Open(const std::string& dir) {
  std::unique_ptr<Dataset> d(new Dataset());
  HT_ASSIGN_OR_RETURN(std::string text, ReadFileToString(dir + "/manifest.json"));
  d->manifest_ = nlohmann::json::parse(text, nullptr, false);
  if (d->manifest_.is_discarded() || d->manifest_.value("format", std::string()) != kSftFormat) {
    return DataLoss(dir + "/manifest.json: not an SFT dataset manifest");
  }
  if (d->manifest_.value("version", 0) != 1) return DataLoss(dir + "/manifest.json: unsupported version");
  d->path_ = dir + "/" + kSamplesFile;
  const int fd = ::open(d->path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return errno == ENOENT ? NotFound(d->path_ + " is missing") : ErrnoStatus("open", d->path_, errno);
  }
  struct stat st {};
  ::fstat(fd, &st);
  d->map_size_ = static_cast<size_t>(st.st_size);
  if (d->map_size_ < kHeader) {
    ::close(fd);
    return DataLoss(d->path_ + ": shorter than its 64-byte header");
  }
  d->map_ = ::mmap(nullptr, d->map_size_, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (d->map_ == MAP_FAILED) {
    d->map_ = nullptr;
    return ErrnoStatus("mmap", d->path_, errno);
  }
  const char* p = static_cast<const char*>(d->map_);
  uint32_t version;
  uint64_t n, m;
  std::memcpy(&version, p + 8, 4);
  std::memcpy(&d->vocab_, p + 12, 4);
  std::memcpy(&n, p + 16, 8);
  std::memcpy(&m, p + 24, 8);
  if (std::memcmp(p, kMagic, 8) != 0) return DataLoss(d->path_ + ": bad magic (not an SFT samples file)");
  if (version != 1) return DataLoss(fmt::format("{}: unsupported version {}", d->path_, version));
  const uint64_t want = kHeader + 8 * (n + 1) + 4 * m;
  if (n > (uint64_t{1} << 40) || m > (uint64_t{1} << 42) || want != d->map_size_) {
    return DataLoss(fmt::format("{}: size {} does not match {} samples and {} tokens (want {})",
                                d->path_, d->map_size_, n, m, want));
  }
  d->n_ = static_cast<int64_t>(n);
  d->m_ = static_cast<int64_t>(m);
  d->offsets_ = reinterpret_cast<const uint64_t*>(p + kHeader);
  d->tokens_ = reinterpret_cast<const uint32_t*>(p + kHeader + 8 * (n + 1));
  for (uint64_t i = 0; i < n; ++i) {
    if (d->offsets_[i] > d->offsets_[i + 1] || d->offsets_[i + 1] > m) {
      return DataLoss(fmt::format("{}: sample {} has bad offsets", d->path_, i));
    }
  }
  if (d->offsets_[0] != 0 || d->offsets_[n] != m) return DataLoss(d->path_ + ": offsets do not cover the tokens");
  return d;
}

Dataset::~Dataset() {
  if (map_ != nullptr) ::munmap(map_, map_size_);
}

PackPlan PackBestFit(const Dataset& d, int64_t seq) {
  PackPlan plan;
  std::vector<std::pair<int64_t, int64_t>> order;  // (positions, sample)
  for (int64_t i = 0; i < d.num_samples(); ++i) {
    int64_t L = d.length(i);
    if (L < 2) {
      ++plan.skipped;
      continue;
    }
    if (L > seq + 1) {
      ++plan.truncated;
      L = seq + 1;
    }
    order.emplace_back(L - 1, i);
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::multimap<int64_t, size_t> free_space;  // remaining positions -> row
  for (const auto& [need, i] : order) {
    auto it = free_space.lower_bound(need);
    size_t row;
    int64_t left;
    if (it == free_space.end()) {
      row = plan.rows.size();
      plan.rows.emplace_back();
      left = seq;
    } else {
      row = it->second;
      left = it->first;
      free_space.erase(it);
    }
    plan.rows[row].push_back(i);
    plan.used_positions += need;
    if (left - need > 0) free_space.emplace(left - need, row);
  }
  return plan;
}

void FillRow(const Dataset& d, const std::vector<int64_t>& row, int64_t seq, int32_t ignore,
             int32_t* in, int32_t* tg, int32_t* pos) {
  int64_t t = 0;
  for (int64_t i : row) {
    const int64_t L = std::min(d.length(i), seq + 1);
    const uint32_t* x = d.tokens(i);
    for (int64_t k = 0; k + 1 < L && t < seq; ++k, ++t) {
      in[t] = static_cast<int32_t>(x[k] & ~kTargetBit);
      tg[t] = (x[k + 1] & kTargetBit) ? static_cast<int32_t>(x[k + 1] & ~kTargetBit) : ignore;
      pos[t] = static_cast<int32_t>(k);
    }
  }
  for (int64_t k = 0; t < seq; ++k, ++t) {  // the unused tail: its own sample, no loss
    in[t] = 0;
    tg[t] = ignore;
    pos[t] = static_cast<int32_t>(k);
  }
}

}  // namespace hypertrain::data::sft
